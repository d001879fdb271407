"""ConsoleReporter without a console: what it sends, and that nothing it does reaches the agent as an error.

Delivery to a live console (outage, lost answers, a slow console, overflow) is in tests/console/test_reporter.py.
"""

from __future__ import annotations

import os
import socket
from typing import Any

import pytest

from agent_compression import CompressionConfig, Compressor, ConsoleReporter, mask_secrets
from agent_compression.reporting import report_body
from tests import samples

CONFIG = CompressionConfig(context_window_tokens=4000, secret_mask_key="runtime-private-key")
SECRET = "sk-proj-PlantOpenAiKey1234567890abcd"


def closed_port_url() -> str:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return f"http://127.0.0.1:{s.getsockname()[1]}"


def history() -> list[dict[str, Any]]:
    messages = samples.sample_messages(samples.CODING)
    messages[1] = {**messages[1], "content": f"{messages[1]['content']} (use {SECRET})"}
    return messages


class BrokenReporter:
    def report(self, *args: Any, **kwargs: Any) -> None:
        raise RuntimeError("the reporter is broken")


def test_a_reporter_that_raises_never_reaches_the_agent(caplog):
    result = Compressor(CONFIG, reporter=BrokenReporter()).compress(history())
    assert result.was_compressed
    assert "the compression reporter failed" in caplog.text


def test_the_body_is_masked_with_the_pipelines_key_and_names_the_archive_in_the_input():
    messages = history()
    result = Compressor(CONFIG).compress(messages, focus_topic=f"the key {SECRET}")
    assert result.archive is not None and result.summary is not None

    body = report_body("rt:1", messages, result, focus_topic=f"the key {SECRET}", mask_key=CONFIG.secret_mask_key)

    assert SECRET not in str(body)
    assert mask_secrets(SECRET, CONFIG.secret_mask_key) in str(body["input_messages"])
    assert body["archive_messages"] == body["input_messages"][result.archive.start : result.archive.end]
    assert body["summary_text"] == mask_secrets(result.summary_text or "", CONFIG.secret_mask_key)
    assert set(body["provenance"]) == {
        "generator", "model", "endpoint_host", "prompt_version", "prompt_hash",
        "input_tokens", "output_tokens", "latency_ms", "focus_topic",
    }  # fmt: skip
    assert body["provenance"]["focus_topic"].startswith("the key [secret:")


def test_what_is_queued_does_not_change_when_the_agent_appends_to_its_lists():
    messages = history()
    with socket.socket() as silent:  # accepts connections (the kernel does) and never answers
        silent.bind(("127.0.0.1", 0))
        silent.listen(8)
        url = f"http://127.0.0.1:{silent.getsockname()[1]}"
        reporter = ConsoleReporter(url, "key", session_key="rt:1", timeout=5, retries=0)
        compressor = Compressor(CONFIG, reporter=reporter)
        compressor.compress(messages)  # in flight, waiting for an answer
        result = compressor.compress(messages)  # queued behind it
        queued = reporter._queue[-1]
        length = (len(messages), len(result.messages))
        messages.append({"role": "user", "content": "next"})
        result.messages.append({"role": "user", "content": "next"})
        assert (len(queued.messages), len(queued.output)) == length
        assert reporter.stats.pending == 2
        assert reporter.close(timeout=0) is False
    # the queued one is dropped; the first too when the thread had not taken it yet (a slow machine)
    assert 1 <= reporter.stats.dropped <= 2


def test_a_report_without_a_session_key_is_counted_as_failed_not_raised():
    with ConsoleReporter(closed_port_url(), "key") as reporter:
        Compressor(CONFIG, reporter=reporter).compress(history())
        stats = reporter.stats
    assert (stats.queued, stats.failed) == (0, 1)
    assert "no session key" in stats.last_error


def test_a_console_that_cannot_be_reached_fails_the_report_after_its_retries():
    with ConsoleReporter(closed_port_url(), "key", session_key="rt:1", retries=2, backoff=0.01) as reporter:
        Compressor(CONFIG, reporter=reporter).compress(history())
        assert reporter.flush(10)
        stats = reporter.stats
    assert (stats.sent, stats.retries, stats.failed) == (0, 2, 1)
    assert "failed 3 times" in stats.last_error and "ConnectionRefusedError" in stats.last_error
    assert "key" not in repr(reporter).replace("session_key", "")


@pytest.mark.parametrize(
    ("args", "options", "problem"),
    [
        (("console.example", "k"), {}, "http"),
        (("http://console.example", ""), {}, "api_key"),
        (("http://console.example", "k"), {"queue_size": 0}, "queue_size"),
        (("http://console.example", "k"), {"timeout": 0}, "timeout"),
        (("http://console.example", "k"), {"retries": -1}, "retries"),
    ],
)
def test_it_refuses_a_bad_setting_when_made(args, options, problem):
    with pytest.raises(ValueError, match=problem):
        ConsoleReporter(*args, **options)


@pytest.mark.skipif(not hasattr(os, "fork"), reason="fork is POSIX")
def test_a_forked_worker_process_gets_a_thread_of_its_own():
    reporter = ConsoleReporter(closed_port_url(), "key", session_key="rt:1", retries=0)
    result = Compressor(CONFIG).compress(history())
    pid = os.fork()
    if pid == 0:  # the child: the parent's thread does not exist here
        try:
            reporter.report(history(), result)
            delivered = reporter.flush(10) and reporter.stats.failed == 1 and reporter.stats.queued == 1
            os._exit(0 if delivered else 1)
        finally:
            os._exit(2)
    _, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == 0
    assert reporter.stats.queued == 0  # the child's report was the child's
    reporter.close()
