"""Redis (broker AND cache) stopped mid-load on the compose topology (``topology.py``): gunicorn, a prefork
worker, beat, PostgreSQL.

Threads read, append, log in and compress over HTTP while Redis is killed (SIGKILL: it restarts empty) for
some seconds and started again. Asserted: no 5xx for reads, appends and logins (rate limits and lockouts count
in local memory meanwhile, ``console.cache``); every acknowledged append stored once and in order; the worker is
the same process afterwards (``console.broker``); every compression queued is done within 2 minutes of Redis's
return, with no one acting (beat's recovery sweep). The load figures are printed (``-s`` shows them).
A second test kills Redis while the worker holds an unacknowledged message.
"""

from __future__ import annotations

import re
import statistics
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

import pytest
import requests
from celery import Celery

from tests.fakes.openai_server import FakeOpenAIServer
from tests.faults.conftest import PrivateRedis
from tests.faults.sessions import conversation
from tests.faults.topology import PASSWORD, Stack, compose_stack

pytestmark = [pytest.mark.faults, pytest.mark.worker]

WINDOW = 3400  # a compression of conversation(..., 25) has work to do
OUTAGE_SECONDS = 8.0
DONE = {"succeeded", "failed", "conflict", "skipped"}


@pytest.fixture(scope="module")
def stack(
    private_redis: PrivateRedis, model: FakeOpenAIServer, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Stack]:
    extra = {"API_RATE_LIMIT": "6000/min", "LOGIN_ADDRESS_FAILURE_LIMIT": "1000/h"}  # counted, never reached
    with compose_stack(private_redis, model, tmp_path_factory.mktemp("topology"), **extra) as running:
        yield running


@dataclass
class Call:
    kind: str
    started: float
    seconds: float
    status: int  # 0: no answer (connection refused, timeout)


class Load:
    """Threads calling the stack until stopped; every call recorded with its kind, start, duration and status."""

    def __init__(self, stack: Stack) -> None:
        self.stack = stack
        self.calls: list[Call] = []
        self.stopping = threading.Event()
        self.threads: list[threading.Thread] = []
        self.lock = threading.Lock()
        self.failures: list[str] = []

    def timed(self, kind: str, call: Callable[..., requests.Response], *args: Any, **kwargs: Any) -> Any:
        started = time.monotonic()
        try:
            response: requests.Response | None = call(*args, **kwargs)
        except requests.RequestException:
            response = None
        with self.lock:
            self.calls.append(Call(kind, started, time.monotonic() - started, response.status_code if response else 0))
        return response

    def run(self, target: Callable[..., None], *args: Any) -> None:
        def guarded() -> None:
            try:
                target(*args)
            except Exception as exc:  # noqa: BLE001 - reported by the test, not lost in a thread
                self.failures.append(f"{target.__name__}{args}: {exc!r}")

        thread = threading.Thread(target=guarded, daemon=True)
        thread.start()
        self.threads.append(thread)

    def stop(self) -> None:
        self.stopping.set()
        for thread in self.threads:
            thread.join(timeout=60)
        assert self.failures == [], self.failures

    # ----------------------------------------------------------------------------- the kinds of traffic
    def reader(self, keys: list[str]) -> None:
        api, url, n = self.stack.api(), self.stack.url + "/api/v1", 0
        while not self.stopping.is_set():
            n += 1
            if n % 2:
                self.timed("read", api.get, f"{url}/sessions")
            else:
                self.timed("read", api.get, f"{url}/sessions/{keys[n % len(keys)]}")
            time.sleep(0.02)

    def appender(self, key: str, acknowledged: list[str]) -> None:
        """One session, one message per append, each acknowledged one remembered in order."""
        api, url = self.stack.api(), f"{self.stack.url}/api/v1/sessions/{key}"
        created = api.post(
            f"{self.stack.url}/api/v1/sessions", json={"key": key, "messages": [], "context_window_tokens": 10**7}
        )
        assert created.status_code == 201, created.text
        version, n = created.json()["version"], 0
        while not self.stopping.is_set():
            content = f"{key} message {n}"
            body = {"messages": [{"role": "user", "content": content}], "expected_version": version}
            response = self.timed("append", api.post, f"{url}/messages", json=body)
            if response is not None and response.status_code == 200:
                acknowledged.append(content)
                version, n = response.json()["version"], n + 1
            else:  # unknown outcome: what is stored decides (the test never counts an unanswered append as stored)
                time.sleep(0.2)
                state = api.get(url)
                if state.status_code == 200:
                    version = state.json()["version"]
                    if state.json()["messages"] and state.json()["messages"][-1]["content"] == content:
                        n += 1  # stored without an answer: not acknowledged, but the next one must differ
            time.sleep(0.02)

    def compressor(self, tag: str, run_ids: list[int]) -> None:
        """A new session and a compress request for it, about once a second."""
        api, url, n = self.stack.api(), f"{self.stack.url}/api/v1/sessions", 0
        while not self.stopping.is_set():
            key = f"{tag}:{n}"
            body = {"key": key, "messages": conversation(key, 25), "context_window_tokens": WINDOW}
            created = self.timed("create", api.post, url, json=body)
            if created is not None and created.status_code == 201:
                response = self.timed("compress", api.post, f"{url}/{key}/compress", json={"focus_topic": tag})
                if response is not None and response.status_code in (200, 202):
                    run_ids.append(response.json()["run_id"])
                elif response is not None and response.status_code == 503:
                    assert int(response.headers["Retry-After"]) > 0
            n += 1
            time.sleep(0.8)

    def login(self) -> None:
        """Good logins, and now and then a wrong password for a name that does not exist."""
        n = 0
        while not self.stopping.is_set():
            n += 1
            browser = requests.Session()
            page = browser.get(f"{self.stack.url}/login/", timeout=30)
            token = re.search(r'name="csrfmiddlewaretoken" value="([^"]+)"', page.text)
            if page.status_code != 200 or token is None:
                with self.lock:
                    self.calls.append(Call("login", time.monotonic(), 0.0, page.status_code))
                continue
            wrong = n % 4 == 0
            form = {
                "csrfmiddlewaretoken": token.group(1),
                "username": f"nobody{n}" if wrong else self.stack.username,
                "password": "wrong" if wrong else PASSWORD,
            }
            headers = {"Referer": f"{self.stack.url}/login/"}
            login = f"{self.stack.url}/login/"
            response = self.timed(
                "login", browser.post, login, data=form, headers=headers, allow_redirects=False, timeout=30
            )
            if response is not None and response.status_code < 500:
                assert response.status_code == (200 if wrong else 302), (wrong, response.status_code)
            time.sleep(0.1)


def figures(calls: list[Call], down: float, up: float) -> str:
    """Requests, statuses and p50/p95 latency per kind, before, during and after the outage."""
    lines = [f"{'kind':<9}{'phase':<8}{'requests':>9}{'p50 ms':>9}{'p95 ms':>9}  statuses"]
    for kind in sorted({c.kind for c in calls}):
        for phase, inside in (
            ("before", lambda c: c.started < down),
            ("during", lambda c: down <= c.started < up),
            ("after", lambda c: c.started >= up),
        ):
            chosen = [c for c in calls if c.kind == kind and inside(c)]
            if not chosen:
                continue
            ms = sorted(c.seconds * 1000 for c in chosen)
            p95 = ms[min(len(ms) - 1, int(len(ms) * 0.95))]
            statuses: dict[int, int] = {}
            for c in chosen:
                statuses[c.status] = statuses.get(c.status, 0) + 1
            p50, counts = statistics.median(ms), dict(sorted(statuses.items()))
            lines.append(f"{kind:<9}{phase:<8}{len(chosen):>9}{p50:>9.0f}{p95:>9.0f}  {counts}")
    return "\n".join(lines)


def run_states(stack: Stack, run_ids: list[int]) -> dict[int, str]:
    api = stack.api()
    return {pk: api.get(f"{stack.url}/api/v1/runs/{pk}").json().get("status", "?") for pk in run_ids}


def test_redis_as_broker_and_cache_stopped_mid_load_costs_no_5xx_and_no_work(stack: Stack):
    worker_pid = stack.processes["worker"].pid
    api = stack.api()
    readable = []
    for n in range(3):
        key = f"read:{n}"
        created = api.post(f"{stack.url}/api/v1/sessions", json={"key": key, "messages": conversation(key, 5)})
        assert created.status_code == 201, created.text
        readable.append(key)

    load = Load(stack)
    appended: dict[str, list[str]] = {f"append:{n}": [] for n in range(2)}
    run_ids: list[int] = []
    load.run(load.reader, readable)
    load.run(load.reader, readable)
    for key, acknowledged in appended.items():
        load.run(load.appender, key, acknowledged)
    load.run(load.compressor, "compress", run_ids)
    load.run(load.login)
    load.run(load.login)

    time.sleep(4)
    down = time.monotonic()
    stack.redis.stop()
    time.sleep(OUTAGE_SECONDS)
    stack.redis.start()
    up = time.monotonic()
    time.sleep(5)
    load.stop()
    table = figures(load.calls, down, up)
    print(f"\nRedis (broker and cache) down for {up - down:.1f} s mid-load:\n{table}")

    server_errors = [c for c in load.calls if c.kind in ("read", "append", "login") and c.status >= 500]
    assert server_errors == [], f"{len(server_errors)} server errors:\n{table}\n{stack.log('web')[-3000:]}"
    unanswered = [c for c in load.calls if c.status == 0]
    assert unanswered == [], f"{len(unanswered)} calls got no answer:\n{table}"
    assert not [c for c in load.calls if c.kind in ("create", "compress") and c.status >= 500 and c.status != 503]
    during = [c for c in load.calls if down <= c.started < up]
    assert {"read", "append", "login", "compress"} <= {c.kind for c in during}, "every kind was tried in the outage"

    for key, acknowledged in appended.items():
        stored = [m["content"] for m in api.get(f"{stack.url}/api/v1/sessions/{key}").json()["messages"]]
        assert len(acknowledged) > 10
        assert stored[: len(acknowledged)] == acknowledged, f"{key}: acknowledged appends lost, doubled or reordered"
        assert len(stored) - len(acknowledged) <= 1, "at most the last, unanswered append is stored unacknowledged"

    assert run_ids and any(down <= c.started < up for c in load.calls if c.kind == "compress")
    deadline = up + 120
    states = run_states(stack, run_ids)
    while not set(states.values()) <= DONE and time.monotonic() < deadline:
        time.sleep(1)
        states = run_states(stack, run_ids)
    finished = time.monotonic() - up
    print(f"{len(run_ids)} compressions, all ended {finished:.1f} s after Redis came back: {set(states.values())}")
    assert set(states.values()) == {"succeeded"}, (states, stack.log("worker")[-4000:])

    for name in ("web", "worker", "beat"):
        assert stack.alive(name), f"{name} exited:\n{stack.log(name)[-3000:]}"
    assert stack.processes["worker"].pid == worker_pid
    assert "Unrecoverable error" not in stack.log("worker")
    assert "Traceback" not in stack.log("web"), stack.log("web")[-3000:]


def test_redis_killed_with_an_unacknowledged_task_in_flight_the_run_still_finishes(
    stack: Stack, model: FakeOpenAIServer
):
    api = stack.api()
    url = f"{stack.url}/api/v1/sessions"
    for key in ("inflight:busy", "inflight:later"):
        body = {"key": key, "messages": conversation(key, 25), "context_window_tokens": WINDOW}
        assert api.post(url, json=body).status_code == 201
    calls = len(model.requests)
    model.script("slow", delay=6.0)  # the run's summary takes 6 s: it is in flight when Redis goes
    busy = api.post(f"{url}/inflight:busy/compress", json={}).json()["run_id"]
    deadline = time.monotonic() + 30
    while len(model.requests) == calls and time.monotonic() < deadline:
        time.sleep(0.05)
    assert len(model.requests) > calls, "the run reached the model"

    # and a message the worker holds unacknowledged: a task with a countdown, as webhook retries are sent (this
    # one repeats the busy run's task: its claim makes the duplicate harmless)
    def received() -> int:
        return len(re.findall(r"console\.execute_run\[[0-9a-f-]+\] received", stack.log("worker")))

    before = received()
    client = Celery("fault-client", broker=stack.redis.url, set_as_current=False)
    client.send_task("console.execute_run", (busy,), countdown=60)
    deadline = time.monotonic() + 20
    while received() == before and time.monotonic() < deadline:
        time.sleep(0.05)
    assert received() > before, "the worker holds the message"
    log_before = len(stack.log("worker"))

    stack.redis.stop()
    later = api.post(f"{url}/inflight:later/compress", json={})  # queued while the broker is down
    assert later.status_code == 202 and later.json()["status"] == "queued", later.text
    time.sleep(3)
    stack.redis.start()  # empty: the unacknowledged message is gone with it
    up = time.monotonic()

    runs = [busy, later.json()["run_id"]]
    states = run_states(stack, runs)
    while not set(states.values()) <= DONE and time.monotonic() < up + 120:
        time.sleep(1)
        states = run_states(stack, runs)
    print(f"\nthe runs ended {time.monotonic() - up:.1f} s after Redis returned: {states}")
    assert set(states.values()) == {"succeeded"}, stack.log("worker")[-4000:]
    log = stack.log("worker")[log_before:]
    assert "Restoring 1 unacknowledged message" in log, log[-3000:]
    assert "Unrecoverable error" not in log and stack.alive("worker"), log[-3000:]
