"""ConsoleReporter end to end: a runtime's in-process compressions reach a live console over HTTP.

The console is pytest-django's live server (the real API, database and auth); a FlakyProxy in front of
it takes it down and up, slows it, or loses an answer after the console stored the report.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from typing import Any

import pytest

from agent_compression import CompressionConfig, Compressor, ConsoleReporter
from console.apikeys import create_api_key
from console.models import CompressionRun, Message, Session, Summary
from tests import samples
from tests.console.secret_plants import ALL_TEXT, leaks
from tests.fakes.flaky_proxy import FlakyProxy

CONFIG = CompressionConfig(context_window_tokens=4000)


def history() -> list[dict[str, Any]]:
    return samples.sample_messages(samples.CODING)


def wait_until(condition: Any, timeout: float = 20.0) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.02)


@pytest.fixture
def api_key(transactional_db) -> str:
    return create_api_key("runtime", "operator")[1]


@pytest.fixture
def proxy(live_server) -> Iterator[FlakyProxy]:
    port = int(live_server.url.rsplit(":", 1)[1])
    flaky = FlakyProxy(port)
    flaky.up()
    yield flaky
    flaky.close()


def reporter(url: str, key: str, **options: Any) -> ConsoleReporter:
    options = {"timeout": 5.0, "backoff": 0.05, "max_backoff": 0.2, **options}
    return ConsoleReporter(url, key, **options)


def reported_runs() -> list[CompressionRun]:
    return list(CompressionRun.objects.filter(trigger="reported").select_related("session").order_by("id"))


def test_it_stores_each_compression_once_masked_with_its_archive_and_summary(live_server, api_key):
    messages = history()
    messages[1] = {**messages[1], "content": f"{messages[1]['content']}\n{ALL_TEXT}"}
    with reporter(live_server.url, api_key, session_key="rt:coding") as sender:
        compressor = Compressor(CONFIG, reporter=sender)
        first = compressor.compress(messages, focus_topic="the export job")
        grown = [*first.messages, {"role": "user", "content": "and now the tests, please"}]
        grown += [{"role": "assistant", "content": "Running them."}] + history()[4:40]
        second = compressor.compress(grown)
        assert sender.flush(20)
        assert sender.stats.sent == 2 and sender.stats.failed == 0 and sender.stats.pending == 0

    runs = reported_runs()
    assert [run.session.key for run in runs] == ["rt:coding", "rt:coding"]
    assert all(run.idempotency_key and run.applied for run in runs)
    # the second input starts with the first output: the live history follows the runtime's
    session = Session.objects.get(key="rt:coding")
    assert len(session.keys()) == len(second.messages)
    summary = Summary.objects.get(run=runs[0])
    assert summary.provenance["generator"] == first.summary.generator
    assert summary.provenance["focus_topic"] == "the export job"
    stored = "\n".join(str(data) for data in Message.objects.values_list("data", flat=True)) + summary.text
    assert leaks(stored) == []
    assert "[secret:" in stored


def test_an_answer_lost_after_the_console_stored_the_report_is_retried_and_stored_once(proxy, api_key):
    proxy.lose_answers = 1
    with reporter(proxy.url, api_key, session_key="rt:lost") as sender:
        Compressor(CONFIG, reporter=sender).compress(history())
        assert sender.flush(20)
        stats = sender.stats
    assert proxy.lost == 1 and proxy.connections == 2
    assert (stats.sent, stats.replayed, stats.retries, stats.failed) == (1, 1, 1, 0)
    assert len(reported_runs()) == 1


@pytest.mark.faults
def test_reports_made_while_the_console_is_down_arrive_once_when_it_is_back(proxy, api_key):
    proxy.down()
    with reporter(proxy.url, api_key, retries=None) as sender:
        compressor = Compressor(CONFIG, reporter=sender)
        for n in range(3):
            compressor.compress(history(), session_key=f"rt:down{n}")
        wait_until(lambda: sender.stats.retries >= 3)
        assert not sender.flush(0.2)
        assert sender.stats.pending == 3 and reported_runs() == []
        assert "ConnectionRefusedError" in sender.stats.last_error

        proxy.lose_answers = 1  # and the first answer after it returns is lost too
        proxy.up()
        assert sender.flush(20)
        stats = sender.stats
    assert (stats.sent, stats.replayed, stats.failed, stats.dropped) == (3, 1, 0, 0)
    assert [run.session.key for run in reported_runs()] == ["rt:down0", "rt:down1", "rt:down2"]


@pytest.mark.faults
def test_a_slow_console_does_not_slow_compress(proxy, api_key):
    proxy.delay = 5.0  # each answer takes 5 s
    messages = history()
    with reporter(proxy.url, api_key, session_key="rt:slow", timeout=10.0) as sender:
        compressor = Compressor(CONFIG, reporter=sender)
        took = []
        for _ in range(10):
            started = time.perf_counter()
            compressor.compress(messages)
            took.append(time.perf_counter() - started)
        # ten compressions returned before the console answered one report (bench/reporter.py measures the cost)
        assert sum(took) < proxy.delay, took
        assert sender.stats.sent == 0 and sender.stats.pending == 10
        started = time.perf_counter()
        assert sender.close(timeout=0.2) is False
        assert time.perf_counter() - started < 2.0
        # the nine queued are dropped; the one waiting for its answer ends with that attempt
        assert (sender.stats.dropped, sender.stats.pending) == (9, 1)


@pytest.mark.faults
def test_a_full_queue_drops_the_oldest_reports_and_counts_them(proxy, api_key):
    proxy.down()
    compressor = Compressor(CONFIG)
    results = [compressor.compress(history()) for _ in range(5)]  # each with a summary id of its own
    with reporter(proxy.url, api_key, queue_size=2, retries=None) as sender:
        sender.report(history(), results[0], session_key="rt:q1")
        wait_until(lambda: sender.stats.retries >= 1)  # q1 is being sent: out of the queue
        for n in range(2, 6):
            sender.report(history(), results[n - 1], session_key=f"rt:q{n}")
        assert sender.dropped == 2  # q2 and q3, the oldest waiting
        proxy.up()
        assert sender.flush(20)
        assert sender.stats.sent == 3
    assert [run.session.key for run in reported_runs()] == ["rt:q1", "rt:q4", "rt:q5"]


@pytest.mark.faults
def test_close_drops_what_it_could_not_send_and_later_reports(proxy, api_key):
    proxy.down()
    result = Compressor(CONFIG).compress(history())
    sender = reporter(proxy.url, api_key, session_key="rt:closed", retries=None)
    sender.report(history(), result)
    sender.report(history(), result)
    started = time.monotonic()
    assert sender.close(timeout=0.3) is False
    assert time.monotonic() - started < 2.0
    sender.report(history(), result)  # after close: dropped, never raised
    stats = sender.stats
    assert (stats.queued, stats.sent, stats.dropped, stats.pending) == (2, 0, 3, 0)
    proxy.up()
    time.sleep(0.3)
    assert reported_runs() == []


@pytest.mark.parametrize(
    ("role", "answer"),
    [("viewer", "HTTP 403: your role may not report compressions"), (None, "HTTP 401: the API key is unknown")],
)
def test_a_report_the_console_refuses_is_not_retried(live_server, api_key, role, answer):
    key = create_api_key("dashboard", role)[1] if role else "ccs_000000000000_unknown"
    with reporter(live_server.url, key, session_key="rt:refused") as sender:
        Compressor(CONFIG, reporter=sender).compress(history())
        assert sender.flush(10)
        stats = sender.stats
    assert (stats.sent, stats.failed, stats.retries) == (0, 1, 0)
    assert answer in stats.last_error
    assert reported_runs() == []
