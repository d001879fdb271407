"""The runs table (``/runs/``): every compression run across sessions, filtered, sorted, paged, and as CSV.

The filters live in the URL (``?status=&trigger=&severity=&model=&generator=&since=&until=&q=&sort=&order=``),
so a link from a dashboard chart (``?day=``) or a colleague lands on the same rows. A run's model and summarizer
are its own summary's; its drift severity is the worst of the drift cases on that summary nobody dismissed.
Everything a row shows comes from one annotated query (no query per row).
"""

from __future__ import annotations

import csv
import datetime
from dataclasses import dataclass, field
from typing import Any

from django.contrib.auth.decorators import permission_required
from django.core.paginator import Paginator
from django.db.models import Case, F, IntegerField, OuterRef, QuerySet, Subquery, Value, When
from django.db.models.fields.json import KT
from django.http import HttpRequest, HttpResponse, QueryDict, StreamingHttpResponse
from django.http.response import HttpResponseBase
from django.shortcuts import render
from django.utils import timezone
from django.utils.http import urlencode
from django.utils.translation import gettext as _
from django.utils.translation import gettext_lazy
from django.views.decorators.http import require_GET
from django.views.decorators.vary import vary_on_headers

from ..masking import key_search, mask_text
from ..models import CompressionRun, DriftCase, Summary
from ..queries import SEVERITIES
from ..services.dashboard import period_bounds
from ..services.drift import SEVERITY_RANK
from . import VIEW, labels
from .htmx import fragment, partial

PAGE_SIZE = 50
#: rows of one CSV download (the newest first, as filtered)
CSV_ROWS = 50_000
#: sortable columns: name in the URL -> the annotation or field sorted on
SORTS = {
    "created": "created_at",
    "tokens_before": "tokens_before",
    "tokens_after": "tokens_after",
    "saved": "saved",
    "drift": "drift_rank",
}
SORT_LABELS = {
    "created": gettext_lazy("When"),
    "tokens_before": gettext_lazy("Tokens before"),
    "tokens_after": gettext_lazy("Tokens after"),
    "saved": gettext_lazy("Saved"),
    "drift": gettext_lazy("Drift"),
}


def severity_rank() -> Case:
    """A drift case's severity as a number to sort and take the worst of (``SEVERITY_RANK``: high is largest)."""
    whens = [When(severity=s, then=Value(r)) for s, r in SEVERITY_RANK.items()]
    return Case(*whens, default=Value(-1), output_field=IntegerField())


def worst_case(cases: QuerySet[DriftCase]) -> Subquery:
    """The rank of the worst of ``cases`` (filtered on an ``OuterRef``), or null when there is none."""
    ranked = cases.annotate(rank=severity_rank()).order_by("-rank").values("rank")[:1]
    return Subquery(ranked, output_field=IntegerField())


def annotated(runs: QuerySet[CompressionRun]) -> Any:
    """Runs with what the table shows of their summary and drift, each a subquery of the same statement."""
    own = Summary.objects.filter(run=OuterRef("pk")).order_by("created_at", "id")
    cases = DriftCase.objects.filter(summary__run=OuterRef("pk")).exclude(status=DriftCase.Status.DISMISSED)
    return runs.select_related("session").annotate(
        model=Subquery(own.annotate(v=KT("provenance__model")).values("v")[:1]),
        generator=Subquery(own.annotate(v=KT("provenance__generator")).values("v")[:1]),
        drift_rank=worst_case(cases),
        saved=F("tokens_before") - F("tokens_after"),
    )


def _date(params: QueryDict, name: str, errors: list[str]) -> datetime.date | None:
    text = params.get(name, "").strip()
    if not text:
        return None
    try:
        return datetime.date.fromisoformat(text)
    except ValueError:
        errors.append(_("%(name)s must be a date written YYYY-MM-DD, not %(value)r") % {"name": name, "value": text})
        return None


@dataclass
class RunsQuery:
    """The table's filters and sort, parsed from GET; a value it cannot use is reported and ignored."""

    status: str = ""
    trigger: str = ""
    severity: str = ""
    model: str = ""
    generator: str = ""
    q: str = ""
    since: datetime.date | None = None
    until: datetime.date | None = None
    sort: str = "created"
    order: str = "desc"
    errors: list[str] = field(default_factory=list)

    @classmethod
    def parse(cls, params: QueryDict) -> RunsQuery:
        errors: list[str] = []
        query = cls(errors=errors)
        for name, allowed in (
            ("status", CompressionRun.Status.values),
            ("trigger", CompressionRun.Trigger.values),
            ("severity", (*SEVERITIES, "none")),
        ):
            value = params.get(name, "").strip()
            if value and value not in allowed:
                errors.append(
                    _("unknown %(name)s %(value)r: use one of %(choices)s")
                    % {"name": name, "value": value, "choices": ", ".join(allowed)}
                )
            elif value:
                setattr(query, name, value)
        query.model = params.get("model", "").strip()[:200]
        query.generator = params.get("generator", "").strip()[:200]
        query.q = params.get("q", "").strip()[:200]
        day = _date(params, "day", errors)  # a dashboard bar: one day
        query.since = _date(params, "since", errors) or day
        query.until = _date(params, "until", errors) or day
        sort = params.get("sort", "created")
        query.sort = sort if sort in SORTS else "created"
        query.order = "asc" if params.get("order") == "asc" else "desc"
        return query

    def apply(self, queryset: QuerySet[CompressionRun]) -> Any:
        runs = annotated(queryset)
        if self.status:
            runs = runs.filter(status=self.status)
        if self.trigger:
            runs = runs.filter(trigger=self.trigger)
        if self.severity == "none":
            runs = runs.filter(drift_rank__isnull=True)
        elif self.severity:
            runs = runs.filter(drift_rank=SEVERITY_RANK[self.severity])
        if self.model:
            runs = runs.filter(model=self.model)
        if self.generator:
            runs = runs.filter(generator=self.generator)
        if self.q:  # the session key as the pages show it (masked): a search never confirms a hidden key
            runs = runs.filter(key_search(self.q, prefix="session__"))
        if self.since is not None:
            runs = runs.filter(created_at__gte=self._bounds(self.since)[0])
        if self.until is not None:
            runs = runs.filter(created_at__lt=self._bounds(self.until)[1])
        sign = "-" if self.order == "desc" else ""
        nulls = {"nulls_last": True}
        key = F(SORTS[self.sort])
        return runs.order_by(key.desc(**nulls) if sign else key.asc(**nulls), f"{sign}id")

    @staticmethod
    def _bounds(day: datetime.date) -> tuple[datetime.datetime, datetime.datetime]:
        """The start and end of ``day`` in the console's time zone (as the dashboard counts days)."""
        noon = timezone.make_aware(datetime.datetime.combine(day, datetime.time(12)))
        _start, _end, start_at, end_at = period_bounds(1, noon)
        return start_at, end_at

    def params(self, **changes: str) -> str:
        values = {
            "q": self.q,
            "status": self.status,
            "trigger": self.trigger,
            "severity": self.severity,
            "model": self.model,
            "generator": self.generator,
            "since": self.since.isoformat() if self.since else "",
            "until": self.until.isoformat() if self.until else "",
            "sort": self.sort,
            "order": self.order,
        }
        values.update(changes)
        if values["sort"] == "created":
            values["sort"] = ""
        if values["order"] == "desc":
            values["order"] = ""
        return urlencode({k: v for k, v in values.items() if v})

    def columns(self) -> dict[str, dict[str, Any]]:
        """Sortable headers: the current column flips its order; another starts with the largest first."""
        flipped = "asc" if self.order == "desc" else "desc"
        return {
            name: {
                "label": label,
                "link": self.params(sort=name, order=flipped if name == self.sort else "desc"),
                "current": name == self.sort,
                "order": self.order,
            }
            for name, label in SORT_LABELS.items()
        }


def severity_of(rank: int | None) -> str:
    return next((s for s, r in SEVERITY_RANK.items() if r == rank), "")


def provenance_value(value: object) -> str:
    """A provenance field as the table shows it: JSON null (read back as "null" on some databases) is empty."""
    return "" if value is None or value == "null" else str(value)


def rows_of(runs: list[CompressionRun]) -> list[CompressionRun]:
    for run in runs:
        run.model = provenance_value(run.model)  # type: ignore[attr-defined]
        run.generator = provenance_value(run.generator)  # type: ignore[attr-defined]
        severity = severity_of(run.drift_rank)  # type: ignore[attr-defined]
        run.drift_severity = severity  # type: ignore[attr-defined]
        run.drift_label = labels.label(labels.SEVERITIES, severity) if severity else ""  # type: ignore[attr-defined]
        run.trigger_label = labels.label(labels.TRIGGERS, run.trigger)  # type: ignore[attr-defined]
    return runs


@require_GET
@permission_required(VIEW, raise_exception=True)
@vary_on_headers("HX-Request")
def runs_table(request: HttpRequest) -> HttpResponse:
    query = RunsQuery.parse(request.GET)
    page = Paginator(query.apply(CompressionRun.objects.all()), PAGE_SIZE).get_page(request.GET.get("page"))
    ctx: dict[str, Any] = {
        "query": query,
        "page": page,
        "runs": rows_of(list(page.object_list)),
        "page_params": query.params(),
        "columns": query.columns(),
        "csv_params": query.params(),
        "fragment": fragment(request),
    }
    if not ctx["fragment"]:
        ctx |= {
            "statuses": CompressionRun.Status.choices,
            "triggers": CompressionRun.Trigger.choices,
            "severities": [(s, labels.label(labels.SEVERITIES, s)) for s in SEVERITIES],
            "models": distinct_provenance("model"),
            "generators": distinct_provenance("generator"),
        }
    return render(
        request, partial(request, "console/runs_table.html", "results"), ctx, status=400 if query.errors else 200
    )


def distinct_provenance(name: str) -> list[str]:
    """The values of a run summary's provenance field, for the filter's suggestions (masked like any text)."""
    values = Summary.objects.exclude(run=None).annotate(v=KT(f"provenance__{name}")).exclude(v=None)
    found = values.order_by().values_list("v", flat=True).distinct()[:200]
    return sorted({mask_text(provenance_value(v)) for v in found} - {""})


class _Echo:
    def write(self, value: str) -> str:
        return value


CSV_HEADER = ("run", "created_at", "session", "status", "trigger", "tokens_before", "tokens_after", "drift_severity")


@require_GET
@permission_required(VIEW, raise_exception=True)
def runs_csv(request: HttpRequest) -> HttpResponseBase:
    """The table's rows as CSV (every page, up to ``CSV_ROWS``), masked like every export: keys, models and
    summarizer names as the pages show them."""
    query = RunsQuery.parse(request.GET)
    if query.errors:
        return HttpResponse("\n".join(query.errors), status=400, content_type="text/plain; charset=utf-8")
    runs = query.apply(CompressionRun.objects.all())[:CSV_ROWS]
    writer = csv.writer(_Echo())

    def lines() -> Any:
        yield "\ufeff" + writer.writerow((*CSV_HEADER, "model", "summarizer"))  # a BOM: spreadsheets read UTF-8
        for run in runs.iterator(chunk_size=2000):
            yield writer.writerow(
                (
                    run.pk,
                    timezone.localtime(run.created_at).isoformat(timespec="seconds"),
                    run.session.masked_key or run.session.key,
                    run.status,
                    run.trigger,
                    "" if run.tokens_before is None else run.tokens_before,
                    "" if run.tokens_after is None else run.tokens_after,
                    severity_of(run.drift_rank),
                    mask_text(provenance_value(run.model)),
                    mask_text(provenance_value(run.generator)),
                )
            )

    response = StreamingHttpResponse(lines(), content_type="text/csv; charset=utf-8")
    response["Content-Disposition"] = 'attachment; filename="runs.csv"'
    return response
