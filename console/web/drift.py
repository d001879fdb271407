"""Drift review: the queue of cases, one case (evidence side by side, review, comments, the fix), opening a case
by hand from a summary, and the confirmed cases as a JSONL regression set."""

from __future__ import annotations

import json
import re
from typing import Any

from django.contrib import messages
from django.contrib.auth.decorators import permission_required
from django.core.paginator import Paginator
from django.db.models import Count
from django.http import HttpRequest, HttpResponse, QueryDict, StreamingHttpResponse
from django.shortcuts import get_object_or_404, render
from django.urls import reverse
from django.utils.translation import gettext as _
from django.utils.translation import ngettext
from django.views.decorators.http import require_GET, require_POST
from django.views.decorators.vary import vary_on_headers
from django_htmx.http import HttpResponseClientRedirect, trigger_client_event

from agent_compression.messages import content_text

from .. import audit
from ..display import mask_unless_revealed
from ..errors import ServiceError
from ..models import CompressionRun, DriftCase, Summary
from ..queries import CaseQuery
from ..roles import reviewers
from ..services import drift, regression
from . import OPEN_CASE, REVIEW, VIEW, labels, load_messages, reveal_context, see_other
from .claims import case_lines, verdict_counts
from .forms import BulkForm, CommentForm, OpenCaseForm, ResummarizeForm, ReviewForm
from .htmx import CASE_CHANGED, HtmxHttpRequest, fragment, partial, region
from .labels import FINDING_KINDS, SEVERITIES
from .presenters import finding_row, label_case, provenance, summary_html

PAGE_SIZE = 50
#: characters of context shown either side of a quoted passage
CONTEXT = 220
LIST_MARKER = re.compile(r"^\s*(?:[-*+]|\d+[.)])\s+")
#: the review form offers the next statuses in this order (reopening last)
STATUS_ORDER = ("confirmed", "dismissed", "resolved", "open")


# --------------------------------------------------------------------------- the queue


@require_GET
@permission_required(VIEW, raise_exception=True)
@vary_on_headers("HX-Request")
def queue(request: HttpRequest) -> HttpResponse:
    query = CaseQuery.parse(request.GET)
    cases = query.apply(DriftCase.objects.select_related("session", "assignee").defer("findings"), request.user)
    page = Paginator(cases.annotate(comment_count=Count("comments")), PAGE_SIZE).get_page(request.GET.get("page"))
    ctx: dict[str, Any] = {
        "query": query,
        "page": page,
        "rows": [label_case(c) for c in page.object_list],
        "page_params": query.params(),
        "fragment": fragment(request),
        "statuses": DriftCase.Status.choices,
        "severities": SEVERITIES,
        "kinds": FINDING_KINDS,
        "reviewers": list(reviewers().values_list("username", flat=True)[:500]),
        "bulk_form": BulkForm(),
    }
    return render(request, partial(request, "console/drift_queue.html", "results"), ctx)


@require_POST
@permission_required(REVIEW, raise_exception=True)
def bulk(request: HtmxHttpRequest) -> HttpResponse:
    """Claim, assign or dismiss the ticked cases of the queue: all of them or none, one audit event per case."""
    form = BulkForm(request.POST)
    ids = BulkForm.case_ids(request.POST)
    back = reverse("drift_queue") + (f"?{request.POST['queue']}" if request.POST.get("queue") else "")
    if not form.is_valid():
        messages.error(request, _("Pick what to do with the selected cases."))
        return see_other(back)
    data = form.cleaned_data
    try:
        changed = drift.bulk_update(
            ids, data["action"], request.user, assignee=data["assignee"], verdict=data["verdict"]
        )
    except ServiceError as exc:
        messages.error(request, str(exc))
    else:
        messages.success(request, bulk_done(data["action"], len(changed), len(ids)))
    return HttpResponseClientRedirect(back) if request.htmx else see_other(back)


def bulk_done(action: str, changed: int, selected: int) -> str:
    if action == "claim":
        text = ngettext("Claimed %(n)d case.", "Claimed %(n)d cases.", changed)
    elif action == "assign":
        text = ngettext("Assigned %(n)d case.", "Assigned %(n)d cases.", changed)
    else:
        text = ngettext("Dismissed %(n)d case.", "Dismissed %(n)d cases.", changed)
    text %= {"n": changed}
    if changed < selected:
        text += " " + ngettext(
            "%(n)d was already so and was left alone.", "%(n)d were already so and were left alone.", selected - changed
        ) % {"n": selected - changed}
    return text


@require_GET
@permission_required(VIEW, raise_exception=True)
def export(request: HttpRequest) -> StreamingHttpResponse:
    """Confirmed and resolved cases as JSONL (secrets masked): the regression set ``replay_drift_cases`` reads."""
    records = regression.export_cases(regression.exportable_cases())
    lines = (json.dumps(record, ensure_ascii=False) + "\n" for record in records)
    response = StreamingHttpResponse(lines, content_type="application/jsonl; charset=utf-8")
    response["Content-Disposition"] = 'attachment; filename="drift-regression-set.jsonl"'
    return response


# --------------------------------------------------------------------------- one case


def passage(text: str, quote: str) -> dict[str, str] | None:
    """``quote`` inside ``text`` with the rest of its line(s) around it (at most ``CONTEXT`` characters a side)."""
    at = text.find(quote) if quote else -1
    if at < 0:
        return None
    end_of_quote = at + len(quote)
    start = max(text.rfind("\n", 0, at) + 1, at - CONTEXT)
    line_end = text.find("\n", end_of_quote)
    end = min(len(text) if line_end < 0 else line_end, end_of_quote + CONTEXT)
    before = text[start:at]
    if not start or text[start - 1] == "\n":
        before = LIST_MARKER.sub("", before)  # the line's own Markdown bullet is not part of what it says
    return {
        "before": ("…" if start and text[start - 1] != "\n" else "") + before,
        "match": quote,
        "after": text[end_of_quote:end] + ("…" if end < len(text) and text[end] != "\n" else ""),
    }


def source_texts(case: DriftCase) -> dict[int, dict[str, Any]]:
    """The messages the findings quote, by index in the run input: ``{index: {"text", "role"}}`` (one query)."""
    archive = case.summary.archive
    wanted = {f.get("message_index") for f in case.findings} - {None}
    inside = {i for i in wanted if isinstance(i, int) and archive.start <= i < archive.end}
    keys = {i: archive.message_keys[i - archive.start] for i in inside}
    outside = {i for i in wanted if isinstance(i, int) and i >= 0} - inside
    if outside and archive.run_id is not None:  # the run's whole input, only when a finding points outside
        history = CompressionRun.objects.values_list("input_keys", flat=True).get(pk=archive.run_id)
        keys |= {i: history[i] for i in outside if i < len(history)}
    rows = load_messages(keys.values())
    out = {}
    for index, key in keys.items():
        if key in rows:
            data = rows[key][0]
            out[index] = {"text": mask_unless_revealed(content_text(data)), "role": str(data.get("role", ""))}
    return out


def evidence(case: DriftCase) -> list[dict[str, Any]]:
    """Each finding as a pair: the archive's passage (with its message) and the summary's."""
    sources = source_texts(case)
    summary_text = mask_unless_revealed(case.summary.text)
    pairs = []
    for finding in case.findings:
        row = finding_row(finding, case.summary.archive)
        index = row["index"]
        source = sources.get(index) if isinstance(index, int) else None
        row |= {
            "role": source["role"] if source else "",
            "original_passage": passage(source["text"], row["original"]) if source else None,
            "summary_passage": passage(summary_text, row["summary"]),
        }
        pairs.append(row)
    return pairs


def _value(name: str, state: dict[str, Any]) -> Any:
    value = state.get(name)
    return labels.label(labels.CASE_STATUSES, str(value), value) if name == "status" else value


def history_rows(case: DriftCase) -> list[dict[str, Any]]:
    rows = []
    for event in audit.history(case):
        before, after = event.before or {}, event.after or {}
        changes = [
            {
                "field": labels.label(labels.CASE_FIELDS, name),
                "before": _value(name, before),
                "after": _value(name, after),
            }
            for name in labels.CASE_FIELDS
            if name in after and before.get(name) != after.get(name)
        ]
        rows.append({"event": event, "label": labels.label(labels.CASE_ACTIONS, event.action), "changes": changes})
    return rows


def get_case(pk: int) -> DriftCase:
    """A case with what its page shows; the archive's key list (long) loads only when the evidence needs it."""
    cases = DriftCase.objects.select_related("session", "assignee", "opened_by", "fixed_by", "summary__archive")
    return get_object_or_404(cases.defer("summary__archive__message_keys"), pk=pk)


def queue_of(params: QueryDict) -> CaseQuery:
    """The queue filter a case page was opened from (the queue's links carry it)."""
    return CaseQuery.parse(params)


def next_context(case: DriftCase, queue: CaseQuery, user: Any) -> dict[str, Any]:
    """The next open case in the queue's filter, and that filter as a query string for the links."""
    candidates = queue.apply(DriftCase.objects.all(), user)
    return {"next_case": drift.next_open_case(case, candidates), "queue_params": queue.params()}


def case_url(pk: int, queue_params: str) -> str:
    return reverse("drift_case", args=[pk]) + (f"?{queue_params}" if queue_params else "")


def review_context(case: DriftCase, **extra: Any) -> dict[str, Any]:
    """The review panel: status, holder, verdict and the history of every change."""
    return {
        "case": label_case(case),
        # the box starts empty (the verdict is shown above it, masked): an empty box with the status kept erases nothing
        "review_form": extra.pop("review_form", None) or ReviewForm(initial={"status": case.status}),
        # the current status first (a Save keeps it), then where it can go; reopening is a button of its own
        "next_statuses": [case.status]
        + [s for s in STATUS_ORDER if s in DriftCase.TRANSITIONS[case.status] and s != DriftCase.Status.OPEN],
        "may_reopen": DriftCase.Status.OPEN in DriftCase.TRANSITIONS[case.status],
        "reviewers": list(reviewers().values_list("username", flat=True)[:500]),
        "history": history_rows(case),
        **extra,
    }


def what_changed(before: DriftCase, after: DriftCase) -> str:
    """The flash after a claim, an assignment or a Save: what the request did, in words."""
    said = []
    if after.status != before.status:
        said.append(
            _("Reopened.")
            if after.status == DriftCase.Status.OPEN
            else _("Status changed to %(status)s.") % {"status": after.get_status_display()}
        )
    if after.assignee_id != before.assignee_id:
        said.append(
            _("Assigned to %(who)s.") % {"who": after.assignee.get_username()} if after.assignee else _("Unassigned.")
        )
    if after.verdict != before.verdict and after.status == before.status:
        said.append(_("Verdict saved."))
    return " ".join(said) or _("Nothing changed.")


def comments_context(case: DriftCase, **extra: Any) -> dict[str, Any]:
    comments = case.comments.select_related("author").prefetch_related("mentions")
    return {"case": case, "comments": list(comments), "comment_form": CommentForm(), **extra}


def fix_context(case: DriftCase) -> dict[str, Any]:
    """The fix in place: the archive's other versions (with their drift state) and a re-summarize form."""
    archive = case.summary.archive
    versions = list(archive.summaries.exclude(pk=case.summary_id).order_by("-created_at", "-id")[:10])
    for v in versions:
        v.serious = drift.serious(v.drift_findings or [])  # type: ignore[attr-defined]
    #: poll while a version is being written or checked, so its drift state shows up by itself
    waiting = any(v.status == Summary.Status.PENDING or (v.text and not v.drift_checked_at) for v in versions)
    return {"case": case, "archive": archive, "versions": versions, "form": ResummarizeForm(), "waiting": waiting}


#: htmx requests for one region of the case page get that region (by HX-Target)
CASE_PARTIALS = {"case-review": "review", "case-comments": "comments", "case-fix": "fix"}


@require_GET
@permission_required(VIEW, raise_exception=True)
@vary_on_headers("HX-Request", "HX-Target")
def case_detail(request: HtmxHttpRequest, pk: int) -> HttpResponse:
    case = get_case(pk)
    ctx: dict[str, Any] = {"case": label_case(case), **reveal_context(request, case)}
    name = region(request, CASE_PARTIALS)
    ctx |= next_context(case, queue_of(request.GET), request.user)
    if name in ("", "review"):
        ctx |= review_context(case)
    if name in ("", "comments"):
        ctx |= comments_context(case)
    if name in ("", "fix"):
        ctx |= fix_context(case)
    if not name:
        summary = case.summary
        ctx |= {
            "summary": summary,
            "archive": summary.archive,
            "pairs": evidence(case),
            "html": summary_html(summary),
            "prov": provenance(summary),
            "claim_lines": case_lines(summary, case.findings or []),
        }
        ctx["claim_counts"] = verdict_counts(ctx["claim_lines"])
    return render(request, f"console/drift_case.html#{name}" if name else "console/drift_case.html", ctx)


def _answer(request: HtmxHttpRequest, case: DriftCase, template: str, ctx: dict[str, Any], status: int) -> HttpResponse:
    """After a POST: the changed region for htmx, else back to the case page (errors as a flash message)."""
    if request.htmx:
        response = render(request, template, ctx, status=status)
        return trigger_client_event(response, CASE_CHANGED) if status == 200 else response
    if status != 200:
        messages.error(request, ctx.get("error", ""))
    return see_other(reverse("drift_case", args=[case.pk]))


@require_POST
@permission_required(REVIEW, raise_exception=True)
def update_case(request: HtmxHttpRequest, pk: int) -> HttpResponse:
    """Claim, assign, or change status and verdict (``action`` says which)."""
    case = get_case(pk)
    action = request.POST.get("action", "")
    changes: dict[str, Any] = {}
    form = None
    if action == "claim":
        changes["claim"] = True
    elif action == "reopen":  # reopening is its own button: a Save never reopens a closed case
        changes["status"] = DriftCase.Status.OPEN
    elif action == "assign":
        changes["assignee"] = request.POST.get("assignee", "")
    else:
        form = ReviewForm(request.POST)
        if form.is_valid():
            changes = {"status": form.cleaned_data["status"], "verdict": form.cleaned_data["verdict"]}
            if changes["status"] == case.status and not changes["verdict"].strip():
                del changes["verdict"]  # an empty box with the status kept changes nothing (it never erases)
    error, status = "", 200
    if form is not None and not form.is_valid():
        error, status = _("Pick a status."), 422
    else:
        try:
            drift.update_drift_case(case.pk, changes, request.user)
        except ServiceError as exc:
            error, status = str(exc), exc.status
    before = case
    case = get_case(pk)
    nav = next_context(case, queue_of(QueryDict(request.POST.get("queue", ""))), request.user)
    done = what_changed(before, case) if status == 200 else ""
    if status == 200 and request.POST.get("then") == "next":  # "Save and next": on to the next open case
        if nav["next_case"] is not None:
            messages.success(request, done)
            url = case_url(nav["next_case"].pk, nav["queue_params"])
        else:
            messages.success(request, f"{done} {_('No open case is left in this filter.')}")
            url = reverse("drift_queue") + (f"?{nav['queue_params']}" if nav["queue_params"] else "")
        return HttpResponseClientRedirect(url) if request.htmx else see_other(url)
    ctx = review_context(case, review_form=form if status != 200 else None, error=error, saved=done, **nav)
    if request.htmx or status != 200:
        return _answer(request, case, "console/drift_case.html#review", ctx, status)
    return see_other(case_url(case.pk, nav["queue_params"]))


@require_POST
@permission_required(REVIEW, raise_exception=True)
def comment(request: HtmxHttpRequest, pk: int) -> HttpResponse:
    case = get_case(pk)
    form = CommentForm(request.POST)
    error, status = "", 200
    if form.is_valid():
        try:
            drift.add_comment(case, form.cleaned_data["body"], form.cleaned_data["quote"], request.user)
        except ServiceError as exc:
            error, status = str(exc), exc.status
    else:
        error, status = _("Write a comment first."), 422
    ctx = comments_context(case, error=error)
    if status != 200:
        ctx["comment_form"] = form
    return _answer(request, case, "console/drift_case.html#comments", ctx, status)


# --------------------------------------------------------------------------- opening a case by hand


@require_POST
@permission_required(OPEN_CASE, raise_exception=True)
def open_case(request: HtmxHttpRequest, pk: int) -> HttpResponse:
    summary = get_object_or_404(Summary.objects.select_related("archive"), pk=pk)
    form = OpenCaseForm(request.POST)
    error = ""
    if form.is_valid():
        try:
            case = drift.open_case(summary.pk, **form.cleaned_data, user=request.user)
        except ServiceError as exc:
            error = str(exc)
        else:
            url = reverse("drift_case", args=[case.pk])
            return HttpResponseClientRedirect(url) if request.htmx else see_other(url)
    ctx = {"summary": summary, "open_form": form, "open_error": error}
    if request.htmx:
        return render(request, "console/_open_case.html", ctx, status=422)
    messages.error(request, error or _("The case was not opened: check the form."))
    return see_other(reverse("summary", args=[summary.pk]) + "#open-case")
