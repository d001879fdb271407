"""The production logging setup (``gunicorn.conf.py``, ``console/gunicorn_logging.py``): gunicorn started as the
Dockerfile starts it, access log on, requests with secrets in the query, the path and the headers; its log holds
none of them, nor any query string, whatever the access log format asks for.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest
import requests

from tests.faults.conftest import free_port

ROOT = Path(__file__).resolve().parents[2]
BIN = Path(sys.executable).parent

SECRETS = {
    "query": "hunter2-query-secret",
    "github": "ghp_" + "A1b2C3d4E5f6G7h8I9j0K1l2M3n4O5p6Q7r8",
    "bearer": "ccs_0123456789ab_" + "x" * 43,
    "cookie": "sessionid-raw-cookie-value-42",
    "referer": "referer-query-secret-77",
}


@pytest.fixture
def gunicorn_log(tmp_path: Path) -> Path:
    port, log = free_port(), tmp_path / "gunicorn.log"
    env = {k: v for k, v in os.environ.items() if k not in {"DATABASE_URL", "REDIS_URL", "DJANGO_SETTINGS_MODULE"}}
    env |= {"VAR_DIR": str(tmp_path / "var"), "DEBUG": "true", "PYTHONUNBUFFERED": "1"}
    # a format that asks for everything a request carries: the request line, the query, the referer, headers
    greedy = '%(h)s "%(r)s" q=%(q)s f=%(f)s a=%({authorization}i)s c=%({cookie}i)s e=%({query_string}e)s %(s)s'
    server = subprocess.Popen(
        [str(BIN / "gunicorn"), "console.wsgi:application", "--bind", f"127.0.0.1:{port}", "--workers", "1"]
        + ["--access-logfile", str(log), "--error-logfile", str(log), "--access-logformat", greedy],
        cwd=ROOT,
        env=env,
        start_new_session=True,
    )
    try:
        base = f"http://127.0.0.1:{port}"
        deadline = time.monotonic() + 30
        while True:
            try:
                requests.get(f"{base}/healthz", timeout=5)
                break
            except requests.RequestException:
                assert server.poll() is None and time.monotonic() < deadline, "gunicorn did not start"
                time.sleep(0.2)
        requests.get(f"{base}/healthz?token={SECRETS['query']}&password={SECRETS['query']}", timeout=10)
        requests.get(
            f"{base}/api/v1/sessions/{SECRETS['github']}?q={SECRETS['query']}",
            headers={"Authorization": f"Bearer {SECRETS['bearer']}", "Cookie": f"sessionid={SECRETS['cookie']}"},
            timeout=10,
        )
        requests.get(f"{base}/login/?next=/x", headers={"Referer": f"{base}/?api_key={SECRETS['referer']}"}, timeout=10)
    finally:
        server.terminate()
        server.wait(timeout=20)
    return log


def test_gunicorns_log_holds_no_query_string_header_or_secret(gunicorn_log: Path):
    text = gunicorn_log.read_text()
    assert '"GET /healthz HTTP/1.1"' in text, text  # the access log is on and says what was asked
    assert "Booting worker" in text, "the error log goes through the same masking handler"
    for what, secret in SECRETS.items():
        assert secret not in text, f"the {what} secret reached gunicorn's log:\n{text}"
    access = [line for line in text.splitlines() if '"GET ' in line]
    assert len(access) >= 4 and not [line for line in access if "?" in line], f"a query string reached the log:\n{text}"
    assert "/api/v1/sessions/[secret:" in text, "a secret in the path is masked, the rest of the path is kept"
