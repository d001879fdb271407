"""The README's run command: web server, worker and beat come up together, with demo data, and stop together."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import threading
import time
import urllib.request
from pathlib import Path

import pytest

from tests.console.celery_clients import filesystem_client

ROOT = Path(__file__).resolve().parents[2]
pytestmark = pytest.mark.worker
#: what the README promises for Ctrl-C
STOP_SECONDS = 10


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def healthz(url: str) -> dict:
    with urllib.request.urlopen(url, timeout=2) as response:
        return json.load(response)


class Output:
    """The script's output, read as it comes (a pipe nobody reads would block the script)."""

    def __init__(self, proc: subprocess.Popen[str]) -> None:
        self.lines: list[str] = []
        self.banner = threading.Event()
        self.thread = threading.Thread(target=self.read, args=(proc,), daemon=True)
        self.thread.start()

    def read(self, proc: subprocess.Popen[str]) -> None:
        assert proc.stdout is not None
        for line in proc.stdout:
            self.lines.append(line)
            if "Console: http://" in line:
                self.banner.set()

    @property
    def text(self) -> str:
        return "".join(self.lines)


def leftover(group: int) -> list[str]:
    return subprocess.run(["pgrep", "-g", str(group)], capture_output=True, text=True).stdout.split()


def test_it_runs_web_worker_and_beat_and_ctrl_c_stops_them_all(tmp_path):
    port = free_port()
    drop = {"DATABASE_URL", "REDIS_URL", "DEBUG", "SECRET_KEY", "DEMO_SAMPLES_DIR"}
    env = {k: v for k, v in os.environ.items() if k not in drop}
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
    output = Output(proc)
    url = f"http://127.0.0.1:{port}/healthz"
    try:
        assert output.banner.wait(180), output.text[-3000:]
        # the banner comes once the console answers: asked right away, it does
        health = healthz(url)
        assert health["database"] == {"ok": True, "detail": "sqlite"}
        assert health["broker"] == {"ok": True, "detail": "filesystem"}
        client = filesystem_client(tmp_path)
        for _ in range(3):  # the worker has run tasks before it is asked to stop
            answer = client.send_task("console.health_check").get(timeout=90)
            assert answer == {"ok": True, "worker": socket.gethostname(), "db": True}
    finally:
        os.killpg(proc.pid, signal.SIGINT)  # what Ctrl-C in a terminal does
        interrupted = time.monotonic()
    while True:
        proc.poll()  # reaps the script once it has exited (a zombie is still in the group)
        if not (remaining := leftover(proc.pid)):
            break
        if time.monotonic() - interrupted > STOP_SECONDS:
            os.killpg(proc.pid, signal.SIGKILL)
            raise AssertionError(f"processes still running {STOP_SECONDS} s after Ctrl-C: {remaining}")
        time.sleep(0.2)
    proc.wait(timeout=5)
    output.thread.join(timeout=5)
    text = output.text
    assert f"Console: http://127.0.0.1:{port}/" in text
    assert "imported wechat_wxid_demo01.jsonl" in text  # the built-in demo, with no setting
    assert "Warm shutdown" in text
    assert "beat: Starting..." in text
