"""The README's run command: web server and worker come up together, with demo data, and stop together."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import time
import urllib.request
from pathlib import Path

import pytest

from tests.console.celery_clients import filesystem_client

ROOT = Path(__file__).resolve().parents[2]
pytestmark = pytest.mark.worker


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def wait_for(url: str, deadline: float) -> dict:
    while time.monotonic() < deadline:
        try:
            with urllib.request.urlopen(url, timeout=2) as response:
                return json.load(response)
        except OSError:
            time.sleep(0.5)
    raise AssertionError(f"{url} did not answer in time")


def test_it_runs_web_and_worker_in_one_process_group(tmp_path):
    port = free_port()
    env = {k: v for k, v in os.environ.items() if k not in {"DATABASE_URL", "REDIS_URL", "DEBUG", "SECRET_KEY"}}
    env.update(VAR_DIR=str(tmp_path), PORT=str(port))
    proc = subprocess.Popen(
        ["scripts/run.sh"],
        cwd=ROOT,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        start_new_session=True,
    )
    try:
        health = wait_for(f"http://127.0.0.1:{port}/healthz", time.monotonic() + 90)
        assert health["database"] == {"ok": True, "detail": "sqlite"}
        assert health["broker"] == {"ok": True, "detail": "filesystem"}
        client = filesystem_client(tmp_path)
        answer = client.send_task("console.health_check").get(timeout=90)
        assert answer == {"ok": True, "worker": socket.gethostname(), "db": True}
    finally:
        os.killpg(proc.pid, signal.SIGINT)  # what Ctrl-C in a terminal does
        output = proc.communicate(timeout=60)[0]
    assert f"Console: http://127.0.0.1:{port}/" in output
    assert "imported wechat_wxid_demo01.jsonl" in output
    assert "Warm shutdown" in output
    deadline = time.monotonic() + 20
    while leftover := subprocess.run(["pgrep", "-g", str(proc.pid)], capture_output=True, text=True).stdout.split():
        if time.monotonic() > deadline:
            raise AssertionError(f"processes still running 20 s after Ctrl-C: {leftover}")
        time.sleep(0.2)
