"""The quality dashboard: compressions and tokens saved per day, problem runs, anti-thrash warnings, drift."""

from __future__ import annotations

from typing import Any

from django.contrib.auth.decorators import permission_required
from django.http import HttpRequest, HttpResponse, QueryDict
from django.shortcuts import redirect, render
from django.urls import reverse
from django.utils import formats
from django.utils.formats import date_format
from django.utils.translation import gettext as _
from django.utils.translation import ngettext, pgettext_lazy
from django.views.decorators.http import require_GET
from django.views.decorators.vary import vary_on_headers

from ..masking import mask_text
from ..models import CompressionRun, DriftCase, Session
from ..reveal import may_reveal
from ..services.dashboard import (
    CASE_STATUSES,
    PERIODS,
    RUN_STATUSES,
    Calls,
    Metrics,
    dashboard_metrics,
    parse_days,
    summarizer_calls,
)
from . import VIEW, labels
from .charts import Category, Series, bar_chart, hbar_chart, number
from .htmx import partial

#: a day under a bar of the daily charts (translators: a Django date format, e.g. "n月j日")
AXIS_DATE = pgettext_lazy("date format on a chart axis", "M j")


#: runs listed behind a chart's bar
RUNS_SHOWN = 200
STATUS_CHOICES = CompressionRun.Status.choices
#: sessions offered by the dashboard's export form
EXPORT_CHOICES = 200


def export_choices() -> list[tuple[int, str]]:
    """(pk, key as shown) of the sessions updated most recently, by shown key; secrets in keys masked."""
    rows = Session.objects.order_by("-updated_at").values_list("pk", "key", "masked_key")[:EXPORT_CHOICES]
    return sorted(((pk, masked or key) for pk, key, masked in rows), key=lambda row: row[1])


def runs_url(**params: str) -> str:
    """The runs behind a bar: ``/runs/?day=2026-12-02&status=failed`` (empty values left out).

    Values are masked like any text a page shows: a link is output too (a model name can hold a secret).
    """
    query = QueryDict(mutable=True)
    query.update({k: mask_text(v) for k, v in params.items() if v})
    return f"{reverse('runs')}?{query.urlencode()}" if query else reverse("runs")


def cases_url(kind: str, status: str | None) -> str:
    """The drift queue filtered to a kind (and a review status, else every status)."""
    query = QueryDict(mutable=True)
    query.update({"kind": kind, "status": status or "all"})
    return f"{reverse('drift_queue')}?{query.urlencode()}"


def kind_label(kind: str) -> str:
    return str(labels.label(labels.FINDING_KINDS, kind)) if kind else str(labels.NO_KIND)


def daily_charts(m: Metrics) -> dict[str, Any]:
    """Runs per day stacked by outcome, and tokens saved per day: one bar per day of the period."""
    days = [Category(date_format(d.date, "DATE_FORMAT"), date_format(d.date, str(AXIS_DATE))) for d in m.by_day]
    outcomes = [
        Series(s, str(CompressionRun.Status(s).label), [d.runs.get(s, 0) for d in m.by_day]) for s in RUN_STATUSES
    ]
    saved = [Series("saved", _("tokens saved"), [d.saved for d in m.by_day])]

    def runs(day: str, n: int) -> str:
        return ngettext("%(day)s: %(n)s compression", "%(day)s: %(n)s compressions", n) % {"day": day, "n": number(n)}

    def tokens(day: str, n: int) -> str:
        return _("%(day)s: %(n)s tokens saved") % {"day": day, "n": number(n)}

    def day_link(i: int, status: str | None) -> str:
        day = m.by_day[i]
        return runs_url(day=day.date.isoformat(), status=status or "") if day.total else ""

    def saved_link(i: int, key: str | None) -> str:
        return runs_url(day=m.by_day[i].date.isoformat()) if m.by_day[i].saved else ""

    return {
        "runs_chart": bar_chart(
            "chart-runs", _("Compressions per day, by outcome"), days, outcomes, describe=runs, link=day_link
        ),
        "saved_chart": bar_chart(
            "chart-saved", _("Tokens saved per day"), days, saved, describe=tokens, link=saved_link
        ),
        "outcomes": [(s.key, s.label, m.status_totals[s.key]) for s in outcomes],
        # the numbers behind both charts, newest day first
        "day_rows": [
            {
                "label": c.label,
                "counts": [(d.runs.get(s, 0), runs_url(day=d.date.isoformat(), status=s)) for s in RUN_STATUSES],
                "total": d.total,
                "saved": d.saved,
                "href": runs_url(day=d.date.isoformat()),
            }
            for c, d in reversed(list(zip(days, m.by_day, strict=True)))
        ],
    }


def drift_charts(m: Metrics) -> dict[str, Any]:
    """Findings per kind, and cases per kind stacked by review status, with the table rows behind them."""
    kinds = [Category(kind_label(k.kind)) for k in m.kinds]
    findings = [Series("findings", _("findings"), [k.findings for k in m.kinds])]
    statuses = [Series(s, str(DriftCase.Status(s).label), [k.cases.get(s, 0) for k in m.kinds]) for s in CASE_STATUSES]
    rows = [
        {
            "label": c.label,
            "findings": k.findings,
            "cases": [k.cases.get(s, 0) for s in CASE_STATUSES],
            "total": k.cases_total,
        }
        for c, k in zip(kinds, m.kinds, strict=True)
    ]

    def kind_link(i: int, status: str | None) -> str:
        kind = m.kinds[i]
        if not (kind.findings or kind.cases_total):
            return ""
        return cases_url(kind.kind, status if status in CASE_STATUSES else None)

    return {
        "findings_chart": hbar_chart(
            "chart-findings", _("Drift findings by kind"), kinds, findings, link=lambda i, k: kind_link(i, None)
        ),
        "cases_chart": hbar_chart("chart-cases", _("Drift cases by kind and status"), kinds, statuses, link=kind_link),
        "kind_rows": rows,
        "case_statuses": [DriftCase.Status(s).label for s in CASE_STATUSES],
        "severities": [(label, m.cases_by_severity.get(s, 0)) for s, label in labels.SEVERITIES.items()],
    }


def money(value: float | None) -> str:
    """A cost as the page writes it: grouped, 2 decimals from 1 up, 4 below (a call can cost 0.0003)."""
    if value is None:
        return ""
    return formats.number_format(value, decimal_pos=2 if abs(value) >= 1 or value == 0 else 4, force_grouping=True)


def cost_rows(m: Metrics, calls: Calls) -> dict[str, Any]:
    """Cost of summarizer calls per day (newest first) and per model, and latency per model."""
    days = [date_format(d.date, "DATE_FORMAT") for d in m.by_day]
    return {
        "calls": calls,
        "cost_total": money(calls.cost_total),
        "cost_days": [
            {"label": label, "cost": money(cost), "href": runs_url(day=d.date.isoformat())}
            for label, cost, d in reversed(list(zip(days, calls.cost_by_day, m.by_day, strict=True)))
            if cost
        ],
        "call_rows": [
            {
                "row": row,
                "cost": money(row.cost),
                "href": runs_url(model=row.model or "", generator=row.generator or ""),
            }
            for row in calls.rows
        ],
    }


@require_GET
@permission_required(VIEW, raise_exception=True)
@vary_on_headers("HX-Request")
def dashboard(request: HttpRequest) -> HttpResponse:
    days = parse_days(request.GET.get("days"))
    metrics = dashboard_metrics(days)
    ctx: dict[str, Any] = {
        "m": metrics,
        "periods": PERIODS,
        "repeat_codes": [(code, labels.WARNING_TITLES[code], n) for code, n in metrics.repeated_codes.items()],
        "problems_url": runs_url(status="failed"),
        "degraded_url": runs_url(status="degraded"),
        # the export form offers the sessions updated most recently, by key (every session has its own URL too)
        # (masked: the keys are shown as Session.masked_key stores them, like every list of sessions)
        "sessions": export_choices(),
        "may_reveal": may_reveal(request.user),
    }
    ctx.update(daily_charts(metrics))
    ctx.update(drift_charts(metrics))
    ctx.update(cost_rows(metrics, summarizer_calls(days)))
    return render(request, partial(request, "console/dashboard.html", "board"), ctx)


# --------------------------------------------------------------------------- the runs behind a bar


@require_GET
@permission_required(VIEW, raise_exception=True)
def runs_list(request: HttpRequest) -> HttpResponse:
    """The old address of the runs behind a bar: the runs table, with the same filters."""
    query = request.GET.urlencode()
    return redirect(f"{reverse('runs')}?{query}" if query else reverse("runs"), permanent=True)
