"""The runs table across sessions (filters in the URL, sort, pages, CSV), and what sessions, runs and summaries
say about drift and which summary is live; every list in a constant number of queries."""

from __future__ import annotations

import csv
import io
import re

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from console.models import CompressionRun, Session, Summary
from tests.console.factories import html_of
from tests.console.test_pages_dashboard import day, make_case, make_run, make_session, make_summary

pytestmark = pytest.mark.django_db

#: a session key holding a secret: shown (and exported) masked
SECRET_KEY_PART = "sk-proj-" + "A1b2C3d4E5f6G7h8I9j0K1l2M3n4O5p6"


def shown_runs(html: str) -> list[int]:
    return [int(pk) for pk in re.findall(r'<tr data-nav id="r-(\d+)"', html)]


def test_it_lists_runs_of_every_session_with_their_summary_and_drift(as_viewer):
    a, b = make_session("team:alpha"), make_session("team:beta")
    ok = make_summary(a, day(0), provenance={"generator": "openai", "model": "gpt-x"})
    make_case(ok, ["constraint_dropped"], severity="high")
    failed = make_run(b, CompressionRun.Status.FAILED, day(2), before=900, after=None)
    html = html_of(as_viewer.get("/runs/"))
    assert shown_runs(html) == [ok.run_id, failed.pk]  # newest first, both sessions
    assert "team:alpha" in html and "team:beta" in html
    assert 'class="badge sev-high"' in html and ">gpt-x<" in html and ">openai<" in html
    zh = as_viewer
    zh.cookies["django_language"] = "zh-hans"
    assert "运行" in html_of(zh.get("/runs/")) and "下载 CSV" in html_of(zh.get("/runs/"))


def test_filters_live_in_the_url(as_viewer):
    a, b = make_session("team:alpha"), make_session("team:beta")
    drifted = make_summary(a, day(0), provenance={"generator": "openai", "model": "gpt-x"})
    make_case(drifted, ["constraint_dropped"], severity="high")
    clean = make_summary(b, day(1))
    old_failed = make_run(b, CompressionRun.Status.FAILED, day(5))
    get = lambda q: shown_runs(html_of(as_viewer.get(f"/runs/?{q}")))  # noqa: E731
    assert get("status=failed") == [old_failed.pk]
    assert get("q=alpha") == [drifted.run_id]
    assert get("severity=high") == [drifted.run_id]
    assert set(get("severity=none")) == {clean.run_id, old_failed.pk}
    assert get("model=gpt-x") == [drifted.run_id] and get("generator=extractive") == [clean.run_id]
    assert get("trigger=manual&since=" + day(3).date().isoformat()) == [drifted.run_id, clean.run_id]
    assert get("until=" + day(3).date().isoformat()) == [old_failed.pk]
    response = as_viewer.get("/runs/?status=nope&since=yesterday")
    assert response.status_code == 400
    assert "unknown status &#x27;nope&#x27;" in html_of(response) and "since must be a date" in html_of(response)


def test_it_sorts_and_pages(as_viewer):
    s = make_session("team:many")
    runs = [make_run(s, at=day(0, hour=1 + i % 20), before=1000 + i, after=500) for i in range(53)]
    first = html_of(as_viewer.get("/runs/?sort=tokens_before&order=asc"))
    assert shown_runs(first)[:3] == [r.pk for r in runs[:3]] and len(shown_runs(first)) == 50
    assert "page 1 of 2" in first and 'href="?sort=tokens_before&amp;order=asc&amp;page=2"' in first
    second = html_of(as_viewer.get("/runs/?sort=tokens_before&order=asc&page=2"))
    assert shown_runs(second) == [r.pk for r in runs[50:]]
    assert 'href="?sort=tokens_before"' in first  # the current column flips its order
    by_saved = shown_runs(html_of(as_viewer.get("/runs/?sort=saved")))
    assert by_saved[0] == runs[-1].pk


def test_the_csv_has_every_filtered_row_masked(as_viewer):
    secret = make_session(f"team:{SECRET_KEY_PART}")
    plain = make_session("team:plain")
    make_run(secret, before=100, after=40)
    make_run(plain, CompressionRun.Status.FAILED)
    response = as_viewer.get("/runs/export.csv?status=succeeded")
    assert response.status_code == 200 and response["Content-Type"].startswith("text/csv")
    body = b"".join(response.streaming_content).decode("utf-8-sig")
    rows = list(csv.reader(io.StringIO(body)))
    assert rows[0][:3] == ["run", "created_at", "session"] and len(rows) == 2
    assert SECRET_KEY_PART not in body and "[secret:" in rows[1][2]
    assert rows[1][3:7] == ["succeeded", "manual", "100", "40"]
    assert as_viewer.get("/runs/export.csv?status=bogus").status_code == 400


def test_dashboard_bars_land_on_the_runs_table(as_viewer):
    make_run(make_session(), CompressionRun.Status.FAILED, day(1))
    html = html_of(as_viewer.get("/dashboard/"))
    assert f'href="/runs/?day={day(1).date().isoformat()}&amp;status=failed"' in html


def queries_of(client, url: str) -> int:
    with CaptureQueriesContext(connection) as seen:
        assert client.get(url).status_code == 200
    return len(seen.captured_queries)


def test_the_runs_table_and_sessions_list_take_the_same_queries_for_more_rows(as_viewer, django_assert_num_queries):
    s = make_session("team:q")
    summary = make_summary(s, day(0))
    make_case(summary, ["identifier_missing"], severity="medium")
    few_runs, few_sessions = queries_of(as_viewer, "/runs/"), queries_of(as_viewer, "/")
    for i in range(12):
        other = make_session(f"team:q{i}")
        make_case(make_summary(other, day(0)), ["constraint_dropped"])
        make_run(other, CompressionRun.Status.DEGRADED)
    assert queries_of(as_viewer, "/runs/") == few_runs
    assert queries_of(as_viewer, "/") == few_sessions
    with django_assert_num_queries(few_sessions):
        as_viewer.get("/")


def test_the_sessions_list_shows_last_run_and_worst_open_drift(as_viewer):
    s = make_session("team:drift")
    summary = make_summary(s, day(1))
    make_case(summary, ["identifier_missing"], severity="medium")
    make_case(summary, ["constraint_dropped"], severity="high")
    make_case(summary, ["hedge_lost"], severity="high", status="dismissed")
    make_run(s, CompressionRun.Status.DEGRADED, day(0))
    html = html_of(as_viewer.get("/"))
    row = re.search(rf'<tr data-nav id="s-{s.pk}">.*?</tr>', html, re.S).group(0)
    assert '<span class="badge warn">degraded</span>' in row
    assert 'class="badge sev-high"' in row and "2 · high" in row


def test_the_session_page_lists_its_drift_cases(as_viewer):
    s = make_session("team:cases")
    case = make_case(make_summary(s, day(0)), ["constraint_inverted"])
    html = html_of(as_viewer.get(f"/sessions/{s.pk}/"))
    assert 'id="session-drift"' in html and f'href="/drift/{case.pk}/"' in html and "constraint inverted" in html
    as_viewer.cookies["django_language"] = "zh-hans"
    assert "漂移案例" in html_of(as_viewer.get(f"/sessions/{s.pk}/"))


def test_the_run_page_shows_its_summary_findings(as_viewer):
    s = make_session("team:run")
    summary = make_summary(s, day(0), findings=["constraint_dropped"])
    case = make_case(summary, ["constraint_dropped"])
    Summary.objects.filter(pk=summary.pk).update(drift_checked_at=day(0))
    html = html_of(as_viewer.get(f"/runs/{summary.run_id}/"))
    assert 'id="run-drift"' in html and f'href="/drift/{case.pk}/"' in html and "constraint dropped" in html


def test_one_summary_per_session_is_live_and_merged_ones_say_so(as_viewer, archive, active):
    session = Session.objects.get(pk=archive.session_id)
    # a later compression carried this archive's summary into its own: it is still "active" on its archive
    other = make_summary(session, day(0))
    html = html_of(as_viewer.get(f"/sessions/{session.pk}/"))
    assert '<span class="badge status-live">live</span>' in html
    assert '<span class="badge status-merged">merged into a later summary</span>' in html
    assert html.count("status-live") == 1
    assert html_of(as_viewer.get(f"/archives/{other.archive_id}/")).count("status-merged") == 1
