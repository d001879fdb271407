"""Issue 16's run-outcome fixes: override runs and the session's anti-thrash memory, "nothing to compress"."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from console.celery import tasks_inline
from console.models import CompressionRun, Session
from console.services import runs
from console.services.dashboard import dashboard_metrics
from console.services.reported import record_reported_run
from console.services.sessions import ImportedSession, append_messages, create_session
from tests.compression.builders import assistant, system, user

Status = CompressionRun.Status

pytestmark = pytest.mark.django_db


@pytest.fixture(autouse=True)
def eager_tasks() -> Iterator[None]:
    with tasks_inline():
        yield


def compress(session: Session, config: dict[str, Any] | None = None) -> CompressionRun:
    run, created = runs.request_compression(session.key, config=config)
    assert created
    runs.execute_run(run.pk)
    run.refresh_from_db()
    return run


# --------------------------------------------------------------------------- override runs


def big_first_request_session(key: str = "test:override", **fields: Any) -> Session:
    """A history whose first request alone is over a 1,200-token window's trigger: no run gets it under that."""
    messages = [system(), user("Rewrite the export job. Requirements: " + "keep every column stable; " * 300)]
    for n in range(12):
        messages += [user(f"step {n}: check batch {n}"), assistant(f"batch {n} checked: " + "all rows match. " * 40)]
    messages.append(user("now summarise what changed"))
    return create_session(ImportedSession(key=key, messages=messages, metadata={}, **fields))


def test_override_runs_over_their_own_trigger_do_not_stop_automatic_compression_of_the_session():
    session = big_first_request_session()  # a few thousand tokens in a 128,000-token window
    assert session.context_window_tokens == 128_000
    first = compress(session, {"context_window_tokens": 2000})
    second = compress(session, {"context_window_tokens": 1200})
    session.refresh_from_db()
    assert first.applied and first.tokens_after is not None
    # both stayed over the override's trigger ...
    assert session.token_count >= runs.session_config(session, {"context_window_tokens": 1200}).trigger_tokens
    # ... but the session is far under its own: automatic compression stays on
    assert session.token_count < runs.session_config(session).trigger_tokens
    assert not session.auto_compression_stopped
    assert session.ineffective_compressions == 0
    codes = {w["code"] for run in (first, second) for w in run.warnings}
    assert "still_over_threshold" in codes  # true of the override: the run did not reach what it was asked
    assert "auto_compression_stopped" not in codes
    # and once the history grows over the session's own trigger, the trigger queues a run
    assert append_messages(session.key, [user("more " * 40)])[1] is None  # still far under 89,600 tokens


def test_override_runs_that_leave_the_session_over_its_own_trigger_still_count():
    session = big_first_request_session(context_window_tokens=2000)  # its first request alone is near 1,400
    first = compress(session, {"summary_floor_tokens": 100})
    second = compress(session, {"summary_floor_tokens": 100})
    session.refresh_from_db()
    assert session.token_count >= runs.session_config(session).trigger_tokens
    assert session.ineffective_compressions == 2 and session.auto_compression_stopped
    assert "auto_compression_stopped" in {w["code"] for w in second.warnings}
    assert "auto_compression_stopped" not in {w["code"] for w in first.warnings}


def test_runs_without_override_keep_the_library_anti_thrash_rule():
    session = big_first_request_session(context_window_tokens=2000)
    compress(session)
    compress(session)
    session.refresh_from_db()
    assert session.auto_compression_stopped


# --------------------------------------------------------------------------- nothing to compress


def tiny_session(key: str = "test:tiny") -> Session:
    return create_session(ImportedSession(key=key, messages=[user("hello"), assistant("hi"), user("bye")], metadata={}))


def test_a_run_that_compressed_nothing_is_nothing_to_compress_not_succeeded_or_degraded():
    run = compress(tiny_session(), {"context_window_tokens": 4000})
    assert not run.was_compressed and not run.applied
    assert run.status == Status.NOTHING
    assert "nothing_to_compress" in {w["code"] for w in run.warnings}


def test_a_reported_run_whose_output_is_its_input_is_nothing_to_compress():
    messages = [user("hello"), assistant("hi"), user("bye")]
    run = record_reported_run(session_key="test:reported-same", input_messages=messages, output_messages=messages)
    assert not run.was_compressed and run.status == Status.NOTHING


@pytest.mark.xfail(
    reason="known defect (issue 32 note): the pipeline now re-summarizes an earlier summary left alone in the "
    "middle; when its header is a token or two longer (ids and times differ by run), that re-summary saves one "
    "token and counts as a compression. It needs a minimum saving; seen on SQLite when this test runs alone",
    strict=False,
)
def test_an_unchanged_history_over_the_trigger_is_degraded_not_nothing():
    """Nothing could be compressed, yet the history is over the trigger: a problem the operator must see."""
    session = big_first_request_session(context_window_tokens=2000)
    compress(session)
    again = compress(session)
    assert not again.was_compressed
    assert again.status == Status.DEGRADED
    assert "still_over_threshold" in {w["code"] for w in again.warnings}


def test_the_dashboard_does_not_count_a_run_that_compressed_nothing_but_lists_it(as_viewer):
    compress(tiny_session(), {"context_window_tokens": 4000})
    metrics = dashboard_metrics(30)
    assert metrics.runs_total == 0 and sum(d.total for d in metrics.by_day) == 0
    assert metrics.nothing_to_compress == 1
    html = as_viewer.get("/dashboard/").content.decode()
    assert "No compressions in the last 30 days." in html
    assert "1 run found nothing to compress (not counted as a compression)." in html
