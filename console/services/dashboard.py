"""The quality dashboard's numbers for a period: six queries whatever the number of rows.

Grouped in the database where SQL can do it portably and counted in Python where it cannot (JSON
lists). The charts' geometry (``console.web.charts``) draws them.
"""

from __future__ import annotations

import math
from collections import Counter
from dataclasses import dataclass, field
from datetime import date, datetime, time, timedelta
from typing import Any

from django.conf import settings
from django.db.models import Count, F, FloatField, Q, Sum, TextField
from django.db.models.functions import Cast, Substr, TruncDate
from django.utils import timezone

from agent_compression.types import DRIFT_KINDS

from ..models import CompressionRun, DriftCase, Summary

PERIODS = (7, 30, 90)
DEFAULT_DAYS = 30
PROBLEM_RUNS_SHOWN = 20
REPEAT_SESSIONS_SHOWN = 50
#: the anti-thrash warnings of compression/agent_compression/pipeline.py
REPEAT_CODES = ("repeated_compression", "auto_compression_stopped")

RunStatus = CompressionRun.Status
CaseStatus = DriftCase.Status
#: the outcomes the charts show, in stacking order: compressions ("nothing to compress" is not one)
RUN_STATUSES = (RunStatus.SUCCEEDED, RunStatus.DEGRADED, RunStatus.FAILED, RunStatus.CONFLICT)
PROBLEM_STATUSES = (RunStatus.DEGRADED, RunStatus.FAILED)
CASE_STATUSES = (CaseStatus.OPEN, CaseStatus.CONFIRMED, CaseStatus.DISMISSED, CaseStatus.RESOLVED)
#: a resolved case was confirmed first (DriftCase.TRANSITIONS), so it counts as confirmed
CONFIRMED_STATUSES = (CaseStatus.CONFIRMED, CaseStatus.RESOLVED)


def parse_days(value: str | None) -> int:
    """The period asked for (``?days=``), or the default for anything but 7, 30 or 90."""
    try:
        days = int(value or "")
    except ValueError:
        return DEFAULT_DAYS
    return days if days in PERIODS else DEFAULT_DAYS


# --------------------------------------------------------------------------- metrics


@dataclass
class Day:
    date: date
    runs: dict[str, int] = field(default_factory=dict)
    saved: int = 0

    @property
    def total(self) -> int:
        return sum(self.runs.values())


@dataclass
class ProblemRun:
    pk: int
    session_id: int
    session_key: str
    status: str
    created_at: datetime
    #: the first warning's code (degraded) or "" (failed)
    code: str
    #: the first warning's message, or the error's first line
    detail: str

    @property
    def status_label(self) -> str:
        return str(RunStatus(self.status).label)


@dataclass
class RepeatedSession:
    pk: int
    key: str
    runs: int
    last_at: datetime
    #: one of its runs turned automatic compression off
    stopped: bool


@dataclass
class KindCount:
    kind: str
    findings: int = 0
    cases: dict[str, int] = field(default_factory=dict)

    @property
    def cases_total(self) -> int:
        return sum(self.cases.values())


@dataclass
class ModelRow:
    generator: str | None
    model: str | None
    prompt_version: str | None
    summaries: int = 0
    failed: int = 0
    findings: int = 0
    cases_opened: int = 0
    cases_confirmed: int = 0

    @property
    def findings_per_summary(self) -> float | None:
        """Findings per summary that did not fail (a failed summary has no text to check)."""
        usable = self.summaries - self.failed
        return self.findings / usable if usable else None


@dataclass
class Metrics:
    days: int
    start: date
    end: date
    by_day: list[Day]
    status_totals: dict[str, int]
    #: runs of the period still queued or running (not in the charts)
    in_progress: int
    #: runs that left the history as it was, nothing to compress (not compressions: not in the charts)
    nothing_to_compress: int
    saved_total: int
    #: applied runs with token counts: what the mean ratio averages over
    ratio_runs: int
    #: mean of tokens after ÷ tokens before over applied runs
    mean_ratio: float | None
    problems: list[ProblemRun]
    repeated_runs: int
    repeated_codes: dict[str, int]
    repeated_sessions: list[RepeatedSession]
    repeated_sessions_total: int
    kinds: list[KindCount]
    findings_total: int
    cases_total: int
    cases_by_severity: dict[str, int]
    models: list[ModelRow]

    @property
    def runs_total(self) -> int:
        return sum(self.status_totals.values())

    @property
    def problems_total(self) -> int:
        return sum(self.status_totals.get(s, 0) for s in PROBLEM_STATUSES)

    @property
    def mean_percent(self) -> int | None:
        """The mean ratio as a whole percentage: what is left of a history after compression."""
        return None if self.mean_ratio is None else round(self.mean_ratio * 100)


def period_bounds(days: int, now: datetime | None = None) -> tuple[date, date, datetime, datetime]:
    """The period's first and last local days, and the instants it starts and ends (exclusive)."""
    tz = timezone.get_current_timezone()
    end = timezone.localdate(now or timezone.now(), tz)
    start = end - timedelta(days=days - 1)
    start_at = timezone.make_aware(datetime.combine(start, time.min), tz)
    end_at = timezone.make_aware(datetime.combine(end + timedelta(days=1), time.min), tz)
    return start, end, start_at, end_at


def dashboard_metrics(days: int, now: datetime | None = None) -> Metrics:
    """Every number of the dashboard for the last ``days`` local days (today included)."""
    start, end, start_at, end_at = period_bounds(days, now)
    runs = CompressionRun.objects.filter(created_at__gte=start_at, created_at__lt=end_at).order_by()
    by_day = {start + timedelta(days=i): Day(start + timedelta(days=i)) for i in range(days)}
    totals: Counter[str] = Counter()
    ratio_sum, ratio_runs = 0.0, 0
    for row in _runs_per_day(runs):
        totals[row["status"]] += row["n"]
        day = by_day.get(row["day"])
        if day is not None and row["status"] in RUN_STATUSES:
            day.runs[row["status"]] = row["n"]
        if day is not None:
            day.saved += row["saved"] or 0
        ratio_sum += row["ratio_sum"] or 0.0
        ratio_runs += row["ratio_n"]
    repeated = _repeated(runs)
    kinds, findings_total, models = _summaries(start_at, end_at)
    cases_total, severity = _cases(start_at, end_at, kinds)
    return Metrics(
        days=days,
        start=start,
        end=end,
        by_day=list(by_day.values()),
        status_totals={s: totals[s] for s in RUN_STATUSES},
        in_progress=sum(totals[s] for s in CompressionRun.ACTIVE),
        nothing_to_compress=totals[RunStatus.NOTHING],
        saved_total=sum(d.saved for d in by_day.values()),
        ratio_runs=ratio_runs,
        mean_ratio=ratio_sum / ratio_runs if ratio_runs else None,
        problems=_problems(runs),
        repeated_runs=repeated[0],
        repeated_codes=repeated[1],
        repeated_sessions=repeated[2][:REPEAT_SESSIONS_SHOWN],
        repeated_sessions_total=len(repeated[2]),
        kinds=sorted(kinds.values(), key=_kind_order),
        findings_total=findings_total,
        cases_total=cases_total,
        cases_by_severity=severity,
        models=sorted(models.values(), key=lambda m: (-m.summaries, str(m.generator), str(m.model))),
    )


def _runs_per_day(runs: Any) -> Any:
    """Runs, tokens saved and the ratio's sum per local day and status: one grouped query."""
    applied = Q(applied=True, tokens_before__isnull=False, tokens_after__isnull=False)
    ratio = Q(applied, tokens_before__gt=0)
    return (
        runs.annotate(day=TruncDate("created_at", tzinfo=timezone.get_current_timezone()))
        .values("day", "status")
        .annotate(
            n=Count("id"),
            saved=Sum(F("tokens_before") - F("tokens_after"), filter=applied),
            ratio_sum=Sum(Cast("tokens_after", FloatField()) / Cast("tokens_before", FloatField()), filter=ratio),
            ratio_n=Count("id", filter=ratio),
        )
    )


def _problems(runs: Any) -> list[ProblemRun]:
    rows = (
        runs.filter(status__in=PROBLEM_STATUSES)
        .annotate(error_head=Substr("error", 1, 500))  # a traceback can be long; its first line is shown
        .order_by("-created_at", "-id")
        .values("pk", "session_id", "session__key", "status", "created_at", "warnings", "error_head")
    )
    out = []
    for row in rows[:PROBLEM_RUNS_SHOWN]:
        warning = next((w for w in row["warnings"] or [] if isinstance(w, dict)), None)
        error = (row["error_head"] or "").strip().split("\n", 1)[0]
        code, detail = "", error
        if warning and not (error and row["status"] == RunStatus.FAILED):
            code, detail = str(warning.get("code") or ""), str(warning.get("message") or "")
        out.append(
            ProblemRun(
                row["pk"], row["session_id"], row["session__key"], row["status"], row["created_at"], code, detail
            )
        )
    return out


def _repeated(runs: Any) -> tuple[int, dict[str, int], list[RepeatedSession]]:
    """Runs with an anti-thrash warning, and their sessions (latest first).

    ``warnings`` is a JSON list, and JSON containment is not portable (SQLite has none), so the
    database narrows to runs whose JSON text mentions a code and Python checks the codes.
    """
    text = runs.annotate(warnings_text=Cast("warnings", TextField()))
    mentions = Q()
    for code in REPEAT_CODES:
        mentions |= Q(warnings_text__contains=code)
    rows = text.filter(mentions).values_list("session_id", "session__key", "created_at", "warnings")
    count, codes, sessions = 0, Counter[str](), dict[int, RepeatedSession]()
    for session_id, key, created_at, warnings in rows:
        found = {str(w.get("code")) for w in warnings or [] if isinstance(w, dict)} & set(REPEAT_CODES)
        if not found:
            continue
        count += 1
        codes.update(found)
        entry = sessions.setdefault(session_id, RepeatedSession(session_id, key, 0, created_at, False))
        entry.runs += 1
        entry.last_at = max(entry.last_at, created_at)
        entry.stopped = entry.stopped or "auto_compression_stopped" in found
    ordered = sorted(sessions.values(), key=lambda s: (s.last_at, s.pk), reverse=True)
    return count, {c: codes[c] for c in REPEAT_CODES}, ordered


def _summaries(start_at: datetime, end_at: datetime) -> tuple[dict[str, KindCount], int, dict[Any, ModelRow]]:
    """Findings per kind, and per summarizer (generator, model, prompt version): two queries."""
    rows = Summary.objects.filter(created_at__gte=start_at, created_at__lt=end_at).values_list(
        "pk",
        "provenance__generator",
        "provenance__model",
        "provenance__prompt_version",
        "status",
        "drift_findings",
    )
    kinds = {kind: KindCount(kind) for kind in DRIFT_KINDS}  # every kind has a row, zero or not
    models: dict[Any, ModelRow] = {}
    group_of: dict[int, ModelRow] = {}
    total = 0
    for pk, generator, model, prompt_version, status, findings in rows.order_by():
        key = (_text(generator), _text(model), _text(prompt_version))
        group = models.setdefault(key, ModelRow(*key))
        group_of[pk] = group
        group.summaries += 1
        group.failed += status == Summary.Status.FAILED
        for finding in findings if isinstance(findings, list) else []:
            kind = str(finding.get("kind") or "") if isinstance(finding, dict) else ""
            kinds.setdefault(kind, KindCount(kind)).findings += 1
            group.findings += 1
            total += 1
    cases = (
        DriftCase.objects.filter(summary__created_at__gte=start_at, summary__created_at__lt=end_at)
        .order_by()
        .values("summary_id")
        .annotate(opened=Count("id"), confirmed=Count("id", filter=Q(status__in=CONFIRMED_STATUSES)))
    )
    for row in cases:
        of = group_of.get(row["summary_id"])
        if of is not None:  # always, unless the summary was written between the two queries
            of.cases_opened += row["opened"]
            of.cases_confirmed += row["confirmed"]
    return kinds, total, models


def _cases(start_at: datetime, end_at: datetime, kinds: dict[str, KindCount]) -> tuple[int, dict[str, int]]:
    """Cases opened in the period, per kind and status (a case of several kinds counts under each)."""
    rows = (
        DriftCase.objects.filter(created_at__gte=start_at, created_at__lt=end_at)
        .order_by()
        .values("kinds", "status", "severity")
        .annotate(n=Count("id"))
    )
    total, severity = 0, Counter[str]()
    for row in rows:
        total += row["n"]
        severity[row["severity"]] += row["n"]
        for kind in [k for k in row["kinds"].split(",") if k] or [""]:
            entry = kinds.setdefault(kind, KindCount(kind))
            entry.cases[row["status"]] = entry.cases.get(row["status"], 0) + row["n"]
    return total, dict(severity)


def _text(value: Any) -> str | None:
    return None if value is None or value == "" else str(value)


def _kind_order(entry: KindCount) -> tuple[int, str]:
    known = entry.kind in DRIFT_KINDS
    return (DRIFT_KINDS.index(entry.kind) if known else len(DRIFT_KINDS) + (entry.kind == ""), entry.kind)


# --------------------------------------------------------------------------- summarizer calls: cost and latency

#: the offline summarizer: no call to price
FREE_GENERATORS = ("extractive",)


@dataclass
class CallRow:
    """The summarizer calls of one (generator, model) in the period: tokens, cost and latency."""

    generator: str | None
    model: str | None
    calls: int = 0
    input_tokens: int = 0
    output_tokens: int = 0
    #: None when the model has no price (SUMMARIZER_PRICES) and is not free
    cost: float | None = 0.0
    latencies: list[float] = field(default_factory=list)

    @property
    def p50_ms(self) -> float | None:
        return percentile(self.latencies, 50)

    @property
    def p95_ms(self) -> float | None:
        return percentile(self.latencies, 95)

    @property
    def priced(self) -> bool:
        return self.cost is not None


@dataclass
class Calls:
    rows: list[CallRow]
    #: cost per day of the period, aligned with ``Metrics.by_day``
    cost_by_day: list[float]
    cost_total: float
    #: calls of a model without a price: not in the costs
    unpriced_calls: int
    currency: str


def percentile(values: list[float], pct: float) -> float | None:
    """The nearest-rank percentile (p50, p95) of ``values``; None for none."""
    if not values:
        return None
    ordered = sorted(values)
    rank = max(1, math.ceil(pct / 100 * len(ordered)))
    return ordered[rank - 1]


def call_cost(generator: str | None, model: str | None, tokens_in: int, tokens_out: int, prices: Any) -> float | None:
    """What one call cost: its tokens at the model's price per 1,000; 0 for the extractive summarizer."""
    if generator in FREE_GENERATORS:
        return 0.0
    price = prices.get(model or "") if model else None
    if price is None:
        return None
    return (tokens_in * price.get("input", 0.0) + tokens_out * price.get("output", 0.0)) / 1000


def summarizer_calls(days: int, now: datetime | None = None, prices: Any = None) -> Calls:
    """Cost per day and per model, and latency per model, of the summaries written in the period (one query)."""
    prices = settings.SUMMARIZER_PRICES if prices is None else prices
    start, _end, start_at, end_at = period_bounds(days, now)
    tz = timezone.get_current_timezone()
    rows = (
        Summary.objects.filter(created_at__gte=start_at, created_at__lt=end_at)
        .exclude(status=Summary.Status.PENDING)  # not called yet; a failed call is counted (it may have cost)
        .order_by()
        .values_list(
            "created_at",
            "provenance__generator",
            "provenance__model",
            "provenance__input_tokens",
            "provenance__output_tokens",
            "provenance__latency_ms",
        )
    )
    groups: dict[tuple[str | None, str | None], CallRow] = {}
    by_day = [0.0] * days
    unpriced = 0
    for created_at, generator, model, tokens_in, tokens_out, latency in rows:
        key = (_text(generator), _text(model))
        row = groups.setdefault(key, CallRow(*key))
        tokens_in, tokens_out = _count(tokens_in), _count(tokens_out)
        row.calls += 1
        row.input_tokens += tokens_in
        row.output_tokens += tokens_out
        if isinstance(latency, int | float) and not isinstance(latency, bool):
            row.latencies.append(float(latency))
        cost = call_cost(key[0], key[1], tokens_in, tokens_out, prices)
        if cost is None:
            row.cost, unpriced = None, unpriced + 1
            continue
        if row.cost is not None:
            row.cost += cost
        index = (timezone.localtime(created_at, tz).date() - start).days
        if 0 <= index < days:
            by_day[index] += cost
    ordered = sorted(groups.values(), key=lambda r: (-r.calls, str(r.generator), str(r.model)))
    return Calls(ordered, by_day, sum(by_day), unpriced, settings.SUMMARIZER_PRICE_CURRENCY)


def _count(value: Any) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) and value > 0 else 0
