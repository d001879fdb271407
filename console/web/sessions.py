"""Sessions: the list (search, filters, sort), one session's live history, "Compress now" and its progress."""

from __future__ import annotations

import json
from dataclasses import dataclass, field, replace
from typing import Any

from django.contrib import messages
from django.contrib.auth.decorators import permission_required
from django.core.paginator import Paginator
from django.db.models import Count, F, Max, OuterRef, QuerySet, Subquery
from django.http import HttpRequest, HttpResponse, HttpResponseRedirect
from django.shortcuts import get_object_or_404, render
from django.urls import reverse
from django.utils.http import urlencode
from django.utils.translation import gettext as _
from django.utils.translation import gettext_lazy
from django.views.decorators.http import require_GET, require_POST
from django.views.decorators.vary import vary_on_headers
from django_htmx.http import HttpResponseStopPolling, reswap, retarget

from agent_compression import CompressionConfig
from agent_compression.summary_message import parse_summary_message

from ..display import MessageView, ToolCallView, mask_unless_revealed, message_view
from ..errors import ServiceError
from ..masking import value_for_reader
from ..models import AuditEvent, CompressionRun, DriftCase, Session, SessionEntry, Summary
from ..queries import SessionQuery, session_hits
from ..reveal import may_reveal, reveal_for, revealing
from ..services import runs as run_service
from ..services.validation import session_config
from ..templatetags.run_progress import format_seconds, run_seconds
from . import COMPRESS, VIEW, int_or_none, labels, see_other
from .forms import CompressForm
from .htmx import HtmxHttpRequest, fragment, partial
from .presenters import label_case, live_summary_ids, with_state
from .runs_table import severity_of, worst_case

PAGE_SIZE = 50
#: messages shown at once on the session page; ``?start=`` and ``?at=`` pick the window
WINDOW = 200
#: runs listed on the session page
RUNS_SHOWN = 50
#: run fields that can be megabytes (histories as key lists, per-message reports): never loaded for lists
HEAVY_RUN_FIELDS = ("input_keys", "output_keys", "pruned", "boundaries", "repair", "stages", "config")


def status_label(status: str) -> Any:
    return labels.label(labels.SESSION_STATUSES, status, status or "—")


# --------------------------------------------------------------------------- the list


SORT_LABELS = {
    "updated": gettext_lazy("Updated"),
    "key": gettext_lazy("Key"),
    "messages": gettext_lazy("Messages"),
    "tokens": gettext_lazy("Tokens"),
}


def count_by_session(rows: QuerySet[Any]) -> dict[int, int]:
    """``{session id: number of rows}`` in one grouped query."""
    return dict(rows.order_by().values("session_id").annotate(n=Count("id")).values_list("session_id", "n"))


@require_GET
@permission_required(VIEW, raise_exception=True)
@vary_on_headers("HX-Request")
def session_list(request: HttpRequest) -> HttpResponse:
    query = SessionQuery.parse(request.GET)
    sessions = query.apply(
        Session.objects.only(
            "id", "key", "channel", "status", "message_count", "token_count", "context_window_tokens", "updated_at"
        )
    )
    # the last run's status and the worst open drift case: subqueries of the page's one statement
    last_run = CompressionRun.objects.filter(session=OuterRef("pk")).order_by("-created_at", "-id")
    open_cases = DriftCase.objects.filter(session=OuterRef("pk"), status=DriftCase.Status.OPEN)
    sessions = sessions.annotate(
        last_run_status=Subquery(last_run.values("status")[:1]), open_drift_rank=worst_case(open_cases)
    )
    page = Paginator(sessions, PAGE_SIZE).get_page(request.GET.get("page"))
    rows = list(page.object_list)
    ids = [s.pk for s in rows]
    # counted for the rows shown only: one grouped query each, never over every session
    run_counts = count_by_session(CompressionRun.objects.filter(session_id__in=ids))
    drift_counts = count_by_session(DriftCase.objects.filter(session_id__in=ids, status=DriftCase.Status.OPEN))
    for s in rows:
        s.runs_count = run_counts.get(s.pk, 0)
        s.open_drift = drift_counts.get(s.pk, 0)
        s.status_label = status_label(s.status)
        s.window_used = s.token_count * 100 // max(1, s.context_window_tokens)
        s.open_severity = severity_of(s.open_drift_rank)
        s.open_severity_label = labels.label(labels.SEVERITIES, s.open_severity) if s.open_severity else ""
        s.last_run_label = labels.label(labels.RUN_STATUSES, s.last_run_status) if s.last_run_status else ""
    ctx: dict[str, Any] = {
        "query": query,
        "page": page,
        "rows": rows,
        "page_params": query.params(),
        "columns": {
            name: {"label": label, "link": query.sort_link(name), "current": name == query.sort, "order": query.order}
            for name, label in SORT_LABELS.items()
        },
        "sort_labels": SORT_LABELS,
    }
    ctx["fragment"] = fragment(request)
    if not ctx["fragment"]:
        # the filter form's choices: only the full page shows the form
        statuses = Session.objects.order_by("status").values_list("status", flat=True).distinct()
        channels = Session.objects.exclude(channel="").order_by("channel").values_list("channel", flat=True)
        ctx["statuses"] = [(value, status_label(value)) for value in statuses]
        ctx["channels"] = list(channels.distinct()[:500])
    return render(request, partial(request, "console/sessions.html", "results"), ctx)


# --------------------------------------------------------------------------- one session


@dataclass
class CallItem:
    """A tool call of an assistant message, with the results that answer it in this window."""

    call: ToolCallView
    anchor: str
    results: list[TimelineItem] = field(default_factory=list)


@dataclass
class TimelineItem:
    position: int
    view: MessageView
    calls: list[CallItem] = field(default_factory=list)
    #: for a summary message: its header id, and the stored summary (with its archive range) when there is one
    summary_id: str = ""
    summary: Any = None

    @property
    def anchor(self) -> str:
        return f"m-{self.position}"


def window_start(count: int, start: int | None, at: int | None) -> int:
    """Where the window begins: around message ``at``, at ``start``, or (by default) on the latest messages."""
    if at is not None and 0 <= at < count:
        return at - at % WINDOW
    if start is None:
        return max(0, count - WINDOW)
    return min(max(0, start), max(0, count - 1))


def timeline(session: Session, start: int) -> list[TimelineItem]:
    """The window's messages, tool results nested under the calls they answer (one query, plus one for markers)."""
    entries = (
        SessionEntry.objects.filter(session=session, position__gte=start, position__lt=start + WINDOW)
        .select_related("message")
        .order_by("position")
    )
    items: list[TimelineItem] = []
    calls: dict[str, CallItem] = {}
    markers: dict[str, list[TimelineItem]] = {}
    for entry in entries:
        data = entry.message.data
        view = message_view(entry.message_id, data, tokens=entry.message.tokens)
        item = TimelineItem(entry.position, view)
        parent = calls.get(view.tool_call_id) if view.role == "tool" and view.tool_call_id else None
        if parent is not None:
            parent.results.append(item)
            continue
        if view.tool_calls:
            item.view = replace(view, tool_calls=[])  # the calls are shown below the message, with their results
            for n, call in enumerate(view.tool_calls, 1):
                item.calls.append(CallItem(call, f"{item.anchor}-call-{n}"))
                if call.id:
                    calls[call.id] = item.calls[-1]
        if view.is_summary:
            parsed = parse_summary_message(data)
            item.summary_id = (parsed[0].get("id", "") if parsed else "")[:64]
            if item.summary_id:
                markers.setdefault(item.summary_id, []).append(item)
        items.append(item)
    if markers:
        stored = Summary.objects.filter(summary_id__in=markers).values(
            "pk", "summary_id", "status", "archive_id", "archive__start", "archive__end"
        )
        for row in stored:
            for item in markers[row["summary_id"]]:
                item.summary = row
    return items


#: drift cases listed on the session page (newest first; the drift queue filters by session for the rest)
DRIFT_CASES_SHOWN = 50
#: summary events (versions written, promotions) listed on the session page
SUMMARY_EVENTS = 50


def summary_events(session: Session) -> list[dict[str, Any]]:
    """The session's summary versions as they were written and promoted, newest first (two queries).

    Versions come from the summary rows (numbered per archive, v1 oldest, as the archive page numbers
    them); promotions from the ``summary.promote`` audit events, with who promoted and the live summary
    the promotion replaced.
    """
    rows = list(
        Summary.objects.filter(archive__session=session)
        .select_related("created_by")
        .order_by("archive_id", "created_at", "id")
        .only("pk", "summary_id", "status", "archive_id", "created_at", "created_by", "provenance")
    )
    numbers: dict[int, int] = {}
    counts: dict[int, int] = {}
    for summary in rows:
        counts[summary.archive_id] = counts.get(summary.archive_id, 0) + 1
        numbers[summary.pk] = counts[summary.archive_id]
    live = live_summary_ids(session.pk)
    for summary in rows:
        with_state(summary, live)
    by_pk = {s.pk: s for s in rows}
    by_summary_id = {s.summary_id: s for s in rows}
    events: list[dict[str, Any]] = []
    for summary in rows:
        trigger = (summary.provenance or {}).get("trigger")
        events.append(
            {
                "kind": "written",
                "when": summary.created_at,
                "summary": summary,
                "number": numbers[summary.pk],
                "actor": summary.created_by.get_username() if summary.created_by else "",
                "trigger": labels.label(labels.TRIGGERS, trigger) if trigger else "",
            }
        )
    promotions = AuditEvent.objects.filter(
        action="summary.promote", object_type="summary", object_id__in=[str(pk) for pk in by_pk]
    ).order_by("-created_at", "-id")[:SUMMARY_EVENTS]
    for event in promotions:
        promoted = by_pk.get(int(event.object_id))
        if promoted is None:
            continue
        replaced_id = (event.before or {}).get("live_summary")
        replaced = by_summary_id.get(replaced_id) if isinstance(replaced_id, str) else None
        events.append(
            {
                "kind": "promoted",
                "when": event.created_at,
                "summary": promoted,
                "number": numbers[promoted.pk],
                "actor": event.actor_label,
                "replaced": replaced,
                "replaced_number": numbers.get(replaced.pk) if replaced else None,
                "replaced_id": replaced_id if isinstance(replaced_id, str) else "",
            }
        )
    events.sort(key=lambda e: e["when"], reverse=True)
    return events[:SUMMARY_EVENTS]


def metadata_value(value: Any) -> str:
    """A metadata value as the session page shows it: text as it is, true/false in words, empty as "—"."""
    if value is None or value == "" or value == [] or value == {}:
        return labels.EMPTY
    if isinstance(value, bool):
        return str(_("yes") if value else _("no"))
    return mask_unless_revealed(value if isinstance(value, str) else json.dumps(value, ensure_ascii=False))[:200]


def _header(session: Session) -> dict[str, Any]:
    try:
        config = session_config(session)
    except ServiceError:  # a stored window the library refuses: show the defaults' trigger
        config = CompressionConfig()
    used = session.token_count * 100 / max(1, session.context_window_tokens)
    # masked as a whole, so a value is masked by the secret-named key it sits under, at any depth
    shown = value_for_reader({k: v for k, v in list((session.metadata or {}).items())[:13] if k != "channel"})
    metadata = [
        (labels.label(labels.METADATA_KEYS, str(k)[:60]), metadata_value(v)) for k, v in list(shown.items())[:12]
    ]
    return {
        "session": session,
        "status_label": status_label(session.status),
        "window_used": round(used, 1),
        "bar_width": min(100, round(used)),
        "trigger_percent": round(config.trigger_ratio * 100),
        "max_ineffective": config.max_ineffective_compressions,
        "metadata": metadata,
        "proxy": _proxy_stats(session),
    }


def _proxy_stats(session: Session) -> dict[str, Any] | None:
    """Calls relayed by ``/proxy/v1`` for this session (None: not a proxied session)."""
    if not (session.metadata or {}).get("proxied"):
        return None
    calls = session.proxy_calls.aggregate(count=Count("id"), last=Max("created_at"))
    return {"calls": calls["count"] or 0, "last": calls["last"]}


def _runs_context(session: Session) -> dict[str, Any]:
    rows = list(
        session.runs.defer(*HEAVY_RUN_FIELDS)
        .select_related("created_by")
        .annotate(archive_pk=F("archive__id"), archive_start=F("archive__start"), archive_end=F("archive__end"))
        .order_by("-created_at", "-id")[:RUNS_SHOWN]
    )
    for run in rows:
        run.duration = format_seconds(run_seconds(run))  # type: ignore[attr-defined]
        start, end = run.archive_start, run.archive_end
        run.archived = end - start if start is not None and end is not None else None  # type: ignore[attr-defined]
    # the run a compress request would be given: the oldest one in flight
    active = next((r for r in reversed(rows) if not r.finished), None)
    return {"runs": rows, "active_run": active, "runs_total": len(rows)}


def _session_context(request: HttpRequest, session: Session, *, start: int, form: Any = None) -> Any:
    items = timeline(session, start)
    reveal = revealing()
    end = min(start + WINDOW, session.message_count)
    ctx = {
        "reveal": reveal,
        "items": items,
        "start": start,
        "end": end,
        "prev_start": max(0, start - WINDOW) if start > 0 else None,
        "next_start": start + WINDOW if start + WINDOW < session.message_count else None,
        "window": WINDOW,
        "reveal_param": "&reveal=1" if reveal else "",
        "may_reveal": may_reveal(request.user),
    }
    ctx.update(_header(session))
    if fragment(request):
        return ctx  # a window of the timeline: nothing else is rendered
    ctx.update(search_context(request, session))
    ctx.update(_runs_context(session))
    ctx["summary_events"] = summary_events(session)
    cases = session.drift_cases.select_related("summary", "assignee").order_by("-created_at", "-id")
    ctx["drift_cases"] = [label_case(c) for c in cases[:DRIFT_CASES_SHOWN]]
    if request.user.has_perm(COMPRESS):
        ctx["form"] = form or CompressForm(session=session)
    return ctx


#: search results listed on the session and archive pages
SEARCH_HITS = 100
#: the longest search the pages accept (longer is cut)
SEARCH_CHARS = 200


def search_needle(request: HttpRequest) -> str:
    return (request.GET.get("q") or "").strip()[:SEARCH_CHARS]


def marked(snippet: str, needle: str) -> dict[str, str]:
    """A search snippet cut around its first match, for ``before<mark>match</mark>after`` (escaped as usual)."""
    at = snippet.lower().find(needle.lower())
    if at < 0:
        return {"before": snippet, "match": "", "after": ""}
    return {"before": snippet[:at], "match": snippet[at : at + len(needle)], "after": snippet[at + len(needle) :]}


def search_context(request: HttpRequest, session: Session) -> dict[str, Any]:
    """``?q=``: the messages of the live history that contain it (masked text, as the sessions list searches)."""
    needle = search_needle(request)
    if not needle:
        return {"q": ""}
    hits, more = session_hits(session, needle, SEARCH_HITS)
    base = reverse("session", args=[session.pk])
    reveal = {"reveal": "1"} if request.GET.get("reveal") else {}
    for hit in hits:
        n = hit["position"]
        hit |= {"number": n, "href": f"{base}?{urlencode({'at': n, 'q': needle} | reveal)}#m-{n}"}
        hit["parts"] = marked(hit["snippet"], needle)
    return {"q": needle, "hits": hits, "more_hits": more}


@require_GET
@permission_required(VIEW, raise_exception=True)
@vary_on_headers("HX-Request")
def session_detail(request: HtmxHttpRequest, pk: int) -> HttpResponse:
    session = get_object_or_404(Session, pk=pk)
    reveal_for(request, session)
    at = int_or_none(request.GET.get("at"))
    start = window_start(session.message_count, int_or_none(request.GET.get("start")), at)
    if at is not None and not request.htmx and 0 <= at < session.message_count:
        # a deep link: open the window holding the message and scroll to it (the browser keeps the #fragment)
        params = request.GET.copy()
        params.pop("at")
        params["start"] = str(start)
        return HttpResponseRedirect(f"{request.path}?{params.urlencode()}#m-{at}")
    ctx = _session_context(request, session, start=start)
    return render(request, partial(request, "console/session.html", "timeline"), ctx)


@require_POST
@permission_required(COMPRESS, raise_exception=True)
def compress(request: HtmxHttpRequest, pk: int) -> HttpResponse:
    session = get_object_or_404(Session, pk=pk)
    form = CompressForm(request.POST, session=session)
    if form.is_valid():
        try:
            run, created = run_service.request_compression(
                session.key,
                user=request.user,
                trigger=CompressionRun.Trigger.MANUAL,
                focus_topic=form.cleaned_data["focus_topic"],
                config=form.overrides() or None,
            )
        except ServiceError as exc:
            form.add_error(None, str(exc))
    if not form.is_valid():
        if request.htmx:
            ctx = {"form": form, "session": session}
            response = render(request, "console/session.html#compress_form", ctx, status=422)
            return reswap(retarget(response, "#compress-form"), "outerHTML")
        start = window_start(session.message_count, None, None)
        ctx = _session_context(request, session, start=start, form=form)
        return render(request, "console/session.html", ctx, status=422)
    if request.htmx:
        ctx = {
            "run": run,
            "created": created,
            "from_session": True,
            "session": session,
            "form": CompressForm(session=session),
        }
        return render(request, "console/session.html#compress_started", ctx)
    if not created:
        messages.info(request, _("A compression of this session was already queued or running; this is its page."))
    return see_other(reverse("run", args=[run.pk]))


@require_GET
@permission_required(VIEW, raise_exception=True)
def run_progress(request: HttpRequest, pk: int) -> HttpResponse:
    run = get_object_or_404(CompressionRun.objects.defer(*HEAVY_RUN_FIELDS), pk=pk)
    from_session = request.GET.get("from") == "session"
    ctx: dict[str, Any] = {"run": run, "from_session": from_session, "polled": True}
    if run.finished and from_session:
        # refresh the session page's run list and header counts too (out of band)
        session = Session.objects.get(pk=run.session_id)
        ctx.update(_header(session))
        ctx.update(_runs_context(session))
        ctx["oob"] = True
    # 286 stops htmx polling: the fragment now shows the outcome
    status = HttpResponseStopPolling.status_code if run.finished else 200
    return render(request, "console/_run_progress.html", ctx, status=status)
