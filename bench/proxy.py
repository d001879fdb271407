"""What the proxy adds: latency of /proxy/v1/chat/completions versus calling the same upstream directly.

Run: .venv/bin/python bench/proxy.py [--calls 300] [--compress-calls 24]

Starts, as production runs it (Dockerfile): gunicorn ``console.wsgi`` with 3 workers of 8 threads, on
PostgreSQL (a database of its own on 127.0.0.1:5432, dropped at the end; ``DATABASE_URL`` to choose one,
``--sqlite`` for a SQLite file), and a loopback OpenAI-compatible upstream in its own process that answers
at once (``tests/fakes/chat_upstream.py``), so what is measured is the proxy's own cost. Each client is a
thread with its own HTTP connection, calling the upstream directly and then through the proxy with the same
histories, at 1 and at 16 clients:

- **no compression**: a conversation under its trigger, one user message and the answer appended per call
  (what the proxy does on almost every call: authenticate, match the stored history, forward, relay, record);
- **compression**: a new conversation already over its trigger (8,000-token window), so the call creates the
  session, compresses it in the request path (offline extractive summarizer) and forwards the result.

Prints p50 and p95 of each, the added milliseconds and the ratio, and the console's CPU milliseconds per
proxied call (its gunicorn processes' user + system time over the phase, recording included): on a shared
machine the latencies follow its load, the CPU cost much less.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import httpx

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from bench.api import free_port, wait_until_up  # noqa: E402

SYSTEM = "You are a coding agent working in a large repository. Follow the user's rules."


def opening(turns: int, words: int, seed: str) -> list[dict[str, Any]]:
    """A conversation's opening: the system prompt, then ``turns`` user/assistant exchanges of ``words`` words."""
    text = " ".join(f"word{(i * 7919) % 1000}" for i in range(words))
    messages: list[dict[str, Any]] = [{"role": "system", "content": SYSTEM}]
    for turn in range(turns):
        messages.append({"role": "user", "content": f"[{seed}] step {turn}: {text}"})
        messages.append({"role": "assistant", "content": f"Step {turn} done. {text}"})
    return messages


def percentile(values: list[float], share: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(round(share * (len(ordered) - 1))))]


class Target:
    """Where calls go: the upstream directly, or the proxy (with the console key and a session per conversation)."""

    def __init__(self, base: str, key: str, proxied: bool) -> None:
        self.base, self.key, self.proxied = base, key, proxied
        self.handled: dict[str, int] = {}
        self.lock = threading.Lock()

    def call(self, client: httpx.Client, messages: list[dict[str, Any]], session: str, window: int) -> dict[str, Any]:
        headers = {"Authorization": f"Bearer {self.key}"}
        if self.proxied:
            headers |= {"X-Session-Key": session, "X-Context-Window-Tokens": str(window)}
        response = client.post(
            f"{self.base}/chat/completions", json={"model": "bench", "messages": messages}, headers=headers
        )
        if response.status_code != 200:
            raise SystemExit(f"{self.base}: {response.status_code} {response.text[:300]}")
        if self.proxied:
            handled = response.headers.get("X-Compression-Proxy", "")
            if handled == "bypass":
                raise SystemExit(f"the proxy stepped aside: {response.headers.get('X-Compression-Proxy-Reason')}")
            with self.lock:
                self.handled[handled] = self.handled.get(handled, 0) + 1
        message = response.json()["choices"][0]["message"]
        return {"role": "assistant", "content": message["content"]}


def run_clients(clients: int, work: Callable[[int, httpx.Client], list[float]]) -> list[float]:
    """Run ``work`` in ``clients`` threads at once (each its own connection); all their latencies, in ms."""
    results: list[list[float]] = [[] for _ in range(clients)]
    barrier = threading.Barrier(clients)

    def one(index: int) -> None:
        with httpx.Client(timeout=120) as client:
            barrier.wait()
            results[index] = work(index, client)

    threads = [threading.Thread(target=one, args=(i,)) for i in range(clients)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    return [value for values in results for value in values]


def plain_calls(target: Target, calls: int, tag: str) -> Callable[[int, httpx.Client], list[float]]:
    """Conversations under their trigger: each call appends the answer and a new user message."""

    def work(index: int, client: httpx.Client) -> list[float]:
        latencies = []
        history: list[dict[str, Any]] = []
        session = ""
        for number in range(calls):
            if number % 30 == 0:  # a fresh conversation every 30 calls (not measured: its first call creates it)
                session = f"bench-{tag}-{index}-{uuid.uuid4().hex[:8]}"
                history = opening(5, 60, session)
                history.append(target.call(client, history, session, 128_000))
            history.append({"role": "user", "content": f"Next step {number} for {session}."})
            started = time.perf_counter()
            history.append(target.call(client, history, session, 128_000))
            latencies.append((time.perf_counter() - started) * 1000)
        return latencies

    return work


def compressing_calls(target: Target, calls: int, tag: str) -> Callable[[int, httpx.Client], list[float]]:
    """New conversations already over their trigger: the call compresses before it forwards."""

    def work(index: int, client: httpx.Client) -> list[float]:
        latencies = []
        for number in range(calls):
            session = f"bench-{tag}-{index}-{number}-{uuid.uuid4().hex[:8]}"
            history = opening(24, 80, session)  # about 8,200 tokens: over the 5,600-token trigger of 8,000
            history.append({"role": "user", "content": "Now summarise what changed."})
            started = time.perf_counter()
            target.call(client, history, session, 8_000)
            latencies.append((time.perf_counter() - started) * 1000)
        return latencies

    return work


#: the gunicorn master of the running console (its CPU time and its workers' is what a call costs the server)
WEB_PID = 0


def cpu_seconds(pid: int) -> float:
    """User + system CPU seconds of ``pid`` and its descendants (Linux /proc)."""
    total = 0.0
    ticks = os.sysconf("SC_CLK_TCK")
    stack = [pid]
    while stack:
        current = stack.pop()
        try:
            fields = Path(f"/proc/{current}/stat").read_text().rsplit(")", 1)[1].split()
            total += (int(fields[11]) + int(fields[12])) / ticks
            for task in Path(f"/proc/{current}/task").iterdir():
                stack += [int(child) for child in (task / "children").read_text().split()]
        except (OSError, IndexError, ValueError):
            continue
    return total


def measured(clients: int, work: Callable[[int, httpx.Client], list[float]]) -> tuple[list[float], float]:
    """``run_clients``, and the console's CPU milliseconds per call meanwhile (recording included, once idle)."""
    before = cpu_seconds(WEB_PID)
    latencies = run_clients(clients, work)
    time.sleep(1.5)  # the recorder threads finish what they were handed
    return latencies, (cpu_seconds(WEB_PID) - before) * 1000 / max(1, len(latencies))


def report(name: str, clients: int, direct: list[float], proxied: list[float], cpu_ms: float) -> dict[str, Any]:
    row = {"case": name, "clients": clients, "calls": len(proxied), "console_cpu_ms_per_call": round(cpu_ms, 2)}
    for share, label in ((0.5, "p50"), (0.95, "p95")):
        d, p = percentile(direct, share), percentile(proxied, share)
        row |= {f"direct_{label}_ms": round(d, 2), f"proxy_{label}_ms": round(p, 2)}
        row |= {f"added_{label}_ms": round(p - d, 2), f"ratio_{label}": round(p / d, 2) if d else None}
    print(
        f"{name:<15} {clients:>2} clients  {len(proxied):>5} calls  "
        f"direct p50 {row['direct_p50_ms']:7.2f} p95 {row['direct_p95_ms']:7.2f} ms | "
        f"proxy p50 {row['proxy_p50_ms']:7.2f} p95 {row['proxy_p95_ms']:7.2f} ms | "
        f"added p50 {row['added_p50_ms']:+7.2f} p95 {row['added_p95_ms']:+7.2f} ms "
        f"(x{row['ratio_p50']} / x{row['ratio_p95']}); console CPU {cpu_ms:.1f} ms/call",
        flush=True,
    )
    return row


def database(var: Path, sqlite: bool) -> tuple[str, Callable[[], None]]:
    """The bench's database URL and how to drop it."""
    if os.environ.get("DATABASE_URL"):
        return os.environ["DATABASE_URL"], lambda: None
    if sqlite:
        return f"sqlite:///{var / 'bench.sqlite3'}", lambda: None
    import psycopg

    name = f"bench_proxy_{os.getpid()}"
    with psycopg.connect("host=127.0.0.1 port=5432 user=postgres dbname=postgres", autocommit=True) as conn:
        conn.execute(f'CREATE DATABASE "{name}"')

    def drop() -> None:
        with psycopg.connect("host=127.0.0.1 port=5432 user=postgres dbname=postgres", autocommit=True) as conn:
            conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')

    return f"postgres://postgres@127.0.0.1:5432/{name}", drop


@contextlib.contextmanager
def console(upstream_url: str, sqlite: bool = False, **settings: str) -> Iterator[tuple[str, str]]:
    """The console on gunicorn as production runs it, relaying to ``upstream_url``; yields its URL and an
    operator key. Stopped, and its database dropped, on exit."""
    var = Path(tempfile.mkdtemp(prefix="bench-proxy-"))
    url, drop = database(var, sqlite)
    env = (
        dict(
            os.environ,
            VAR_DIR=str(var),
            DEBUG="false",
            SECRET_KEY="bench-only",
            SECURE_COOKIES="false",
            ALLOWED_HOSTS="127.0.0.1",
            DATABASE_URL=url,
            PROXY_UPSTREAM_BASE_URL=upstream_url,
            PROXY_UPSTREAM_API_KEY="sk-bench-upstream",
            PROXY_COMPRESS_BUDGET_MS="10000",
            LOG_LEVEL="WARNING",
        )
        | settings
    )
    env.pop("OPENAI_BASE_URL", None)
    manage = [sys.executable, "manage.py"]
    web = None
    try:
        subprocess.run([*manage, "migrate", "-v0"], cwd=ROOT, env=env, check=True)
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
        gunicorn = ["-m", "gunicorn", "console.wsgi:application", "--bind", f"127.0.0.1:{port}"]
        web = subprocess.Popen(
            [sys.executable, *gunicorn, "--workers", "3", "--threads", "8", "--timeout", "120"],
            cwd=ROOT,
            env=env,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        wait_until_up(f"http://127.0.0.1:{port}/healthz")
        print(f"console: gunicorn 3x8 on {url.split('://')[0]}, upstream {upstream_url}", flush=True)
        global WEB_PID
        WEB_PID = web.pid
        yield f"http://127.0.0.1:{port}", key
    finally:
        if web is not None:
            web.terminate()
            web.wait(20)
        drop()


@contextlib.contextmanager
def loopback_upstream() -> Iterator[str]:
    """The loopback upstream in a process of its own; yields its URL (``…/v1``)."""
    upstream = subprocess.Popen(
        [sys.executable, "-m", "tests.fakes.chat_upstream"], cwd=ROOT, stdout=subprocess.PIPE, text=True
    )
    try:
        assert upstream.stdout is not None
        yield upstream.stdout.readline().strip()
    finally:
        upstream.terminate()
        upstream.wait(10)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--calls", type=int, default=300, help="calls per client without compression (1 client)")
    parser.add_argument("--compress-calls", type=int, default=24, help="compressing calls per client (1 client)")
    parser.add_argument("--sqlite", action="store_true", help="a SQLite file instead of PostgreSQL")
    parser.add_argument("--json", type=Path, help="also write the rows as JSON here")
    args = parser.parse_args()

    with loopback_upstream() as upstream_url, console(upstream_url, args.sqlite) as (base, key):
        direct = Target(upstream_url, "sk-bench-upstream", proxied=False)
        proxy = Target(f"{base}/proxy/v1", key, proxied=True)
        print(f"cores {os.cpu_count()}, load average {os.getloadavg()[0]:.1f}", flush=True)
        run_clients(4, plain_calls(proxy, 10, "warm"))  # every worker warm: tokenizer, connections, key cache
        rows = []
        for clients in (1, 16):
            calls = max(20, args.calls // clients)
            d = run_clients(clients, plain_calls(direct, calls, f"d{clients}"))
            p, cpu = measured(clients, plain_calls(proxy, calls, f"p{clients}"))
            rows.append(report("no compression", clients, d, p, cpu))
        for clients in (1, 16):
            calls = max(2, args.compress_calls // clients)
            d = run_clients(clients, compressing_calls(direct, calls, f"cd{clients}"))
            proxy.handled.clear()
            p, cpu = measured(clients, compressing_calls(proxy, calls, f"cp{clients}"))
            rows.append(report("compression", clients, d, p, cpu) | {"handled": dict(proxy.handled)})
            print(f"{'':<15} the proxy's handling of those calls: {proxy.handled}", flush=True)
        print(f"load average after: {os.getloadavg()[0]:.1f}", flush=True)
        if args.json:
            args.json.write_text(json.dumps(rows, indent=2))


if __name__ == "__main__":
    main()
