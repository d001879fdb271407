"""API ingest rate and end-to-end compress latency, over real HTTP with a real worker.

Run: .venv/bin/python bench/api.py [--messages 2000] [--batch 50]

Starts the console (gunicorn) and a Celery worker against a fresh SQLite file and
the filesystem broker in a temporary folder (or against DATABASE_URL / REDIS_URL
when they are set), then prints:

- ingest: messages per second for one POST /sessions with the whole history, and
  for POST /sessions/{key}/messages in batches (the way a runtime appends);
- compress: the latency of POST /sessions/{key}/compress with ``wait`` for a
  session of ``--messages`` messages (queue, worker pick-up, pipeline, write-back,
  answer), next to the pipeline alone in-process, and their ratio.
"""

from __future__ import annotations

import argparse
import json
import os
import socket
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from agent_compression import CompressionConfig, Compressor  # noqa: E402
from bench.speed import make_session  # noqa: E402


def settings_use_redis(env: dict[str, str]) -> bool:
    return bool(env.get("REDIS_URL"))


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Api:
    """Plain HTTP with the standard library: what any runtime would send."""

    def __init__(self, base: str, key: str) -> None:
        self.base, self.key = base, key

    def post(self, path: str, body: Any) -> tuple[int, Any]:
        request = urllib.request.Request(
            f"{self.base}{path}",
            data=json.dumps(body).encode(),
            headers={"Authorization": f"Bearer {self.key}", "Content-Type": "application/json"},
        )
        try:
            with urllib.request.urlopen(request, timeout=300) as response:
                return response.status, json.load(response)
        except urllib.error.HTTPError as error:
            return error.code, json.load(error)


def wait_until_up(url: str, seconds: float = 60) -> None:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        try:
            with urllib.request.urlopen(url, timeout=2):
                return
        except urllib.error.HTTPError:
            return  # 503: up, with a broker still starting
        except OSError:
            time.sleep(0.3)
    raise SystemExit(f"the console did not come up at {url}")


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--messages", type=int, default=2000)
    parser.add_argument("--batch", type=int, default=50)
    parser.add_argument("--repeat", type=int, default=3, help="compressions to take the median of")
    args = parser.parse_args()

    var = Path(tempfile.mkdtemp(prefix="bench-api-"))
    env = dict(os.environ, VAR_DIR=str(var), DEBUG="false", SECRET_KEY="bench-only", ALLOWED_HOSTS="127.0.0.1")
    env.setdefault("DATABASE_URL", f"sqlite:///{var / 'bench.sqlite3'}")
    env.pop("OPENAI_BASE_URL", None)  # the offline summarizer: the bench measures the console, not a model
    manage = [sys.executable, "manage.py"]
    subprocess.run([*manage, "migrate", "-v0"], cwd=ROOT, env=env, check=True)
    subprocess.run([*manage, "collectstatic", "--noinput", "-v0"], cwd=ROOT, env=env, check=True)
    made = subprocess.run(
        [*manage, "create_api_key", "--name", f"bench-{time.time_ns()}", "--role", "operator"],
        cwd=ROOT,
        env=env,
        check=True,
        capture_output=True,
        text=True,
    )
    key = made.stdout.strip().splitlines()[-1]

    port = free_port()
    base = f"http://127.0.0.1:{port}"
    web = subprocess.Popen(
        [sys.executable, "-m", "gunicorn", "console.wsgi", "-b", f"127.0.0.1:{port}", "-w", "2", "--timeout", "300"],
        cwd=ROOT,
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    worker = subprocess.Popen(
        [sys.executable, "-m", "celery", "-A", "console", "worker", "--pool=solo", "--loglevel=WARNING"],
        cwd=ROOT,
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        wait_until_up(f"{base}/healthz")
        client = Api(f"{base}/api/v1", key)
        messages = make_session(args.messages)
        print(f"session: {len(messages)} messages, {len(json.dumps(messages)) / 1e6:.1f} MB of JSON")
        config = {"context_window_tokens": 32_000}
        ingest, end_to_end, pipeline = [], [], []
        for i in range(args.repeat):
            messages = make_session(args.messages, seed=7 + i)  # fresh content: no token cache helps either side
            one_shot_key = f"bench:one-shot-{time.time_ns()}"
            started = time.perf_counter()
            status, body = client.post("/sessions", {"key": one_shot_key, "messages": messages})
            ingest.append(time.perf_counter() - started)
            if status != 201:
                raise SystemExit(f"create failed: {status} {body}")
            started = time.perf_counter()
            status, body = client.post(f"/sessions/{one_shot_key}/compress", {"config": config, "wait": 80})
            end_to_end.append(time.perf_counter() - started)
            if status != 200:
                raise SystemExit(f"compress did not finish: {status} {body}")
            run = body["run"]
            started = time.perf_counter()
            Compressor(CompressionConfig(**config)).compress(messages)
            pipeline.append(time.perf_counter() - started)
        one_shot = statistics.median(ingest)
        print(f"ingest, one POST /sessions:           {len(messages) / one_shot:8.0f} messages/s ({one_shot:.2f} s)")

        appended_key = f"bench:appended-{time.time_ns()}"
        client.post("/sessions", {"key": appended_key, "context_window_tokens": 10_000_000})
        started = time.perf_counter()
        for i in range(0, len(messages), args.batch):
            status, body = client.post(f"/sessions/{appended_key}/messages", {"messages": messages[i : i + args.batch]})
            if status != 200:
                raise SystemExit(f"append failed: {status} {body}")
        appended = time.perf_counter() - started
        requests = -(-len(messages) // args.batch)
        print(
            f"ingest, appends of {args.batch:>3}:                {len(messages) / appended:8.0f} messages/s "
            f"({requests} requests, {appended / requests * 1000:.0f} ms each)"
        )
        e2e, alone = statistics.median(end_to_end), statistics.median(pipeline)
        print(
            f"compress, end to end (HTTP + worker): {e2e * 1000:8.0f} ms median of {args.repeat} "
            f"(min {min(end_to_end) * 1000:.0f}), {run['tokens_before']} -> {run['tokens_after']} tokens"
        )
        print(f"compress, pipeline alone in-process:  {alone * 1000:8.0f} ms median")
        print(f"ratio end-to-end / pipeline:          {e2e / alone:8.2f}")
        if not settings_use_redis(env):
            print("(the filesystem broker polls once a second: pick-up adds 0-1 s; Redis does not)")
    finally:
        for process in (web, worker):
            process.terminate()
            try:
                process.wait(timeout=20)
            except subprocess.TimeoutExpired:
                process.kill()


if __name__ == "__main__":
    main()
