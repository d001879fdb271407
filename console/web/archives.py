"""The archive page (the archived originals, page by page, and the summary versions), re-summarizing an
archive, and comparing two of its summary versions."""

from __future__ import annotations

from typing import Any

from django.contrib import messages
from django.contrib.auth.decorators import permission_required
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import get_object_or_404, render
from django.urls import reverse
from django.utils.http import urlencode
from django.utils.translation import gettext as _
from django.views.decorators.http import require_GET, require_POST
from django.views.decorators.vary import vary_on_headers
from django_htmx.http import trigger_client_event

from ..diff.sections import section_diff
from ..display import mask_unless_revealed, message_view
from ..errors import ArchiveCorrupted, ServiceError
from ..models import Archive, PairwiseReview, Summary
from ..queries import archive_hits
from ..services.drift import review_pair as record_pair_review
from ..services.summaries import request_resummarize
from . import RESUMMARIZE, REVIEW, VIEW, int_or_none, load_messages, reveal_context, see_other
from .forms import PairwiseForm, ResummarizeForm
from .htmx import SUMMARY_CHANGED, HtmxHttpRequest, partial, region
from .presenters import (
    References,
    active_of,
    compare_groups,
    compare_pair,
    fact_rows,
    finding_rows,
    history_numbers,
    in_session_language,
    split_by_key,
    summary_html,
    summary_progress_context,
    versions_of,
)
from .sessions import SEARCH_HITS, marked, search_needle

#: archived messages shown per page
PAGE_SIZE = 50


def get_archive(pk: int) -> Archive:
    return get_object_or_404(Archive.objects.select_related("session", "run"), pk=pk)


def versions_context(archive: Archive) -> dict[str, Any]:
    versions = versions_of(archive)
    a, b = compare_pair(versions)
    return {"versions": versions, "default_a": a, "default_b": b}


def archive_context(request: HttpRequest, archive: Archive) -> dict[str, Any]:
    """The whole archive page: checksum status, the window of originals shown, the summary versions."""
    corrupted = ""
    try:
        archive.verified_messages()
    except ArchiveCorrupted as exc:
        corrupted = str(exc)
    return (
        window_context(request, archive)
        | versions_context(archive)
        | search_context(request, archive)
        | {"corrupted": corrupted, "form": ResummarizeForm()}
    )


def search_context(request: HttpRequest, archive: Archive) -> dict[str, Any]:
    """``?q=``: this archive's originals that contain it (masked text: a search never confirms a hidden secret)."""
    needle = search_needle(request)
    if not needle:
        return {"q": ""}
    hits = archive_hits(archive.session, needle, SEARCH_HITS + 1, archive_id=archive.pk)
    base = reverse("archive", args=[archive.pk])
    reveal = {"reveal": "1"} if request.GET.get("reveal") else {}
    for hit in hits:
        n = hit["message_index"]
        hit |= {"number": n, "href": f"{base}?{urlencode({'at': n, 'q': needle} | reveal)}#a-{n}"}
        hit["parts"] = marked(hit["snippet"], needle)
    return {"q": needle, "hits": hits[:SEARCH_HITS], "more_hits": len(hits) > SEARCH_HITS}


def window_context(request: HttpRequest, archive: Archive) -> dict[str, Any]:
    count = len(archive.message_keys)
    pages = max(1, -(-count // PAGE_SIZE))
    page = 0
    at = int_or_none(request.GET.get("at"))
    try:
        if at is not None:
            page = (at - archive.start) // PAGE_SIZE
        elif "page" in request.GET:
            page = int(request.GET["page"]) - 1
    except ValueError:
        page = 0
    page = min(max(page, 0), pages - 1)
    first = page * PAGE_SIZE
    keys = archive.message_keys[first : first + PAGE_SIZE]
    rows = load_messages(keys)
    numbers = history_numbers(archive)
    shown_rows = []
    for offset, key in enumerate(keys):
        index = archive.start + first + offset
        found = rows.get(key)
        view = message_view(key, found[0], tokens=found[1]) if found else None
        shown_rows.append(
            {
                "index": index,
                "anchor": f"a-{index}",
                "m": view,
                "key": key,
                "targeted": index == at,
                "number": numbers[first + offset],
            }
        )
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
    ctx |= reveal_context(request, archive)
    name = region(request, ARCHIVE_PARTIALS, "page")
    # a region refreshes alone; the checksum is verified (all originals loaded) only for the whole page
    if name == "messages":
        ctx |= window_context(request, archive)
    elif name == "versions":
        ctx |= versions_context(archive)
    elif name == "resummarize":
        ctx["form"] = ResummarizeForm()
    else:
        ctx |= archive_context(request, archive)
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
        ctx = reveal_context(request, archive) | archive_context(request, archive) | ctx
        return render(request, "console/archive.html", ctx, status=422)
    if not request.htmx:
        return see_other(reverse("summary", args=[summary.pk]))
    ctx = {"archive": archive, "form": ResummarizeForm()} | summary_progress_context(summary)
    response = render(request, "console/archive.html#resummarize", ctx)
    return trigger_client_event(response, SUMMARY_CHANGED)


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
    ctx = reveal_context(request, archive)
    versions = versions_of(archive)
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
        text_a, text_b = mask_unless_revealed(a.text), mask_unless_revealed(b.text)
        sections = section_diff(in_session_language(text_a), in_session_language(text_b))
        references = References(archive)  # both versions link into the same archives: load them once
        facts = split_by_key(fact_rows(a, references), fact_rows(b, references), lambda f: (f["kind"], f["text"]))
        findings = split_by_key(finding_rows(a), finding_rows(b), lambda f: f["key"])
        ctx |= {
            "sides": [
                ("A", a, summary_html(a, references.href)),
                ("B", b, summary_html(b, references.href)),
            ],
            # the difference leads: changed sections first, each word by word; the whole texts are collapsed
            "sections": sections,
            "changed_sections": [s for s in sections if s.state != "same"],
            "same_sections": [s for s in sections if s.state == "same"],
            "same_text": a.text == b.text,
            "fact_groups": compare_groups(facts),
            "finding_groups": compare_groups(findings),
            "checked": a.drift_checked_at is not None and b.drift_checked_at is not None,
        }
        ctx |= pair_context(archive, a, b)
    return render(request, partial(request, "console/compare.html", "compare"), ctx)


def pair_context(archive: Archive, a: Summary, b: Summary, form: PairwiseForm | None = None) -> dict[str, Any]:
    """The verdicts recorded on this pair (either way round: B-vs-A is read as A-vs-B) and the form for one more."""
    rows = PairwiseReview.objects.filter(archive=archive, a__in=[a.pk, b.pk], b__in=[a.pk, b.pk]).select_related(
        "reviewer", "a", "b"
    )
    flipped = {"a_better": "b_better", "b_better": "a_better"}
    reviews = []
    for r in rows[:50]:
        verdict = r.verdict if r.a_id == a.pk else flipped.get(r.verdict, r.verdict)
        reviews.append({"row": r, "verdict": verdict, "label": PairwiseReview.Verdict(verdict).label})
    return {
        "pair_form": form or PairwiseForm(initial={"a": a.pk, "b": b.pk}),
        "pair_reviews": reviews,
    }


@require_POST
@permission_required(REVIEW, raise_exception=True)
def review_pair(request: HtmxHttpRequest, pk: int) -> HttpResponse:
    """Record a verdict on versions A and B (stored, audited); the compare page shows it."""
    archive = get_archive(pk)
    form = PairwiseForm(request.POST)
    error = ""
    if form.is_valid():
        data = form.cleaned_data
        try:
            record_pair_review(data["a"], data["b"], data["verdict"], data["note"], request.user)
        except ServiceError as exc:
            error = str(exc)
    else:
        error = " ".join(str(e) for errors in form.errors.values() for e in errors)
    a_id, b_id = request.POST.get("a", ""), request.POST.get("b", "")
    url = reverse("compare", args=[archive.pk]) + f"?a={a_id}&b={b_id}#pairwise"
    if not request.htmx:
        if error:
            messages.error(request, error)
        else:
            messages.success(request, _("Your verdict is recorded."))
        return see_other(url)
    a, b = pick_pair(archive, a_id, b_id)
    ctx = {"archive": archive, "a": a, "b": b, "pair_error": error, "pair_saved": not error}
    ctx |= pair_context(archive, a, b, form if error else None)
    return render(request, "console/compare.html#pairwise", ctx, status=422 if error else 200)


def pick_pair(archive: Archive, a_id: str, b_id: str) -> tuple[Summary, Summary]:
    summaries = {str(s.pk): s for s in versions_of(archive)}  # numbered v1, v2, ... as the page shows them
    if a_id not in summaries or b_id not in summaries:
        raise Http404("no such summary of this archive")
    return summaries[a_id], summaries[b_id]
