"""Archives and summaries: the verified originals, re-summarize, read and promote a summary."""

from typing import Any

from django.http import HttpRequest
from django.shortcuts import get_object_or_404
from ninja import Router, Status

from ...errors import InvalidInput
from ...models import Archive, PairwiseReview, Summary
from ...roles import PROMOTE, RESUMMARIZE, REVIEW, VIEW
from ...services import drift, summaries
from ..common import ERRORS, require
from ..schemas import (
    ArchiveOut,
    PairwiseReviewIn,
    PairwiseReviewOut,
    PromoteIn,
    PromoteOut,
    ResummarizeIn,
    SummaryOut,
    summary_payload,
)

archives = Router(tags=["archives and summaries"])


@archives.get("/archives/{int:archive_id}", response={200: ArchiveOut, **ERRORS}, summary="Archived originals")
def get_archive(request: HttpRequest, archive_id: int) -> dict[str, Any]:
    require(request, VIEW, "read archives")
    archive = get_object_or_404(Archive.objects.select_related("session"), pk=archive_id)
    messages = archive.verified_messages()  # raises when the checksum does not match
    return {
        "id": archive.pk,
        "session": archive.session.key,
        "run_id": archive.run_id,
        "start": archive.start,
        "end": archive.end,
        "sha256": archive.sha256,
        "verified": True,
        "messages": messages,
        "summaries": list(archive.summaries.order_by("created_at", "id").values_list("pk", flat=True)),
    }


@archives.post(
    "/archives/{int:archive_id}/summaries",
    response={202: SummaryOut, **ERRORS},
    summary="Re-summarize from the archived originals (in a worker)",
)
def resummarize(request: HttpRequest, archive_id: int, payload: ResummarizeIn) -> Status:
    require(request, RESUMMARIZE, "re-summarize archives")
    summary = summaries.request_resummarize(
        archive_id,
        summarizer=payload.summarizer,
        model=payload.model,
        focus_topic=payload.focus_topic,
        prompt_version=payload.prompt_version,
        user=request.user,
    )
    return Status(202, summary_payload(summary))


@archives.get("/summaries/{int:summary_id}", response={200: SummaryOut, **ERRORS}, summary="A summary")
def get_summary(request: HttpRequest, summary_id: int) -> dict[str, Any]:
    require(request, VIEW, "read summaries")
    return summary_payload(get_object_or_404(Summary, pk=summary_id))


@archives.post(
    "/summaries/{int:summary_id}/drift-check",
    response={202: SummaryOut, **ERRORS},
    summary="Run a summary's drift check again (a failed one, or one still waiting), with fresh attempts",
)
def retry_drift_check(request: HttpRequest, summary_id: int) -> Status:
    require(request, RESUMMARIZE, "run drift checks")
    return Status(202, summary_payload(drift.retry_drift_check(summary_id, request.user)))


@archives.post(
    "/summaries/{int:summary_id}/promote",
    response={200: PromoteOut, **ERRORS},
    summary="Put this summary into the live session in place of the current one",
)
def promote(request: HttpRequest, summary_id: int, payload: PromoteIn | None = None) -> dict[str, Any]:
    """409 naming them when the summary has open high-severity drift findings, unless ``acknowledge_drift``."""
    require(request, PROMOTE, "promote summaries")
    acknowledge = payload.acknowledge_drift if payload is not None else False
    session = summaries.promote_summary(summary_id, user=request.user, acknowledge_drift=acknowledge)
    return {
        "summary": summary_payload(Summary.objects.get(pk=summary_id)),
        "session": session.key,
        "version": session.version,
    }


@archives.get(
    "/archives/{int:archive_id}/pairwise-reviews",
    response={200: list[PairwiseReviewOut], **ERRORS},
    summary="Verdicts on pairs of this archive's summary versions, newest first",
)
def pairwise_reviews(request: HttpRequest, archive_id: int) -> list[PairwiseReview]:
    require(request, VIEW, "read archives")
    archive = get_object_or_404(Archive, pk=archive_id)
    return list(archive.pairwise_reviews.select_related("a", "b", "reviewer")[:500])


@archives.post(
    "/archives/{int:archive_id}/pairwise-reviews",
    response={201: PairwiseReviewOut, **ERRORS},
    summary="Record a verdict on two summary versions (A better, B better, same, both wrong)",
)
def review_pair(request: HttpRequest, archive_id: int, payload: PairwiseReviewIn) -> Status:
    require(request, REVIEW, "review summaries")
    archive = get_object_or_404(Archive, pk=archive_id)
    if set(Summary.objects.filter(pk__in=[payload.a, payload.b]).values_list("archive_id", flat=True)) - {archive.pk}:
        raise InvalidInput(f"summaries {payload.a} and {payload.b} must both be versions of archive {archive.pk}")
    review = drift.review_pair(payload.a, payload.b, payload.verdict, payload.note, request.user)
    return Status(201, review)
