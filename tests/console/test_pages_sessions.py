"""The sessions list, the session page, "Compress now" and the run progress fragment."""

from __future__ import annotations

import re
from datetime import timedelta
from typing import Any

import pytest
from django.db import connection
from django.test import Client
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from agent_compression.summary_message import SummaryHeader, render_summary_message
from console import queries as views
from console.celery import tasks_inline
from console.errors import InvalidInput
from console.models import Archive, CompressionRun, DriftCase, Session, Summary
from console.services import runs as run_service
from console.services.sessions import ImportedSession, create_session
from tests.console.factories import superuser_client

Status = CompressionRun.Status

TOOL_HISTORY: list[dict[str, Any]] = [
    {"role": "system", "content": "You are a coding agent."},
    {"role": "user", "content": "Look at a.py and run the tests."},
    {
        "role": "assistant",
        "content": None,
        "tool_calls": [
            {"id": "call_a", "type": "function", "function": {"name": "read_file", "arguments": '{"path": "a.py"}'}},
            {"id": "call_b", "type": "function", "function": {"name": "terminal", "arguments": '{"cmd": "make"}'}},
        ],
    },
    {"role": "tool", "tool_call_id": "call_a", "name": "read_file", "content": "print('contents of a')"},
    {"role": "tool", "tool_call_id": "call_b", "name": "terminal", "content": "2 passed"},
    {"role": "assistant", "content": "Both look fine."},
]


def make_session(key: str, messages: list[dict[str, Any]] | None = None, **fields: Any) -> Session:
    metadata = fields.pop("metadata", {})
    return create_session(ImportedSession(key=key, messages=messages or [], metadata=metadata, **fields))


def make_run(session: Session, status: str = Status.SUCCEEDED, **fields: Any) -> CompressionRun:
    done = status not in CompressionRun.ACTIVE
    defaults: dict[str, Any] = {
        "trigger": CompressionRun.Trigger.API,
        "status": status,
        "finished_at": timezone.now() if done else None,
    }
    if status == Status.SUCCEEDED:
        defaults.update(applied=True, was_compressed=True, tokens_before=900, tokens_after=300)
    return CompressionRun.objects.create(session=session, **(defaults | fields))


def make_drift(session: Session, status: str = DriftCase.Status.OPEN) -> DriftCase:
    run = make_run(session)
    archive = Archive.objects.create(session=session, run=run, start=1, end=3, message_keys=[], sha256="0" * 64)
    summary = Summary.objects.create(archive=archive, run=run, summary_id=f"sum_t{run.pk}", status="active", text="x")
    return DriftCase.objects.create(summary=summary, session=session, severity="high", status=status)


def keys_in(html: str) -> list[str]:
    """Session keys of the list's rows, in order."""
    return re.findall(r'<td class="mono key"><a href="/sessions/\d+/">([^<]*)</a>', html)


# --------------------------------------------------------------------------- the list


def test_it_lists_sessions_with_their_counts(as_viewer):
    session = make_session("wechat:abc", [{"role": "user", "content": "你好"}], metadata={"channel": "wechat"})
    make_run(session)
    make_run(session, Status.FAILED)
    make_drift(session)  # a third run
    make_drift(session, DriftCase.Status.DISMISSED)  # a fourth, and a case that is not open
    make_session("slack:quiet")
    html = as_viewer.get("/").content.decode()
    row = html[html.rindex("<tr", 0, html.index("wechat:abc")) :].split("</tr>")[0]
    cells = re.findall(r'<td class="num">(.*?)</td>', row, re.S)
    assert cells[0] == "1"  # messages
    assert cells[3] == "4"  # runs
    assert '<span class="badge sev-high" title="the worst is high">1 · high</span>' in cells[4]  # open drift cases
    assert f'href="/sessions/{session.pk}/"' in row
    assert row.startswith(f'<tr data-nav id="s-{session.pk}">')
    assert keys_in(html) == ["slack:quiet", "wechat:abc"]  # newest first


def test_it_searches_by_key(as_viewer):
    for key in ("wechat:one", "slack:two"):
        make_session(key, [{"role": "user", "content": "hi"}])
    assert keys_in(as_viewer.get("/", {"q": "SLACK"}).content.decode()) == ["slack:two"]


def test_it_searches_message_content_unless_told_keys_only(as_viewer):
    make_session("wechat:deploy", [{"role": "user", "content": "先不要修改部署脚本 deploy.sh"}])
    make_session("wechat:other", [{"role": "user", "content": "hello"}])
    assert keys_in(as_viewer.get("/", {"q": "部署脚本"}).content.decode()) == ["wechat:deploy"]
    assert keys_in(as_viewer.get("/", {"q": "DEPLOY.SH"}).content.decode()) == ["wechat:deploy"]
    html = as_viewer.get("/", {"q": "deploy.sh", "scope": "key"}).content.decode()
    assert keys_in(html) == []
    assert "No session matches these filters." in html


def test_it_searches_tool_call_arguments(as_viewer):
    make_session("cli:tools", TOOL_HISTORY)
    make_session("cli:plain", [{"role": "user", "content": "nothing here"}])
    assert keys_in(as_viewer.get("/", {"q": "a.py"}).content.decode()) == ["cli:tools"]


@pytest.mark.parametrize("few,most", [(0, 10), (0, 0)])
def test_it_searches_content_matching_many_messages(as_viewer, monkeypatch, few, most):
    # the strategies for common words: a per-session check against a list, or against a subquery
    monkeypatch.setattr(views, "CONTENT_KEYS_FEW", few)
    monkeypatch.setattr(views, "CONTENT_KEYS_MAX", most)
    make_session("a:1", [{"role": "user", "content": "export failed"}, {"role": "user", "content": "export again"}])
    make_session("a:2", [{"role": "user", "content": "nothing"}])
    make_session("export:3", [{"role": "user", "content": "key matches"}])
    assert sorted(keys_in(as_viewer.get("/", {"q": "export"}).content.decode())) == ["a:1", "export:3"]


def test_it_filters_compressed_sessions(as_viewer):
    compressed = make_session("s:compressed")
    make_run(compressed)
    failed = make_session("s:failed")
    make_run(failed, Status.FAILED)
    unchanged = make_session("s:unchanged")
    make_run(unchanged, applied=False, was_compressed=False)
    make_session("s:never")
    assert keys_in(as_viewer.get("/", {"compressed": "yes"}).content.decode()) == ["s:compressed"]
    no = keys_in(as_viewer.get("/", {"compressed": "no"}).content.decode())
    assert sorted(no) == ["s:failed", "s:never", "s:unchanged"]


def test_it_filters_open_drift(as_viewer):
    make_drift(make_session("s:open"))
    make_drift(make_session("s:dismissed"), DriftCase.Status.DISMISSED)
    make_session("s:none")
    assert keys_in(as_viewer.get("/", {"drift": "open"}).content.decode()) == ["s:open"]
    assert sorted(keys_in(as_viewer.get("/", {"drift": "none"}).content.decode())) == ["s:dismissed", "s:none"]


def test_it_filters_status_and_channel(as_viewer):
    make_session("wechat:a", status="active")
    make_session("wechat:b", status="closed")
    make_session("slack:c", status="closed")
    html = as_viewer.get("/").content.decode()
    assert '<option value="closed" >closed</option>' in html
    assert '<option value="slack" >slack</option>' in html
    assert keys_in(as_viewer.get("/", {"status": "closed"}).content.decode()) == ["slack:c", "wechat:b"]
    html = as_viewer.get("/", {"status": "closed", "channel": "wechat"}).content.decode()
    assert keys_in(html) == ["wechat:b"]
    assert '<option value="wechat" selected>' in html


def test_it_sorts_by_each_column(as_viewer):
    for key, tokens, count in [("b:1", 50, 3), ("a:2", 500, 1), ("c:3", 5, 2)]:
        Session.objects.create(key=key, token_count=tokens, message_count=count)
    assert keys_in(as_viewer.get("/", {"sort": "tokens"}).content.decode()) == ["a:2", "b:1", "c:3"]
    assert keys_in(as_viewer.get("/", {"sort": "tokens", "order": "asc"}).content.decode()) == ["c:3", "b:1", "a:2"]
    assert keys_in(as_viewer.get("/", {"sort": "messages"}).content.decode()) == ["b:1", "c:3", "a:2"]
    html = as_viewer.get("/", {"sort": "key"}).content.decode()
    assert keys_in(html) == ["a:2", "b:1", "c:3"]
    # the current column's header flips the order; the sort survives the next filter change
    assert 'href="?sort=key&amp;order=desc"' in html
    assert '<input type="hidden" name="sort" value="key">' in html
    assert keys_in(as_viewer.get("/", {"sort": "bogus", "order": "sideways"}).content.decode()) == ["c:3", "a:2", "b:1"]


def test_it_paginates_by_fifty_keeping_the_filters(as_viewer):
    Session.objects.bulk_create([Session(key=f"wechat:{i:03d}", channel="wechat") for i in range(55)])
    html = as_viewer.get("/", {"channel": "wechat", "sort": "key"}).content.decode()
    assert len(keys_in(html)) == 50
    assert "55 sessions" in html
    assert 'rel="next" href="?channel=wechat&amp;sort=key&amp;page=2"' in html
    second = as_viewer.get("/", {"channel": "wechat", "sort": "key", "page": "2"}).content.decode()
    assert keys_in(second) == [f"wechat:{i:03d}" for i in range(50, 55)]
    assert 'rel="prev"' in second
    assert as_viewer.get("/", {"page": "nonsense"}).status_code == 200


def test_it_counts_with_the_same_queries_for_5_or_50_rows(as_viewer):
    def queries() -> int:
        with CaptureQueriesContext(connection) as captured:
            assert as_viewer.get("/").status_code == 200
        return len(captured.captured_queries)

    for i in range(5):
        make_drift(make_session(f"few:{i}"))
    few = queries()
    for i in range(60):
        make_drift(make_session(f"many:{i}"))
    assert queries() == few


def test_it_answers_htmx_with_the_results_only(as_viewer):
    make_session("wechat:abc")
    response = as_viewer.get("/", {"q": "abc"}, headers={"HX-Request": "true"})
    html = response.content.decode()
    assert response.status_code == 200
    assert "HX-Request" in response["Vary"]
    assert "<html" not in html and "<form" not in html
    assert html.lstrip().startswith('<div id="results"')
    assert keys_in(html) == ["wechat:abc"]
    assert 'id="sort-state" hidden hx-swap-oob="true"' in html


def test_it_gives_the_whole_page_to_a_history_restore(as_viewer):
    headers = {"HX-Request": "true", "HX-History-Restore-Request": "true"}
    html = as_viewer.get("/", headers=headers).content.decode()
    assert "<html" in html and 'class="session-filters"' in html


def test_it_has_a_form_that_works_without_javascript(as_viewer):
    html = as_viewer.get("/").content.decode()
    form = html[html.index('<form method="get" action="/"') :].split("</form>")[0]
    assert 'hx-get="/"' in form and 'hx-target="#results"' in form and 'hx-push-url="true"' in form
    for name in ("q", "scope", "compressed", "drift", "status", "channel"):
        assert f'name="{name}"' in form


def test_it_says_how_to_import_sessions_when_there_are_none(as_viewer):
    html = as_viewer.get("/").content.decode()
    assert "No sessions yet." in html
    # the venv's python (a bare python has no Django), and the setting that loads a folder with the demo
    assert '<pre class="mono">.venv/bin/python manage.py import_sessions PATH</pre>' in html
    assert '<span class="mono">DEMO_SAMPLES_DIR</span>' in html
    as_viewer.cookies["django_language"] = "zh-hans"
    html = as_viewer.get("/").content.decode()
    assert '或把存放它们的文件夹设为 <span class="mono">DEMO_SAMPLES_DIR</span>' in html


def test_it_escapes_html_in_session_keys(as_viewer):
    make_session("x:<script>alert(1)<\\script>")
    Session.objects.create(key="y:<script>alert(2)</script>")  # stored before keys were checked
    html = as_viewer.get("/").content.decode()
    assert "<script>alert(" not in html
    assert "&lt;script&gt;alert(1)&lt;\\script&gt;" in html
    assert "&lt;script&gt;alert(2)&lt;/script&gt;" in html


def test_it_shows_the_chinese_interface(as_viewer):
    make_session("wechat:abc")
    as_viewer.cookies["django_language"] = "zh-hans"
    html = as_viewer.get("/").content.decode()
    assert '<html lang="zh-hans"' in html
    assert "会话" in html


def test_it_needs_the_view_permission_for_the_list(login, client):
    assert login("").get("/").status_code == 403
    response = client.get("/")
    assert response.status_code == 302 and "/login/" in response["Location"]


# --------------------------------------------------------------------------- the session page


def test_it_shows_the_session_header(as_viewer):
    session = make_session(
        "wechat:wxid_1",
        TOOL_HISTORY,
        metadata={"channel": "wechat", "nickname": "小王"},
        last_consolidated=2,
        context_window_tokens=1000,
    )
    Session.objects.filter(pk=session.pk).update(ineffective_compressions=2, auto_compression_stopped=True)
    html = as_viewer.get(f"/sessions/{session.pk}/").content.decode()
    assert '<h1 class="mono">wechat:wxid_1</h1>' in html
    assert "<dt>nickname</dt><dd>小王</dd>" in html
    stats = html[html.index('id="session-stats"') :].split("</dl>")[0]
    assert "<dd>6</dd>" in stats  # messages
    assert f"{session.token_count} / 1,000" in stats
    assert "first 2 messages, never rewritten" in stats
    assert "stopped" in stats
    assert "The last 2 compressions in a row left the session over its trigger" in stats
    assert "Compress now" not in html  # a viewer


def test_it_nests_tool_results_under_their_calls(as_viewer):
    session = make_session("cli:tools", TOOL_HISTORY)
    html = as_viewer.get(f"/sessions/{session.pk}/").content.decode()
    for call, result in (("m-2-call-1", "m-3"), ("m-2-call-2", "m-4")):
        details = html[html.index(f'<details class="call" id="{call}">') :].split("</details>")[0]
        assert f'id="{result}"' in details
        assert "1 result" in details
    assert "{\n  &quot;path&quot;: &quot;a.py&quot;\n}" in html  # arguments, pretty-printed
    assert html.count('id="m-3"') == 1
    assert '<span class="tokens muted">' in html


def test_it_shows_results_of_calls_outside_the_window_on_their_own(as_viewer):
    orphan = {"role": "tool", "tool_call_id": "call_gone", "content": "late result"}
    session = make_session("cli:orphan", [{"role": "user", "content": "hi"}, orphan])
    html = as_viewer.get(f"/sessions/{session.pk}/").content.decode()
    assert 'id="m-1"' in html
    assert '<details class="call"' not in html
    turn = html[html.rindex('<div class="turn"', 0, html.index('id="m-1"')) :]
    assert "late result" in turn.split("</article>")[0]


def test_it_marks_where_the_session_was_compressed(as_viewer, compressed_run):
    summary = Summary.objects.get(run=compressed_run)
    archive = compressed_run.archive
    html = as_viewer.get(f"/sessions/{compressed_run.session_id}/").content.decode()
    marker = html[html.index('class="compression-marker"') :].split("</div>")[0]
    assert f"messages {archive.start}–{archive.end - 1} archived" in marker
    assert f'href="/summaries/{summary.pk}/"' in marker
    assert f'href="/archives/{archive.pk}/"' in marker
    # the summary message itself follows the marker
    assert 'class="msg role-user is-summary"' in html[html.index('class="compression-marker"') :]


def test_it_shows_a_reported_summary_without_a_stored_row_plainly(as_viewer):
    header = SummaryHeader("sum_elsewhere", "reported", None, "2026-01-01", (1, 5), None)
    message = render_summary_message("The user wants X.", header)
    session = make_session("cli:reported", [{"role": "system", "content": "s"}, message])
    html = as_viewer.get(f"/sessions/{session.pk}/").content.decode()
    assert "compression-marker" not in html
    assert 'class="msg role-user is-summary"' in html
    assert "The user wants X." in html


def long_session(n: int = 450) -> Session:
    roles = ("user", "assistant")
    return make_session("cli:long", [{"role": roles[i % 2], "content": f"message number {i}"} for i in range(n)])


def test_it_shows_the_latest_window_and_links_to_earlier_ones(as_viewer):
    session = long_session()
    html = as_viewer.get(f"/sessions/{session.pk}/").content.decode()
    assert 'id="m-449"' in html and 'id="m-250"' in html and 'id="m-249"' not in html
    assert "Messages 250–449 of 450" in html
    assert 'rel="prev" href="?start=50"' in html
    assert 'hx-target="#timeline"' in html
    html = as_viewer.get(f"/sessions/{session.pk}/", {"start": "0"}).content.decode()
    assert 'id="m-0"' in html and 'id="m-199"' in html and 'id="m-200"' not in html
    assert 'rel="next" href="?start=200"' in html
    assert as_viewer.get(f"/sessions/{session.pk}/", {"start": "-5"}).status_code == 200
    assert as_viewer.get(f"/sessions/{session.pk}/", {"start": "99999"}).status_code == 200


def test_it_opens_the_window_holding_a_message(as_viewer):
    session = long_session()
    response = as_viewer.get(f"/sessions/{session.pk}/", {"at": "310"})
    assert response.status_code == 302
    assert response["Location"] == f"/sessions/{session.pk}/?start=200#m-310"
    html = as_viewer.get(f"/sessions/{session.pk}/", {"start": "200"}).content.decode()
    assert 'id="m-310"' in html
    # htmx gets the window itself
    response = as_viewer.get(f"/sessions/{session.pk}/", {"at": "10"}, headers={"HX-Request": "true"})
    html = response.content.decode()
    assert response.status_code == 200
    assert html.lstrip().startswith('<section id="timeline"')
    assert 'id="m-10"' in html and "<html" not in html
    # a message that does not exist is not a deep link
    assert as_viewer.get(f"/sessions/{session.pk}/", {"at": "9999"}).status_code == 200


def test_it_loads_a_window_with_the_same_queries_for_a_few_or_200_messages(as_viewer):
    def queries(session: Session) -> int:
        with CaptureQueriesContext(connection) as captured:
            assert as_viewer.get(f"/sessions/{session.pk}/").status_code == 200
        return len(captured.captured_queries)

    few = queries(make_session("cli:few", TOOL_HISTORY))
    many = make_session("cli:many", TOOL_HISTORY * 40)  # 240 messages: a full window of 200
    make_run(many)
    assert queries(many) == few


def test_it_escapes_scripts_in_messages(as_viewer):
    session = make_session("cli:xss", [{"role": "user", "content": "<script>alert('x')</script><b>bold</b>"}])
    html = as_viewer.get(f"/sessions/{session.pk}/").content.decode()
    assert "<script>alert" not in html and "<b>bold</b>" not in html
    assert "&lt;script&gt;alert(&#x27;x&#x27;)&lt;/script&gt;" in html


SECRET = "sk-proj-abcdefghijklmnopqrstuvwxyz123456"


def test_it_masks_secrets_and_gates_reveal(as_viewer):
    session = make_session("cli:secret", [{"role": "user", "content": f"my key is {SECRET}"}])
    html = as_viewer.get(f"/sessions/{session.pk}/").content.decode()
    assert "[secret:api_key:" in html and SECRET not in html
    assert "Reveal secrets" not in html
    assert as_viewer.get(f"/sessions/{session.pk}/", {"reveal": "1"}).status_code == 403
    admin = superuser_client()
    assert "Reveal secrets" in admin.get(f"/sessions/{session.pk}/").content.decode()
    revealed = admin.get(f"/sessions/{session.pk}/", {"reveal": "1"}).content.decode()
    assert SECRET in revealed
    assert "Hide secrets" in revealed


def test_it_masks_secrets_in_metadata(as_viewer):
    session = make_session("cli:meta", metadata={"token": SECRET})
    html = as_viewer.get(f"/sessions/{session.pk}/").content.decode()
    assert SECRET not in html and "[secret:api_key:" in html


def test_it_hides_the_compress_form_from_viewers(as_viewer, as_operator):
    session = make_session("cli:a", TOOL_HISTORY)
    assert 'id="compress"' not in as_viewer.get(f"/sessions/{session.pk}/").content.decode()
    assert 'id="compress-form"' in as_operator.get(f"/sessions/{session.pk}/").content.decode()
    # a viewer still follows a run in flight
    run = make_run(session, Status.RUNNING, stage="prune", started_at=timezone.now())
    html = as_viewer.get(f"/sessions/{session.pk}/").content.decode()
    assert "Compression in progress" in html and f'id="run-progress-{run.pk}"' in html
    assert 'id="compress-form"' not in html


def test_it_lists_the_sessions_runs(as_viewer, compressed_run):
    session = compressed_run.session
    queued = make_run(session, Status.QUEUED, stage="")
    running = make_run(session, Status.RUNNING, stage="summarize", started_at=timezone.now())
    make_run(session, Status.CONFLICT, trigger=CompressionRun.Trigger.MANUAL)
    html = as_viewer.get(f"/sessions/{session.pk}/").content.decode()
    runs = html[html.index('<section id="runs"') :].split("</section>")[0]
    row = runs[runs.index(f'id="run-{compressed_run.pk}"') :].split("</tr>")[0]
    assert f'href="/runs/{compressed_run.pk}/"' in row
    assert '<span class="badge ok">succeeded</span>' in row
    assert f"{compressed_run.tokens_before:,} → {compressed_run.tokens_after:,}" in row
    archive = compressed_run.archive
    assert f"{archive.end - archive.start} of {compressed_run.base_length}" in row
    assert '<span class="badge danger">conflict</span>' in runs
    assert "manual" in runs
    row = runs[runs.index(f'id="run-{running.pk}"') :].split("</tr>")[0]
    assert "summarize" in row
    assert runs.index(f'id="run-{running.pk}"') < runs.index(f'id="run-{queued.pk}"')  # newest first
    assert runs.count("data-nav") == 4
    # the run in flight shows its progress, polled with the session's out-of-band refresh
    assert f'hx-get="/runs/{queued.pk}/progress?from=session"' in html
    assert '<noscript><meta http-equiv="refresh" content="2"></noscript>' in html  # the page refreshes without JS


def test_it_answers_htmx_with_the_timeline_only(as_viewer):
    session = make_session("cli:a", TOOL_HISTORY)
    response = as_viewer.get(f"/sessions/{session.pk}/", headers={"HX-Request": "true"})
    html = response.content.decode()
    assert html.lstrip().startswith('<section id="timeline"') and "<html" not in html
    assert "Vary" in response and "HX-Request" in response["Vary"]


def test_it_needs_the_view_permission_for_a_session(login, client):
    session = make_session("cli:a")
    assert login("").get(f"/sessions/{session.pk}/").status_code == 403
    assert client.get(f"/sessions/{session.pk}/").status_code == 302
    assert login("viewer").get("/sessions/999999/").status_code == 404


# --------------------------------------------------------------------------- compress now


def test_it_queues_a_manual_run_with_focus_and_overrides(as_operator):
    session = make_session("cli:a", TOOL_HISTORY)
    response = as_operator.post(
        f"/sessions/{session.pk}/compress", {"focus_topic": "the deploy script", "tail_tokens": "500"}
    )
    run = CompressionRun.objects.get(session=session)
    assert response.status_code == 303
    assert response["Location"] == f"/runs/{run.pk}/"
    assert run.trigger == CompressionRun.Trigger.MANUAL
    assert run.status == Status.QUEUED
    assert run.focus_topic == "the deploy script"
    assert run.config == {"tail_tokens": 500}  # only what was filled in
    assert run.created_by == as_operator.user


def test_it_answers_htmx_with_the_progress_fragment(as_operator):
    session = make_session("cli:a", TOOL_HISTORY)
    response = as_operator.post(f"/sessions/{session.pk}/compress", {"focus_topic": ""}, headers={"HX-Request": "true"})
    run = CompressionRun.objects.get(session=session)
    html = response.content.decode()
    assert response.status_code == 200
    assert f'id="run-progress-{run.pk}"' in html
    assert f'hx-get="/runs/{run.pk}/progress?from=session"' in html
    assert 'hx-trigger="every 1s"' in html
    assert "<noscript>" not in html
    assert "already queued or running" not in html
    assert 'id="compress-form"' in html and 'hx-swap-oob="true"' in html  # a fresh form
    assert run.config == {} and run.focus_topic == ""


def test_it_returns_the_run_already_in_flight(as_operator):
    session = make_session("cli:a", TOOL_HISTORY)
    running = make_run(session, Status.RUNNING, stage="prune", started_at=timezone.now())
    response = as_operator.post(f"/sessions/{session.pk}/compress", {}, headers={"HX-Request": "true"})
    assert CompressionRun.objects.filter(session=session).count() == 1
    html = response.content.decode()
    assert "already queued or running, so no second one was started" in html
    assert f'id="run-progress-{running.pk}"' in html
    response = as_operator.post(f"/sessions/{session.pk}/compress", {}, follow=False)
    assert response.status_code == 303 and response["Location"] == f"/runs/{running.pk}/"
    assert CompressionRun.objects.filter(session=session).count() == 1


def test_it_refuses_compression_to_viewers(as_viewer, login):
    session = make_session("cli:a", TOOL_HISTORY)
    assert as_viewer.post(f"/sessions/{session.pk}/compress", {}).status_code == 403
    assert login("reviewer").post(f"/sessions/{session.pk}/compress", {}).status_code == 403
    assert not CompressionRun.objects.exists()


def test_it_only_compresses_on_post(as_operator):
    session = make_session("cli:a")
    assert as_operator.get(f"/sessions/{session.pk}/compress").status_code == 405


def test_it_rejects_invalid_overrides_with_422(as_operator):
    session = make_session("cli:a", TOOL_HISTORY)
    url = f"/sessions/{session.pk}/compress"
    response = as_operator.post(url, {"trigger_ratio": "5", "tail_tokens": "lots"}, headers={"HX-Request": "true"})
    html = response.content.decode()
    assert response.status_code == 422
    assert response["HX-Retarget"] == "#compress-form" and response["HX-Reswap"] == "outerHTML"
    assert html.lstrip().startswith('<form id="compress-form"')
    assert "Ensure this value is less than or equal to 1" in html
    assert "Enter a whole number." in html
    assert 'class="overrides" open' in html
    # without JavaScript: the whole page, with the same errors
    response = as_operator.post(url, {"trigger_ratio": "5"})
    assert response.status_code == 422
    page = response.content.decode()
    assert "<html" in page and "Ensure this value is less than or equal to 1" in page
    assert not CompressionRun.objects.exists()


def test_it_shows_service_errors_with_422(as_operator, monkeypatch):
    session = make_session("cli:a", TOOL_HISTORY)

    def refuse(*args: Any, **kwargs: Any) -> Any:
        raise InvalidInput("config: tail_tokens <b>too</b> large")

    monkeypatch.setattr(run_service, "request_compression", refuse)
    response = as_operator.post(f"/sessions/{session.pk}/compress", {}, headers={"HX-Request": "true"})
    assert response.status_code == 422
    html = response.content.decode()
    assert 'class="form-errors" role="alert"' in html
    assert "config: tail_tokens &lt;b&gt;too&lt;/b&gt; large" in html


def test_it_enforces_csrf_on_compress(login):
    operator = login("operator")
    session = make_session("cli:a", TOOL_HISTORY)
    client = Client(enforce_csrf_checks=True)
    client.force_login(operator.user)
    assert client.post(f"/sessions/{session.pk}/compress", {}).status_code == 403
    assert not CompressionRun.objects.exists()
    html = client.get(f"/sessions/{session.pk}/").content.decode()
    token = re.search(r'name="csrfmiddlewaretoken" value="([^"]+)"', html).group(1)
    response = client.post(f"/sessions/{session.pk}/compress", {"csrfmiddlewaretoken": token})
    assert response.status_code == 303
    assert CompressionRun.objects.count() == 1


# --------------------------------------------------------------------------- run progress


def test_it_polls_a_queued_run(as_viewer):
    run = make_run(make_session("cli:a"), Status.QUEUED)
    response = as_viewer.get(f"/runs/{run.pk}/progress")
    html = response.content.decode()
    assert response.status_code == 200
    assert f'hx-get="/runs/{run.pk}/progress"' in html
    assert 'hx-trigger="every 1s"' in html and 'hx-swap="outerHTML"' in html
    assert "Waiting for a worker" in html
    # htmx parses swapped-in <noscript> content as live elements: a refresh in it would reload the page
    assert "<noscript>" not in html
    assert "stage current" not in html


def test_it_highlights_the_current_stage(as_viewer):
    started = timezone.now() - timedelta(seconds=75)
    run = make_run(make_session("cli:a"), Status.RUNNING, stage="summarize", started_at=started, attempts=2)
    html = as_viewer.get(f"/runs/{run.pk}/progress", {"from": "session"}).content.decode()
    stages = re.findall(r'<li class="stage (\w+)"[^>]*>([^<]+)</li>', html)
    assert [state for state, _ in stages] == ["done", "done", "done", "current", "todo", "todo", "todo"]
    assert stages[3][1] == "summarize"
    assert 'aria-current="step"' in html
    assert "1 min 15 s" in html
    assert "attempt 2" in html
    assert f'hx-get="/runs/{run.pk}/progress?from=session"' in html
    assert "hx-swap-oob" not in html


def test_it_stops_polling_with_the_outcome(as_viewer, compressed_run):
    response = as_viewer.get(f"/runs/{compressed_run.pk}/progress")
    html = response.content.decode()
    assert response.status_code == 286
    assert "hx-trigger" not in html and "noscript" not in html
    assert f"Compressed: {compressed_run.tokens_before:,} → {compressed_run.tokens_after:,} tokens" in html
    assert f'<a class="open-run" href="/runs/{compressed_run.pk}/">Open the run</a>' in html
    assert "hx-swap-oob" not in html  # the run page has no #runs or #session-stats


def test_it_refreshes_the_session_page_when_done(as_viewer, compressed_run):
    html = as_viewer.get(f"/runs/{compressed_run.pk}/progress", {"from": "session"}).content.decode()
    assert '<dl id="session-stats" class="session-stats" hx-swap-oob="true">' in html
    assert '<section id="runs" class="session-runs" hx-swap-oob="true">' in html
    assert f'id="run-{compressed_run.pk}"' in html
    assert f"<dd>{compressed_run.session.message_count}</dd>" in html


def test_it_explains_a_failed_run(as_viewer):
    run = make_run(make_session("cli:a"), Status.FAILED, error="RuntimeError: <script>boom()</script>")
    response = as_viewer.get(f"/runs/{run.pk}/progress")
    html = response.content.decode()
    assert response.status_code == 286
    assert "RuntimeError: &lt;script&gt;boom()&lt;/script&gt;" in html and "<script>boom" not in html
    assert "Nothing in the session was changed; check the worker log, then compress again." in html
    assert '<span class="badge danger">failed</span>' in html


def test_it_explains_a_conflict(as_viewer):
    run = make_run(make_session("cli:a"), Status.CONFLICT, error="the session changed")
    html = as_viewer.get(f"/runs/{run.pk}/progress").content.decode()
    assert "The session changed while it was being compressed; nothing was changed. Compress again." in html
    assert '<span class="badge danger">conflict</span>' in html


def test_it_explains_a_degraded_run_and_links_its_archive(as_viewer, compressed_run):
    failed = [{"code": "summary_failed", "message": "summarizer fake failed (HTTP 500)"}]
    CompressionRun.objects.filter(pk=compressed_run.pk).update(status=Status.DEGRADED, warnings=failed)
    html = as_viewer.get(f"/runs/{compressed_run.pk}/progress").content.decode()
    assert "The summarizer failed. The history was pruned and kept valid, without a summary." in html
    assert "Re-summarize from the archive when the summarizer is back." in html
    assert f'href="/archives/{compressed_run.archive.pk}/"' in html
    assert '<span class="badge warn">degraded</span>' in html
    bare = make_run(make_session("cli:b"), Status.DEGRADED, was_compressed=True)
    html = as_viewer.get(f"/runs/{bare.pk}/progress").content.decode()
    assert "/archives/" not in html
    # degraded for another reason: it says that one, not a summarizer failure
    assert "still over the trigger" in html and "The summarizer failed" not in html


def test_it_says_when_nothing_needed_compressing(as_viewer):
    run = make_run(make_session("cli:a"), Status.SUCCEEDED, was_compressed=False, applied=False)
    assert "Nothing needed compressing" in as_viewer.get(f"/runs/{run.pk}/progress").content.decode()


def test_it_needs_the_view_permission_for_progress(login):
    run = make_run(make_session("cli:a"), Status.QUEUED)
    assert login("").get(f"/runs/{run.pk}/progress").status_code == 403
    assert login("reviewer").get(f"/runs/{run.pk}/progress").status_code == 200
    assert login("viewer").get("/runs/999999/progress").status_code == 404


def test_it_follows_a_real_compression_from_the_session_page(as_operator):
    # the whole loop: queue from the page, a worker runs it, the fragment reports the outcome
    session = make_session("cli:a", TOOL_HISTORY * 30)
    response = as_operator.post(f"/sessions/{session.pk}/compress", {"context_window_tokens": "1000"})
    run = CompressionRun.objects.get(session=session)
    assert response.status_code == 303
    with tasks_inline():
        run_service.execute_run(run.pk)
    html = as_operator.get(f"/runs/{run.pk}/progress", {"from": "session"}).content.decode()
    run.refresh_from_db()
    assert run.status == Status.SUCCEEDED, run.error
    assert "Compressed:" in html
    page = as_operator.get(f"/sessions/{session.pk}/").content.decode()
    assert "compression-marker" in page
