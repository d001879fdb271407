"""Archives and summaries: the archived originals, summary versions with provenance, re-summarize, compare, promote."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

from django import forms
from django.contrib import messages
from django.contrib.auth.decorators import permission_required
from django.core.exceptions import PermissionDenied
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.urls import reverse
from django.utils.translation import gettext as _
from django.utils.translation import gettext_lazy
from django.views.decorators.http import require_GET, require_http_methods, require_POST
from django.views.decorators.vary import vary_on_headers
from django_htmx.http import HttpResponseStopPolling, trigger_client_event

from ..diff import word_diff
from ..display import may_reveal, message_view, render_markdown, shown
from ..models import Archive, CompressionRun, DriftCase, Summary
from ..services import Conflict, ServiceError
from ..summaries import (
    PROMOTABLE,
    ArchiveCorrupted,
    archive_messages,
    promote_summary,
    promotion_preview,
    request_resummarize,
)
from ..summarizers import PROMPT_VERSIONS, default_summarizer_name
from . import (
    OPEN_CASE,
    PROMOTE,
    RESUMMARIZE,
    VIEW,
    HtmxHttpRequest,
    focus_topic_field,
    fragment,
    load_messages,
    partial,
    reveal_requested,
    see_other,
)

#: archived messages shown per page
PAGE_SIZE = 200

#: htmx events pages listen to, to refresh what a promote or a re-summarize changed
PROMOTED = "summaryPromoted"
CHANGED = "summaryChanged"

TRIGGER_LABELS = {
    **dict(CompressionRun.Trigger.choices),
    "resummarize": gettext_lazy("re-summarize"),
}
FACT_KINDS = {
    "constraint": gettext_lazy("constraint"),
    "approval": gettext_lazy("approval"),
    "error": gettext_lazy("error"),
    "path": gettext_lazy("path"),
    "decision": gettext_lazy("decision"),
    "command": gettext_lazy("command"),
    "identifier": gettext_lazy("identifier"),
}
FINDING_KINDS = {
    "constraint_dropped": gettext_lazy("constraint dropped"),
    "constraint_inverted": gettext_lazy("constraint inverted"),
    "constraint_fabricated": gettext_lazy("constraint fabricated"),
    "identifier_missing": gettext_lazy("identifier missing"),
    "identifier_fabricated": gettext_lazy("identifier fabricated"),
    "hedge_lost": gettext_lazy("uncertainty lost"),
    "progress_fabricated": gettext_lazy("progress fabricated"),
    "wrong_attribution": gettext_lazy("wrong attribution"),
    "other": gettext_lazy("other"),  # a case opened by hand about something else
}
SEVERITIES = {"high": gettext_lazy("high"), "medium": gettext_lazy("medium"), "low": gettext_lazy("low")}
#: what the library's drift checks write as a finding's detail, translated for the page (others are shown as is)
DETAILS = {
    "the summary states the constrained action without its negation": gettext_lazy(
        "the summary states the constrained action without its negation"
    ),
    "the summary negates a requirement": gettext_lazy("the summary negates a requirement"),
    "an approval became a refusal": gettext_lazy("an approval became a refusal"),
    "no restatement found": gettext_lazy("no restatement found"),
    "approval lost": gettext_lazy("approval lost"),
    "a prohibition or approval no user gave": gettext_lazy("a prohibition or approval no user gave"),
    "a pinned constraint or approval that is not in the originals": gettext_lazy(
        "a pinned constraint or approval that is not in the originals"
    ),
    "an identifier the user gave is not in the summary": gettext_lazy(
        "an identifier the user gave is not in the summary"
    ),
    "an identifier that appears nowhere in the originals": gettext_lazy(
        "an identifier that appears nowhere in the originals"
    ),
    "an uncertain statement became a certain one": gettext_lazy("an uncertain statement became a certain one"),
    "the summary reports a number past the limit": gettext_lazy("the summary reports a number past the limit"),
    "the summary reports the action in the window": gettext_lazy("the summary reports the action in the window"),
    "an identifier the assistant reported is not in the summary": gettext_lazy(
        "an identifier the assistant reported is not in the summary"
    ),
    "a number that appears nowhere in the originals": gettext_lazy("a number that appears nowhere in the originals"),
    "a number in a limit that appears nowhere in the originals": gettext_lazy(
        "a number in a limit that appears nowhere in the originals"
    ),
    "a prohibition became a plan for later (when ready, later, if needed)": gettext_lazy(
        "a prohibition became a plan for later (when ready, later, if needed)"
    ),
    "a command the user asked to run is not in the summary": gettext_lazy(
        "a command the user asked to run is not in the summary"
    ),
    "a limit the user set is not in the summary with its number": gettext_lazy(
        "a limit the user set is not in the summary with its number"
    ),
    "an error that appears only in tool output is not in the summary": gettext_lazy(
        "an error that appears only in tool output is not in the summary"
    ),
    "the summary puts a statement in the wrong mouth (user / assistant)": gettext_lazy(
        "the summary puts a statement in the wrong mouth (user / assistant)"
    ),
    "the summary places an error where it did not happen": gettext_lazy(
        "the summary places an error where it did not happen"
    ),
    "the summary says the user did what the agent did": gettext_lazy(
        "the summary says the user did what the agent did"
    ),
    "the summary says the tests passed; the last test run failed": gettext_lazy(
        "the summary says the tests passed; the last test run failed"
    ),
    "the summary says the tests passed; no test run is in the originals": gettext_lazy(
        "the summary says the tests passed; no test run is in the originals"
    ),
    "the summary claims as done what the originals say was not done": gettext_lazy(
        "the summary claims as done what the originals say was not done"
    ),
    "the summary claims as done what no tool result or message shows": gettext_lazy(
        "the summary claims as done what no tool result or message shows"
    ),
    "a request the user made is not in the summary": gettext_lazy("a request the user made is not in the summary"),
    "what a tool showed over the user's limit is not in the summary": gettext_lazy(
        "what a tool showed over the user's limit is not in the summary"
    ),
}


# --------------------------------------------------------------------------- helpers


def source_link(archive: Archive, index: Any) -> str | None:
    """Where message ``index`` of the run's input is shown: the archive page inside the archive, else the run diff."""
    if not isinstance(index, int):
        return None
    if archive.start <= index < archive.end:
        return f"{reverse('archive', args=[archive.pk])}?at={index}#a-{index}"
    if archive.run_id is not None:
        return f"{reverse('run', args=[archive.run_id])}?at=in-{index}#in-{index}"
    return None


@dataclass
class Provenance:
    """Everything the provenance label shows; ``None`` is printed as "—" or "unknown", never left out."""

    generator: str | None
    model: str | None
    endpoint: str | None
    prompt_version: str | None
    prompt_hash: str | None
    focus_topic: str | None
    input_tokens: int | None
    output_tokens: int | None
    budget_tokens: int | None
    latency_ms: float | None
    trigger: str | None
    created_by: str | None


def provenance(summary: Summary, reveal: bool = False) -> Provenance:
    data = summary.provenance or {}
    endpoint = data.get("endpoint_host")
    if not endpoint and data.get("base_url"):
        endpoint = urlsplit(str(data["base_url"])).hostname
    if not endpoint and data.get("generator") == "extractive":
        endpoint = _("offline (no endpoint)")
    trigger = data.get("trigger")
    created_by = summary.created_by.get_username() if summary.created_by_id and summary.created_by else None
    return Provenance(
        generator=data.get("generator") or None,
        model=data.get("model") or None,
        endpoint=endpoint or None,
        prompt_version=data.get("prompt_version") or None,
        prompt_hash=data.get("prompt_hash") or None,
        focus_topic=shown(str(data["focus_topic"]), reveal) if data.get("focus_topic") else None,
        input_tokens=data.get("input_tokens"),
        output_tokens=data.get("output_tokens"),
        budget_tokens=data.get("budget_tokens"),
        latency_ms=data.get("latency_ms"),
        trigger=str(TRIGGER_LABELS.get(trigger, trigger)) if trigger else None,
        created_by=created_by or data.get("created_by") or None,
    )


def versions_of(archive: Archive, reveal: bool = False) -> list[Summary]:
    """The archive's summaries oldest first, numbered v1, v2, ... and with their provenance labels."""
    rows = list(archive.summaries.select_related("created_by", "parent").order_by("created_at", "id"))
    numbers = {s.pk: n for n, s in enumerate(rows, 1)}
    for summary in rows:
        summary.number = numbers[summary.pk]  # type: ignore[attr-defined]
        summary.parent_number = numbers.get(summary.parent_id or 0)  # type: ignore[attr-defined]
        summary.label = provenance(summary, reveal)  # type: ignore[attr-defined]
        summary.promotable = summary.status in PROMOTABLE  # type: ignore[attr-defined]
    return rows


def active_of(versions: list[Summary]) -> Summary | None:
    return next((s for s in versions if s.status == Summary.Status.ACTIVE), None)


def compare_pair(versions: list[Summary], a: Summary | None = None) -> tuple[Summary | None, Summary | None]:
    """The default comparison: the active version (or the oldest) against the newest other one (with text)."""
    if a is None:
        a = active_of(versions) or (versions[0] if versions else None)
    others = [s for s in versions if a is None or s.pk != a.pk]
    # the newest version with text; a pending or failed one has nothing to compare yet
    written = [s for s in others if s.text]
    newest = (written or others)[-1] if others else None
    return a, newest


def compare_with(versions: list[Summary], summary: Summary) -> Summary | None:
    """The version to compare ``summary`` with: the active one, or when that is ``summary``, the newest other."""
    active = active_of(versions)
    return active if active and active.pk != summary.pk else compare_pair(versions, summary)[1]


def get_summary(pk: int) -> Summary:
    return get_object_or_404(
        Summary.objects.select_related("archive__session", "archive__run", "parent", "created_by"), pk=pk
    )


def get_archive(pk: int) -> Archive:
    return get_object_or_404(Archive.objects.select_related("session", "run"), pk=pk)


def shown_facts(summary: Summary, reveal: bool) -> list[dict[str, Any]]:
    return [
        {
            "kind": fact.get("kind") or "",
            "kind_label": FACT_KINDS.get(fact.get("kind") or "", fact.get("kind") or ""),
            "text": shown(str(fact.get("text") or ""), reveal),
            "role": fact.get("role") or "",
            "index": fact.get("source_index"),
            "link": source_link(summary.archive, fact.get("source_index")),
        }
        for fact in summary.facts or []
    ]


def shown_findings(summary: Summary, reveal: bool) -> list[dict[str, Any]]:
    out = []
    for finding in summary.drift_findings or []:
        evidence = finding.get("evidence") or {}
        index = finding.get("message_index")
        out.append(
            {
                "kind": finding.get("kind") or "",
                "kind_label": FINDING_KINDS.get(finding.get("kind") or "", finding.get("kind") or ""),
                "severity": finding.get("severity") or "",
                "severity_label": SEVERITIES.get(finding.get("severity") or "", finding.get("severity") or ""),
                "original": shown(str(evidence.get("original") or ""), reveal),
                "summary": shown(str(evidence.get("summary") or ""), reveal),
                "detail": DETAILS.get(finding.get("detail") or "", finding.get("detail") or ""),
                "index": index,
                "link": source_link(summary.archive, index),
                "key": finding_key(finding),
            }
        )
    return out


def finding_key(finding: dict[str, Any]) -> tuple[str, str]:
    """Two versions raise "the same" finding when it is of one kind about one quote (the original's, else theirs)."""
    evidence = finding.get("evidence") or {}
    return str(finding.get("kind") or ""), str(evidence.get("original") or evidence.get("summary") or "")


def split_by_key(a: list[dict[str, Any]], b: list[dict[str, Any]], key: Any) -> dict[str, list[dict[str, Any]]]:
    """Items only in ``a``, only in ``b`` and in both (by ``key``), each list in its own order."""
    keys_a, keys_b = {key(x) for x in a}, {key(x) for x in b}
    return {
        "only_a": [x for x in a if key(x) not in keys_b],
        "only_b": [x for x in b if key(x) not in keys_a],
        "both": [x for x in a if key(x) in keys_b],
    }


def groups(split: dict[str, list[dict[str, Any]]]) -> list[tuple[str, list[dict[str, Any]], str]]:
    return [
        (_("Only in A"), split["only_a"], "only-a"),
        (_("Only in B"), split["only_b"], "only-b"),
        (_("In both"), split["both"], "both"),
    ]


def summary_reveal(request: HttpRequest, obj: Any) -> dict[str, Any]:
    reveal = reveal_requested(request, obj)
    return {"reveal": reveal, "may_reveal": may_reveal(request.user)}


# --------------------------------------------------------------------------- summary


@require_GET
@permission_required(VIEW, raise_exception=True)
@vary_on_headers("HX-Request")
def summary_detail(request: HtmxHttpRequest, pk: int) -> HttpResponse:
    summary = get_summary(pk)
    ctx = summary_reveal(request, summary)
    versions = versions_of(summary.archive, ctx["reveal"])
    this = next(s for s in versions if s.pk == summary.pk)
    active = active_of(versions)
    ctx |= {
        "summary": this,
        "archive": summary.archive,
        "session": summary.archive.session,
        "versions": versions,
        "active": active,
        "html": render_markdown(summary.text, ctx["reveal"]) if summary.text else "",
        "facts": shown_facts(summary, ctx["reveal"]),
        "findings": shown_findings(summary, ctx["reveal"]),
        "cases": cases_of(summary),
        "compare_a": compare_with(versions, this),
    }
    if request.user.has_perm(OPEN_CASE) and summary.text:
        from .drift import OpenCaseForm  # the drift pages build on this module

        ctx["open_form"] = OpenCaseForm()
    return render(request, partial(request, "console/summary.html", "summary"), ctx)


def labelled(case: DriftCase) -> DriftCase:
    """Attach the translated labels the templates show."""
    case.severity_label = SEVERITIES.get(case.severity, case.severity)  # type: ignore[attr-defined]
    case.kind_labels = [FINDING_KINDS.get(k, k) for k in case.kind_list]  # type: ignore[attr-defined]
    return case


def cases_of(summary: Summary) -> list[Any]:
    return [labelled(c) for c in summary.drift_cases.select_related("assignee").order_by("created_at", "id")]


def progress_context(summary: Summary) -> dict[str, Any]:
    versions = list(summary.archive.summaries.order_by("created_at", "id"))
    return {"summary": summary, "archive": summary.archive, "compare_a": compare_with(versions, summary)}


@require_GET
@permission_required(VIEW, raise_exception=True)
@vary_on_headers("HX-Request")
def summary_progress(request: HtmxHttpRequest, pk: int) -> HttpResponse:
    summary = get_summary(pk)
    if not request.htmx:
        return redirect("summary", pk=summary.pk)
    response = render(request, "console/_summary_progress.html", progress_context(summary))
    if summary.status == Summary.Status.PENDING:
        return response
    response.status_code = HttpResponseStopPolling.status_code  # done: htmx stops polling
    return trigger_client_event(response, CHANGED)


# --------------------------------------------------------------------------- archive


class ResummarizeForm(forms.Form):
    summarizer = forms.ChoiceField(label=gettext_lazy("Summarizer"))
    model = forms.CharField(
        label=gettext_lazy("Model"),
        required=False,
        max_length=200,
        help_text=gettext_lazy("Optional; empty uses the configured model. The extractive summarizer uses none."),
    )
    focus_topic = focus_topic_field(widget=forms.Textarea(attrs={"rows": 2}))
    prompt_version = forms.ChoiceField(
        label=gettext_lazy("Prompt version"),
        required=False,
        help_text=gettext_lazy("Empty uses the summarizer's current version."),
    )

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        summarizer = self.fields["summarizer"]
        prompt_version = self.fields["prompt_version"]
        assert isinstance(summarizer, forms.ChoiceField) and isinstance(prompt_version, forms.ChoiceField)
        summarizer.choices = [(name, name) for name in PROMPT_VERSIONS]
        summarizer.initial = default_summarizer_name()
        versions: list[tuple[str, str]] = [("", _("current version"))]
        for name, names in PROMPT_VERSIONS.items():
            versions.extend((v, f"{v} ({name})") for v in names)
        prompt_version.choices = versions


def versions_context(archive: Archive, reveal: bool) -> dict[str, Any]:
    versions = versions_of(archive, reveal)
    a, b = compare_pair(versions)
    return {"versions": versions, "default_a": a, "default_b": b}


def archive_context(request: HttpRequest, archive: Archive, reveal: bool) -> dict[str, Any]:
    """The whole archive page: checksum status, the window of originals shown, the summary versions."""
    corrupted = ""
    try:
        archive_messages(archive)
    except ArchiveCorrupted as exc:
        corrupted = str(exc)
    return (
        window_context(request, archive, reveal)
        | versions_context(archive, reveal)
        | {"corrupted": corrupted, "form": ResummarizeForm()}
    )


def window_context(request: HttpRequest, archive: Archive, reveal: bool) -> dict[str, Any]:
    count = len(archive.message_keys)
    pages = max(1, -(-count // PAGE_SIZE))
    page = 0
    try:
        if "at" in request.GET:
            page = (int(request.GET["at"]) - archive.start) // PAGE_SIZE
        elif "page" in request.GET:
            page = int(request.GET["page"]) - 1
    except ValueError:
        page = 0
    page = min(max(page, 0), pages - 1)
    first = page * PAGE_SIZE
    keys = archive.message_keys[first : first + PAGE_SIZE]
    rows = load_messages(keys)
    shown_rows = []
    for offset, key in enumerate(keys):
        index = archive.start + first + offset
        found = rows.get(key)
        view = message_view(key, found[0], reveal=reveal, tokens=found[1]) if found else None
        shown_rows.append({"index": index, "anchor": f"a-{index}", "m": view, "key": key})
    return {
        "rows": shown_rows,
        "page": page + 1,
        "pages": pages,
        "first_index": archive.start + first,
        "last_index": archive.start + first + len(keys) - 1,
        "count": count,
    }


#: htmx requests for one region of the archive page get that region (by HX-Target); others the whole content
ARCHIVE_PARTIALS = {"archive-messages": "messages", "summary-versions": "versions", "resummarize": "resummarize"}


@require_GET
@permission_required(VIEW, raise_exception=True)
@vary_on_headers("HX-Request", "HX-Target")
def archive_detail(request: HtmxHttpRequest, pk: int) -> HttpResponse:
    archive = get_archive(pk)
    ctx: dict[str, Any] = {"archive": archive, "session": archive.session}
    ctx |= summary_reveal(request, archive)
    name = ARCHIVE_PARTIALS.get(request.htmx.target or "", "page") if fragment(request) else ""
    # a region refreshes alone; the checksum is verified (all originals loaded) only for the whole page
    if name == "messages":
        ctx |= window_context(request, archive, ctx["reveal"])
    elif name == "versions":
        ctx |= versions_context(archive, ctx["reveal"])
    elif name == "resummarize":
        ctx["form"] = ResummarizeForm()
    else:
        ctx |= archive_context(request, archive, ctx["reveal"])
    return render(request, f"console/archive.html#{name}" if name else "console/archive.html", ctx)


@require_POST
@permission_required(RESUMMARIZE, raise_exception=True)
def resummarize(request: HtmxHttpRequest, pk: int) -> HttpResponse:
    archive = get_archive(pk)
    form = ResummarizeForm(request.POST)
    summary = None
    if form.is_valid():
        try:
            summary = request_resummarize(
                archive.pk,
                summarizer=form.cleaned_data["summarizer"],
                model=form.cleaned_data["model"].strip() or None,
                focus_topic=form.cleaned_data["focus_topic"].strip() or None,
                prompt_version=form.cleaned_data["prompt_version"] or None,
                user=request.user,
            )
        except ServiceError as exc:
            form.add_error(None, str(exc))
    if summary is None:
        ctx: dict[str, Any] = {"archive": archive, "session": archive.session, "form": form}
        if request.htmx:
            return render(request, "console/archive.html#resummarize", ctx, status=422)
        ctx = summary_reveal(request, archive) | archive_context(request, archive, False) | ctx
        return render(request, "console/archive.html", ctx, status=422)
    if not request.htmx:
        return see_other(reverse("summary", args=[summary.pk]))
    ctx = {"archive": archive, "form": ResummarizeForm()} | progress_context(summary)
    response = render(request, "console/archive.html#resummarize", ctx)
    return trigger_client_event(response, CHANGED)


# --------------------------------------------------------------------------- compare


def pick(archive: Archive, versions: list[Summary], value: str | None) -> Summary | None:
    if not value:
        return None
    try:
        pk = int(value)
    except ValueError:
        raise Http404("no such summary") from None
    found = next((s for s in versions if s.pk == pk), None)
    if found is None:
        raise Http404(f"summary {pk} is not a version of archive {archive.pk}")
    return found


@require_GET
@permission_required(VIEW, raise_exception=True)
@vary_on_headers("HX-Request")
def compare(request: HtmxHttpRequest, pk: int) -> HttpResponse:
    archive = get_archive(pk)
    ctx = summary_reveal(request, archive)
    reveal = ctx["reveal"]
    versions = versions_of(archive, reveal)
    a = pick(archive, versions, request.GET.get("a"))
    b = pick(archive, versions, request.GET.get("b"))
    if b is None:
        a, b = compare_pair(versions, a)
    elif a is None:
        a = active_of(versions) or versions[0]
        if a.pk == b.pk:
            a = next((s for s in versions if s.pk != b.pk), a)
    ctx |= {"archive": archive, "session": archive.session, "versions": versions, "a": a, "b": b}
    if a is not None and b is not None:
        text_a, text_b = shown(a.text, reveal), shown(b.text, reveal)
        facts = split_by_key(shown_facts(a, reveal), shown_facts(b, reveal), lambda f: (f["kind"], f["text"]))
        findings = split_by_key(shown_findings(a, reveal), shown_findings(b, reveal), lambda f: f["key"])
        ctx |= {
            "sides": [
                ("A", a, render_markdown(a.text, reveal) if a.text else ""),
                ("B", b, render_markdown(b.text, reveal) if b.text else ""),
            ],
            "spans": word_diff(text_a, text_b),
            "same_text": a.text == b.text,
            "fact_groups": groups(facts),
            "finding_groups": groups(findings),
            "checked": a.drift_checked_at is not None and b.drift_checked_at is not None,
        }
    return render(request, partial(request, "console/compare.html", "compare"), ctx)


# --------------------------------------------------------------------------- promote


@require_http_methods(["GET", "POST"])
@permission_required(VIEW, raise_exception=True)
@vary_on_headers("HX-Request")
def promote(request: HtmxHttpRequest, pk: int) -> HttpResponse:
    summary = get_summary(pk)
    if request.method == "GET":
        ctx = {"preview": promotion_preview(summary), "summary": summary, "archive": summary.archive}
        return render(request, partial(request, "console/promote.html", "confirm"), ctx)
    if not request.user.has_perm(PROMOTE):
        raise PermissionDenied("promoting a summary needs the console.promote_summary permission")
    try:
        session = promote_summary(summary.pk, user=request.user)
    except Conflict as exc:
        summary = get_summary(pk)
        ctx = {
            "error": str(exc),
            "preview": promotion_preview(summary),
            "summary": summary,
            "archive": summary.archive,
            "latest_archive": summary.archive.session.archives.order_by("-created_at", "-id").first(),
        }
        return render(request, partial(request, "console/promote.html", "conflict"), ctx, status=409)
    summary.refresh_from_db(fields=["status"])
    if not request.htmx:
        messages.success(
            request,
            _("Promoted: session %(key)s is now at version %(version)s, with this summary in place of the old one.")
            % {"key": session.key, "version": session.version},
        )
        return see_other(reverse("summary", args=[summary.pk]))
    ctx = {"session": session, "summary": summary, "archive": summary.archive}
    response = render(request, "console/promote.html#done", ctx)
    return trigger_client_event(response, PROMOTED)
