"""The quality dashboard: compressions and tokens saved per day, problem runs, anti-thrash warnings, drift."""

from __future__ import annotations

from typing import Any

from django.contrib.auth.decorators import permission_required
from django.http import HttpRequest, HttpResponse
from django.shortcuts import render
from django.utils.formats import date_format
from django.utils.translation import gettext as _
from django.utils.translation import ngettext, pgettext_lazy
from django.views.decorators.http import require_GET
from django.views.decorators.vary import vary_on_headers

from ..models import CompressionRun, DriftCase
from ..services.dashboard import CASE_STATUSES, PERIODS, RUN_STATUSES, Metrics, dashboard_metrics, parse_days
from . import VIEW, labels
from .charts import Category, Series, bar_chart, hbar_chart, number
from .htmx import partial

#: a day under a bar of the daily charts (translators: a Django date format, e.g. "n月j日")
AXIS_DATE = pgettext_lazy("date format on a chart axis", "M j")


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

    return {
        "runs_chart": bar_chart("chart-runs", _("Compressions per day, by outcome"), days, outcomes, describe=runs),
        "saved_chart": bar_chart("chart-saved", _("Tokens saved per day"), days, saved, describe=tokens),
        "outcomes": [(s.key, s.label, m.status_totals[s.key]) for s in outcomes],
        # the numbers behind both charts, newest day first
        "day_rows": [
            {"label": c.label, "counts": [d.runs.get(s, 0) for s in RUN_STATUSES], "total": d.total, "saved": d.saved}
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
    return {
        "findings_chart": hbar_chart("chart-findings", _("Drift findings by kind"), kinds, findings),
        "cases_chart": hbar_chart("chart-cases", _("Drift cases by kind and status"), kinds, statuses),
        "kind_rows": rows,
        "case_statuses": [DriftCase.Status(s).label for s in CASE_STATUSES],
        "severities": [(label, m.cases_by_severity.get(s, 0)) for s, label in labels.SEVERITIES.items()],
    }


@require_GET
@permission_required(VIEW, raise_exception=True)
@vary_on_headers("HX-Request")
def dashboard(request: HttpRequest) -> HttpResponse:
    metrics = dashboard_metrics(parse_days(request.GET.get("days")))
    ctx: dict[str, Any] = {
        "m": metrics,
        "periods": PERIODS,
        "repeat_codes": [(code, labels.WARNING_TITLES[code], n) for code, n in metrics.repeated_codes.items()],
    }
    ctx.update(daily_charts(metrics))
    ctx.update(drift_charts(metrics))
    return render(request, partial(request, "console/dashboard.html", "board"), ctx)
