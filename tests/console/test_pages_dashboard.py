"""The quality dashboard: its numbers, its SVG charts, its period, its permission and its query count."""

from __future__ import annotations

import re
from datetime import datetime, time, timedelta
from itertools import count
from typing import Any

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from agent_compression.types import DRIFT_KINDS
from console.models import Archive, CompressionRun, DriftCase, Session, Summary
from console.services.dashboard import dashboard_metrics
from console.web.charts import Category, Series, bar_chart, compact, hbar_chart, nice_ticks
from tests.console.factories import HX, html_of

Status = CompressionRun.Status
_ids = count(1)


def day(days_ago: int, hour: int = 12) -> datetime:
    """An instant on the local day ``days_ago`` days before today."""
    local = timezone.localdate() - timedelta(days=days_ago)
    return timezone.make_aware(datetime.combine(local, time(hour)))


def make_session(key: str | None = None) -> Session:
    return Session.objects.create(key=key or f"test:s{next(_ids)}")


def make_run(
    session: Session,
    status: str = Status.SUCCEEDED,
    at: datetime | None = None,
    *,
    before: int | None = None,
    after: int | None = None,
    applied: bool | None = None,
    warnings: list[dict[str, str]] | None = None,
    error: str = "",
) -> CompressionRun:
    run = CompressionRun.objects.create(
        session=session,
        trigger="manual",
        status=status,
        tokens_before=before,
        tokens_after=after,
        applied=bool(before) if applied is None else applied,
        warnings=warnings or [],
        error=error,
    )
    CompressionRun.objects.filter(pk=run.pk).update(created_at=at or day(0))
    return run


def make_summary(
    session: Session,
    at: datetime | None = None,
    *,
    findings: list[str] = (),  # type: ignore[assignment]
    provenance: dict[str, Any] | None = None,
    status: str = Summary.Status.ACTIVE,
) -> Summary:
    run = make_run(session, at=at)
    archive = Archive.objects.create(session=session, run=run, start=1, end=3, message_keys=[], sha256="0" * 64)
    summary = Summary.objects.create(
        archive=archive,
        run=run,
        summary_id=f"sum_dash{run.pk}",
        status=status,
        text="x",
        provenance=provenance or {"generator": "extractive", "model": None, "prompt_version": "v1"},
        drift_findings=[{"kind": k, "severity": "high", "evidence": {}} for k in findings],
    )
    Summary.objects.filter(pk=summary.pk).update(created_at=at or day(0))
    return summary


def make_case(summary: Summary, kinds: list[str], status: str = "open", severity: str = "high") -> DriftCase:
    return DriftCase.objects.create(
        summary=summary,
        session_id=summary.archive.session_id,
        findings=[{"kind": k} for k in kinds],
        severity=severity,
        status=status,
    )


def chart(html: str, chart_id: str) -> str:
    """The SVG of one chart."""
    found = re.search(rf'<svg [^>]*aria-labelledby="{chart_id}-title".*?</svg>', html, re.S)
    assert found, f"no chart {chart_id}"
    return found.group(0)


def bar_titles(svg: str) -> list[str]:
    """Each bar's tooltip (the whole bar's, not its segments')."""
    return re.findall(r'<g class="bar">(?:<a href="[^"]*">)?<rect class="band"[^>]*><title>([^<]*)</title>', svg)


def segment_titles(svg: str) -> list[str]:
    return re.findall(r'<rect class="seg [^"]*"[^>]*><title>([^<]*)</title>', svg)


def figure(html: str, element_id: str) -> str:
    found = re.search(rf'id="{element_id}">([^<]*)<', html)
    assert found, f"no #{element_id}"
    return found.group(1)


def table_row(html: str, table_class: str, first_cell: str) -> list[str]:
    """The cells of the row of ``table.<table_class>`` whose first cell is ``first_cell`` (tags stripped)."""
    table = re.search(rf'<table class="data {table_class}">.*?</table>', html, re.S)
    assert table, f"no table {table_class}"
    for row in re.findall(r"<tr>(.*?)</tr>", table.group(0), re.S):
        cells = [re.sub(r"<[^>]+>", "", c).strip() for c in re.findall(r"<t[dh][^>]*>(.*?)</t[dh]>", row, re.S)]
        if cells and cells[0] == first_cell:
            return cells
    raise AssertionError(f"no row {first_cell!r} in table {table_class}")


# --------------------------------------------------------------------------- compressions and tokens saved


def test_it_shows_runs_per_day_by_status(as_viewer):
    session = make_session()
    make_run(session, Status.SUCCEEDED, day(0))
    make_run(session, Status.SUCCEEDED, day(0))
    make_run(session, Status.DEGRADED, day(0))
    make_run(session, Status.FAILED, day(3))
    make_run(session, Status.CONFLICT, day(3))
    make_run(session, Status.SUCCEEDED, day(40))  # before the period
    make_run(session, Status.QUEUED, day(0))  # not finished: not in the charts

    html = html_of(as_viewer.get("/dashboard/"))

    runs = chart(html, "chart-runs")
    titles = bar_titles(runs)
    assert len(titles) == 30 and 'data-bars="30"' in runs
    today, three_ago = (timezone.localdate() - timedelta(days=n) for n in (0, 3))
    assert titles[-1].endswith(": 3 compressions")
    assert titles[-4].endswith(": 2 compressions")
    assert sum(t.endswith(": 0 compressions") for t in titles) == 28  # empty days keep their bar
    segments = segment_titles(runs)
    assert len(segments) == 4  # today: succeeded and degraded; three days ago: failed and conflict
    assert any(s.endswith("· succeeded: 2") for s in segments)
    assert any(s.endswith("· conflict: 1") for s in segments)
    assert re.search(r"Finished runs</dt><dd>5<", html)
    assert "1 more run of this period is still queued or running" in html
    assert str(today.day) in titles[-1] and str(three_ago.day) in titles[-4]


def test_it_sums_tokens_saved_per_day_with_the_mean_ratio(as_viewer):
    session = make_session()
    make_run(session, Status.SUCCEEDED, day(0), before=1000, after=300)
    make_run(session, Status.DEGRADED, day(0), before=500, after=100)
    make_run(session, Status.SUCCEEDED, day(2), before=900, after=100, applied=False)  # not applied: saves nothing
    make_run(session, Status.SUCCEEDED, day(5), before=2000, after=1000)

    html = html_of(as_viewer.get("/dashboard/"))

    assert figure(html, "tokens-saved") == "2,100"
    # mean of 0.3, 0.2 and 0.5
    assert figure(html, "mean-ratio") == "33%"
    titles = bar_titles(chart(html, "chart-saved"))
    assert len(titles) == 30
    assert titles[-1].endswith(": 1,100 tokens saved")
    assert titles[-3].endswith(": 0 tokens saved")
    assert titles[-6].endswith(": 1,000 tokens saved")
    assert "2,100 tokens saved by 3 applied runs" in html


def test_it_says_so_when_there_were_no_compressions(as_viewer):
    make_run(make_session(), Status.SUCCEEDED, day(45))

    html = html_of(as_viewer.get("/dashboard/"))

    assert "No compressions in the last 30 days." in html
    assert "<svg" not in html
    assert "No degraded or failed runs in the last 30 days." in html
    assert "No repeated-compression warnings in the last 30 days." in html
    assert "No drift findings or cases in the last 30 days." in html
    assert "No summaries written in the last 30 days." in html
    assert "No compressions in the last 7 days." in html_of(as_viewer.get("/dashboard/", {"days": "7"}))
    # 45 days ago is inside the last 90
    assert 'aria-labelledby="chart-runs-title"' in html_of(as_viewer.get("/dashboard/", {"days": "90"}))


@pytest.mark.parametrize(
    ("days", "bars"), [("7", 7), ("30", 30), ("90", 90), ("", 30), ("abc", 30), ("8", 30), ("-7", 30), ("7.0", 30)]
)
def test_it_takes_the_period_from_days_and_falls_back_to_30(as_viewer, days, bars):
    make_run(make_session(), Status.SUCCEEDED, day(0))

    html = html_of(as_viewer.get("/dashboard/", {"days": days}))

    assert len(bar_titles(chart(html, "chart-runs"))) == bars
    assert len(bar_titles(chart(html, "chart-saved"))) == bars
    current = re.findall(r'<a href="\?days=(\d+)"[^>]*aria-current="page"', html)
    assert current == [str(bars)]


def test_it_counts_days_in_the_configured_time_zone(db, settings):
    settings.TIME_ZONE = "Asia/Shanghai"
    session = make_session()
    now = datetime.fromisoformat("2025-03-10T12:00:00+08:00")
    early = make_run(session, at=datetime.fromisoformat("2025-03-09T17:00:00+00:00"))  # 01:00 on the 10th there
    late = make_run(session, at=datetime.fromisoformat("2025-03-09T15:00:00+00:00"))  # 23:00 on the 9th there
    make_run(session, at=datetime.fromisoformat("2025-03-03T15:59:00+00:00"))  # 23:59 on the 3rd: before 7 days

    metrics = dashboard_metrics(7, now=now)

    assert [d.date.isoformat() for d in metrics.by_day][0] == "2025-03-04"
    assert [d.total for d in metrics.by_day] == [0, 0, 0, 0, 0, 1, 1]
    assert early.pk and late.pk and metrics.runs_total == 2


# --------------------------------------------------------------------------- degraded and failed runs


def test_it_lists_the_latest_degraded_and_failed_runs(as_viewer):
    session = make_session("slack:problems")
    degraded = make_run(
        session,
        Status.DEGRADED,
        day(1),
        warnings=[
            {"code": "summary_failed", "message": "the model timed out"},
            {"code": "input_repaired", "message": "x"},
        ],
    )
    failed = make_run(session, Status.FAILED, day(0), error="ValueError: bad history\nTraceback (most recent call)")
    make_run(session, Status.SUCCEEDED, day(0))

    html = html_of(as_viewer.get("/dashboard/"))

    table = re.search(r'<table class="data problems">.*?</table>', html, re.S).group(0)
    rows = re.findall(r"<tr>\s*<td class=\"when\">.*?</tr>", table, re.S)
    assert len(rows) == 2
    assert f'href="/runs/{failed.pk}/"' in rows[0] and f'href="/runs/{degraded.pk}/"' in rows[1]  # newest first
    assert f'href="/sessions/{session.pk}/">slack:problems</a>' in rows[0]
    assert "ValueError: bad history" in rows[0] and "Traceback" not in rows[0]
    assert "summary_failed" in rows[1] and "the model timed out" in rows[1] and "input_repaired" not in rows[1]
    assert '<span class="badge danger">failed</span>' in rows[0]
    assert '<span class="badge warn">degraded</span>' in rows[1]


def test_it_shows_only_the_latest_20_problem_runs(as_viewer):
    session = make_session()
    runs = [make_run(session, Status.FAILED, day(0, hour=0) + timedelta(minutes=i), error=f"e{i}") for i in range(25)]

    html = html_of(as_viewer.get("/dashboard/"))

    table = re.search(r'<table class="data problems">.*?</table>', html, re.S).group(0)
    assert len(re.findall(r'href="/runs/(\d+)/"', table)) == 20
    assert f'href="/runs/{runs[-1].pk}/"' in table and f'href="/runs/{runs[4].pk}/"' not in table
    assert "The latest 20 of 25." in html


# --------------------------------------------------------------------------- repeated compressions


def test_it_counts_repeated_compression_warnings_and_their_sessions(as_viewer):
    again, stopped, unrelated = make_session("a:again"), make_session("b:stopped"), make_session("c:unrelated")
    repeated = {"code": "repeated_compression", "message": "compressed again"}
    make_run(again, Status.DEGRADED, day(2), warnings=[{"code": "still_over_threshold", "message": "x"}, repeated])
    make_run(again, Status.DEGRADED, day(1), warnings=[repeated])
    make_run(
        stopped, Status.DEGRADED, day(0), warnings=[repeated, {"code": "auto_compression_stopped", "message": "off"}]
    )
    # the code in a message, not as a code; and a run before the period
    make_run(unrelated, Status.DEGRADED, day(0), warnings=[{"code": "other", "message": "not repeated_compression"}])
    make_run(unrelated, Status.DEGRADED, day(50), warnings=[repeated])

    html = html_of(as_viewer.get("/dashboard/"))

    assert figure(html, "repeated-runs") == "3"
    assert figure(html, "repeated-sessions") == "2"
    assert figure(html, "code-repeated_compression") == "3"
    assert figure(html, "code-auto_compression_stopped") == "1"
    assert table_row(html, "repeated", "b:stopped")[1:2] == ["1"]
    assert table_row(html, "repeated", "b:stopped")[3] == "stopped"
    assert table_row(html, "repeated", "a:again")[1] == "2"
    assert table_row(html, "repeated", "a:again")[3] == "still on"
    table = re.search(r'<table class="data repeated">.*?</table>', html, re.S).group(0)
    assert f'href="/sessions/{again.pk}/"' in table and f'href="/sessions/{stopped.pk}/"' in table
    assert "c:unrelated" not in table
    # the session warned last comes first
    assert table.index("b:stopped") < table.index("a:again")


# --------------------------------------------------------------------------- drift


def test_it_counts_drift_findings_and_cases_by_kind_and_status(as_viewer):
    session = make_session()
    first = make_summary(session, day(1), findings=["constraint_dropped", "constraint_dropped", "identifier_missing"])
    second = make_summary(session, day(0), findings=["hedge_lost"])
    old = make_summary(session, day(60), findings=["constraint_dropped", "hedge_lost"])
    make_case(first, ["constraint_dropped", "identifier_missing"], "confirmed", "high")
    make_case(first, ["constraint_dropped"], "resolved", "medium")
    make_case(second, ["hedge_lost"], "open", "low")
    make_case(second, [], "dismissed", "low")  # opened by hand, without a finding
    old_case = make_case(old, ["hedge_lost"], "open")
    DriftCase.objects.filter(pk=old_case.pk).update(created_at=day(60))

    html = html_of(as_viewer.get("/dashboard/"))

    assert figure(html, "findings-total") == "4"
    assert figure(html, "cases-total") == "4"
    # kind, findings, open, confirmed, dismissed, resolved, total cases
    assert table_row(html, "kinds", "constraint dropped") == ["constraint dropped", "2", "0", "1", "0", "1", "2"]
    assert table_row(html, "kinds", "identifier missing") == ["identifier missing", "1", "0", "1", "0", "0", "1"]
    assert table_row(html, "kinds", "uncertainty lost") == ["uncertainty lost", "1", "1", "0", "0", "0", "1"]
    assert table_row(html, "kinds", "constraint fabricated")[1:] == ["0"] * 6
    assert table_row(html, "kinds", "no kind")[1:] == ["0", "0", "0", "1", "0", "1"]
    findings = bar_titles(chart(html, "chart-findings"))
    assert len(findings) == len(DRIFT_KINDS) + 1  # every kind the drift check knows, and cases without a kind
    assert "constraint dropped: 2" in findings and "uncertainty lost: 1" in findings
    cases = chart(html, "chart-cases")
    assert "constraint dropped: 2" in bar_titles(cases)
    assert "constraint dropped · confirmed: 1" in segment_titles(cases)
    assert "constraint dropped · resolved: 1" in segment_titles(cases)
    assert re.search(r"high severity</dt><dd>1<", html) and re.search(r"low severity</dt><dd>2<", html)


def test_it_compares_summarizers_by_model_and_prompt_version(as_viewer):
    session = make_session()
    gpt = {"generator": "openai", "model": "gpt-4o-mini", "prompt_version": "v2"}
    one = make_summary(session, day(0), provenance=gpt, findings=["constraint_dropped", "hedge_lost"])
    make_summary(session, day(1), provenance=gpt, findings=["hedge_lost"])
    make_summary(session, day(1), provenance=gpt, status=Summary.Status.FAILED)
    extractive = make_summary(session, day(2), provenance={"generator": "extractive", "model": None})
    make_summary(session, day(40), provenance=gpt, findings=["hedge_lost"])  # before the period
    make_case(one, ["constraint_dropped"], "confirmed")
    make_case(one, ["hedge_lost"], "dismissed")
    make_case(extractive, [], "open")

    html = html_of(as_viewer.get("/dashboard/"))

    # generator, model, prompt version, summaries, failed, findings, per summary, cases opened, confirmed
    assert table_row(html, "models", "openai") == ["openai", "gpt-4o-mini", "v2", "3", "1", "3", "1.50", "2", "1"]
    assert table_row(html, "models", "extractive") == ["extractive", "—", "—", "1", "0", "0", "0.00", "1", "0"]


# --------------------------------------------------------------------------- access, fragment, escaping, queries


def test_it_is_shown_to_every_role_and_refused_without_one(login, client):
    for role in ("viewer", "operator", "reviewer", "admin"):
        assert login(role).get("/dashboard/").status_code == 200
    assert login("").get("/dashboard/").status_code == 403
    response = client.get("/dashboard/")
    assert response.status_code == 302 and "/login/" in response["Location"]


def test_it_answers_htmx_with_the_board_only(as_viewer):
    make_run(make_session(), Status.SUCCEEDED, day(0))

    response = as_viewer.get("/dashboard/", {"days": "7"}, headers=HX)

    html = html_of(response)
    assert html.lstrip().startswith('<div id="board"') and "<html" not in html
    assert len(bar_titles(chart(html, "chart-runs"))) == 7
    assert "HX-Request" in response["Vary"]


def test_it_escapes_session_keys(as_viewer):
    session = make_session('<script>alert("key")</script>')
    make_run(session, Status.DEGRADED, day(0), warnings=[{"code": "repeated_compression", "message": "<b>m</b>"}])

    html = html_of(as_viewer.get("/dashboard/"))

    assert "<script>alert" not in html and "<b>m</b>" not in html
    # problem runs, repeated sessions, the export form
    assert html.count("&lt;script&gt;alert(&quot;key&quot;)&lt;/script&gt;") == 3
    assert "&lt;b&gt;m&lt;/b&gt;" in html


def fill(n: int) -> None:
    """``n`` runs of every kind over the period, with summaries and cases for a tenth of them."""
    sessions = [make_session() for _ in range(3)]
    statuses = [Status.SUCCEEDED, Status.DEGRADED, Status.FAILED, Status.CONFLICT]
    for i in range(n):
        warnings = [{"code": "repeated_compression", "message": "again"}] if i % 3 == 0 else []
        make_run(sessions[i % 3], statuses[i % 4], day(i % 30), before=900, after=300, warnings=warnings)
        if i % 10 == 0:
            summary = make_summary(sessions[i % 3], day(i % 30), findings=["hedge_lost"])
            make_case(summary, ["hedge_lost"], "confirmed")


def queries_for(client: Any, n: int) -> int:
    fill(n)
    with CaptureQueriesContext(connection) as queries:
        assert client.get("/dashboard/").status_code == 200
    return len(queries)


def test_it_makes_as_many_queries_for_100_runs_as_for_10(login):
    few = queries_for(login("viewer"), 10)
    many = queries_for(login("viewer"), 100)

    assert few == many
    assert many <= 13  # 10, the summarizer calls, the sessions to export, and the header's inbox badge


def test_it_keeps_svg_coordinates_unlocalized(as_viewer, settings):
    settings.USE_THOUSAND_SEPARATOR = True
    settings.LANGUAGE_CODE = "zh-hans"
    make_run(make_session(), Status.SUCCEEDED, day(0), before=5_000_000, after=1_000)

    response = as_viewer.get("/dashboard/", headers={"Accept-Language": "zh-hans"})

    html = html_of(response)
    assert 'lang="zh-hans"' in html
    saved = chart(html, "chart-saved")
    for value in re.findall(r' (?:x|y|width|height)="([^"]*)"', saved):
        assert re.fullmatch(r"[0-9.]+", value), value
    # tooltips write numbers as the page does in this language
    assert figure(html, "tokens-saved") in bar_titles(saved)[-1]


# --------------------------------------------------------------------------- chart geometry


def test_it_stacks_bars_in_proportion_and_keeps_empty_categories():
    categories = [Category(f"day {i}", f"d{i}") for i in range(3)]
    series = [Series("a", "A", [4, 0, 1]), Series("b", "B", [4, 0, 0])]

    result = bar_chart("c", "C", categories, series, width=300, height=200)

    assert [b.total for b in result.bars] == [8, 0, 1]
    assert [b.title for b in result.bars] == ["day 0: 8", "day 1: 0", "day 2: 1"]
    first, _empty, last = result.bars
    assert [s.key for s in first.segments] == ["a", "b"] and _empty.segments == []
    a, b = first.segments
    assert a.height == pytest.approx(b.height) and a.height == pytest.approx(last.segments[0].height * 4)
    assert a.y + a.height == pytest.approx(result.bottom)  # the first series sits on the axis
    assert b.y + b.height == pytest.approx(a.y)  # the next on top of it
    assert b.y >= result.top
    assert [t.label for t in result.y_ticks] == ["0", "2", "4", "6", "8"]
    assert all(result.left <= s.x and s.x + s.width <= result.right for bar in result.bars for s in bar.segments)


def test_it_labels_a_few_days_ending_with_the_latest():
    categories = [Category(f"day {i}", f"d{i}") for i in range(90)]

    result = bar_chart("c", "C", categories, [Series("a", "A", [1] * 90)], max_labels=10)

    labels = [t.label for t in result.x_ticks]
    assert len(labels) == 10 and labels[-1] == "d89" and labels[0] == "d8"


def test_it_writes_horizontal_bars_with_their_totals():
    categories = [Category("constraint dropped"), Category("丢失的标识符")]
    series = [Series("open", "open", [3, 0]), Series("confirmed", "confirmed", [1, 0])]

    result = hbar_chart("h", "H", categories, series, width=400)

    assert result.horizontal and [b.total for b in result.bars] == [4, 0]
    first, second = result.bars
    assert first.segments[-1].x + first.segments[-1].width == pytest.approx(result.right)
    assert second.segments == [] and second.value_x == pytest.approx(result.left + 6)
    assert [t.label for t in result.y_ticks] == ["constraint dropped", "丢失的标识符"]
    assert result.left > 100  # room for the longest label


def test_it_picks_round_ticks_and_compact_labels():
    assert nice_ticks(0) == [0, 1]
    assert nice_ticks(7) == [0, 2, 4, 6, 8]
    assert nice_ticks(1100) == [0, 500, 1000, 1500]
    assert [compact(v) for v in (950, 9_500, 95_000, 120_000, 1_500_000)] == ["950", "9,500", "95k", "120k", "1.5M"]
