"""The production topology as docker-compose runs it, on this machine: one Redis as broker AND cache, PostgreSQL,
gunicorn (DEBUG off, whitenoise, collected static files), a prefork Celery worker and Celery beat.

Everything is private to the test: a ``redis-server`` on a free port (``PrivateRedis``), a database of its own on
the PostgreSQL at 127.0.0.1:5432 (dropped afterwards), free ports for gunicorn. Each process runs in a session of
its own, so stopping it stops its children (gunicorn's and Celery's pool processes) and nothing else.
"""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import psycopg
import pytest
import requests

from tests.fakes.openai_server import FakeOpenAIServer
from tests.faults.conftest import PrivateRedis, free_port

ROOT = Path(__file__).resolve().parents[2]
BIN = Path(sys.executable).parent
POSTGRES = os.environ.get("TOPOLOGY_POSTGRES", "postgresql://postgres@127.0.0.1:5432/postgres")
PASSWORD = "load-test-password"


@dataclass
class Stack:
    url: str
    key: str
    username: str
    redis: PrivateRedis
    env: dict[str, str]
    folder: Path
    processes: dict[str, subprocess.Popen] = field(default_factory=dict)

    def alive(self, name: str) -> bool:
        return self.processes[name].poll() is None

    def log(self, name: str) -> str:
        return (self.folder / f"{name}.log").read_text(errors="replace")

    def api(self, timeout: float = 30) -> requests.Session:
        session = requests.Session()
        session.headers.update({"Authorization": f"Bearer {self.key}", "Content-Type": "application/json"})
        session.request = _with_timeout(session.request, timeout)  # type: ignore[method-assign]
        return session

    def start(self, name: str, *command: str) -> subprocess.Popen:
        log = (self.folder / f"{name}.log").open("ab")
        process = subprocess.Popen(
            command, cwd=ROOT, env=self.env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True
        )
        log.close()
        self.processes[name] = process
        return process

    def stop(self, name: str, grace: float = 10) -> None:
        process = self.processes.pop(name)
        if process.poll() is None:
            with suppress(ProcessLookupError):
                os.killpg(process.pid, signal.SIGTERM)
            with suppress(subprocess.TimeoutExpired):
                process.wait(timeout=grace)
        with suppress(ProcessLookupError):  # the group: pool processes a killed parent left behind
            os.killpg(process.pid, signal.SIGKILL)
        process.wait()


def _with_timeout(request: Any, timeout: float) -> Any:
    def call(method: str, url: str, **kwargs: Any) -> Any:
        kwargs.setdefault("timeout", timeout)
        return request(method, url, **kwargs)

    return call


def manage(env: dict[str, str], *args: str) -> str:
    done = subprocess.run(
        [str(BIN / "python"), "manage.py", *args], cwd=ROOT, env=env, capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, f"manage.py {' '.join(args)} failed:\n{done.stdout}\n{done.stderr}"
    return done.stdout


@contextmanager
def private_database() -> Iterator[str]:
    """A fresh database on the shared PostgreSQL server, dropped afterwards (its URL)."""
    try:
        admin = psycopg.connect(POSTGRES, autocommit=True, connect_timeout=3)
    except psycopg.OperationalError as exc:
        if os.environ.get("CI") == "true":
            raise
        pytest.skip(f"no PostgreSQL at {POSTGRES}: {exc}")
    name = f"faults_topology_{uuid.uuid4().hex[:10]}"
    with admin:
        admin.execute(f'CREATE DATABASE "{name}"')
        try:
            yield re.sub(r"/[^/]*$", f"/{name}", POSTGRES).replace("postgresql://", "postgres://", 1)
        finally:
            admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


def stack_env(redis_url: str, database_url: str, model: FakeOpenAIServer, folder: Path, **extra: str) -> dict[str, str]:
    drop = {"DATABASE_URL", "REDIS_URL", "OPENAI_BASE_URL", "OPENAI_API_KEY", "DJANGO_SETTINGS_MODULE", "CI"}
    env = {k: v for k, v in os.environ.items() if k not in drop and not k.startswith("PYTEST")}
    return env | {
        "DATABASE_URL": database_url,
        "REDIS_URL": redis_url,
        "DEBUG": "false",
        "SECRET_KEY": f"topology-{uuid.uuid4().hex}",
        "SECURE_COOKIES": "false",  # no TLS in front of this gunicorn
        "ALLOWED_HOSTS": "127.0.0.1,localhost",
        "VAR_DIR": str(folder / "var"),
        "OPENAI_BASE_URL": model.base_url,
        "OPENAI_API_KEY": "test",
        "SUMMARY_TIMEOUT": "30",
        "SUMMARY_MAX_RETRIES": "0",
        "SUMMARY_COOLDOWN_SECONDS": "0",
        # the recovery figures of a test, not of production: the sweep every 2 s, a lost message re-sent after 5 s
        "RECOVERY_SWEEP_SECONDS": "2",
        "RUN_QUEUED_RESEND_SECONDS": "5",
        "RESEND_MAX_SECONDS": "10",
        "RUN_HEARTBEAT_SECONDS": "1",
        "PYTHONUNBUFFERED": "1",
        **extra,
    }


@contextmanager
def compose_stack(
    redis: PrivateRedis, model: FakeOpenAIServer, folder: Path, web_workers: int = 2, **extra: str
) -> Iterator[Stack]:
    """Migrate, collect static files, make a key and a user, start gunicorn, worker and beat; stop them after."""
    with private_database() as database_url:
        env = stack_env(redis.url, database_url, model, folder, **extra)
        manage(env, "migrate", "--no-input", "-v0")
        manage(env, "collectstatic", "--no-input", "-v0")
        key = manage(env, "create_api_key", "--name", "load", "--role", "operator").strip().splitlines()[-1]
        username = "load-admin"
        manage(
            env | {"DJANGO_SUPERUSER_PASSWORD": PASSWORD},
            "createsuperuser",
            "--no-input",
            "--username",
            username,
            "--email",
            "load@example.com",
        )
        port = free_port()
        stack = Stack(f"http://127.0.0.1:{port}", key, username, redis, env, folder)
        try:
            # as the Dockerfile and docker-compose.yml run them (fewer web processes)
            stack.start(
                "web",
                str(BIN / "gunicorn"),
                "console.wsgi:application",
                "--bind",
                f"127.0.0.1:{port}",
                "--workers",
                str(web_workers),
                "--threads",
                "8",
                "--timeout",
                "120",
            )
            stack.start("worker", str(BIN / "celery"), "-A", "console", "worker", "--loglevel=INFO", "--concurrency=2")
            stack.start(
                "beat", str(BIN / "celery"), "-A", "console", "beat", "--loglevel=INFO", "--schedule", str(folder / "s")
            )
            wait_healthy(stack)
            yield stack
        finally:
            for name in list(stack.processes):
                stack.stop(name)


def wait_healthy(stack: Stack, timeout: float = 60) -> None:
    deadline = time.monotonic() + timeout
    while True:
        for name in stack.processes:
            assert stack.alive(name), f"{name} exited at start:\n{stack.log(name)[-3000:]}"
        try:
            if requests.get(f"{stack.url}/healthz", timeout=10).status_code == 200 and "ready" in stack.log("worker"):
                return
        except requests.RequestException:
            pass
        if time.monotonic() > deadline:
            logs = "\n".join(f"--- {name}\n{stack.log(name)[-2000:]}" for name in stack.processes)
            raise AssertionError(f"the stack did not become healthy:\n{logs}")
        time.sleep(0.3)
