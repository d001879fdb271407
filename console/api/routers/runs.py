"""Runs: report one done in-process, read one, read its output."""

from typing import Any

from django.http import HttpRequest, HttpResponse
from django.shortcuts import get_object_or_404
from ninja import Header, Router, Status
from ninja.errors import HttpError

from ...models import CompressionRun, Message
from ...roles import COMPRESS, VIEW
from ...services import reported
from ..common import ERRORS, require
from ..schemas import ReportIn, RunMessagesOut, RunOut

runs_router = Router(tags=["runs"])


@runs_router.post("/report", response={201: RunOut, **ERRORS}, summary="Report a compression done in-process")
def report(
    request: HttpRequest,
    response: HttpResponse,
    payload: ReportIn,
    idempotency_key: str | None = Header(
        None,
        alias="Idempotency-Key",
        description="one per report: a retry with the same key answers the run stored the first time "
        "(with 'Idempotent-Replayed: true') instead of storing it again",
    ),
) -> Status:
    require(request, COMPRESS, "report compressions")
    report: dict[str, Any] = {
        "session_key": payload.session_key,
        "input_messages": payload.input_messages,
        "output_messages": payload.output_messages,
        "archive_messages": payload.archive_messages,
        "summary_text": payload.summary_text,
        "provenance": payload.provenance,
    }
    if idempotency_key is None:
        run = reported.record_reported_run(**report, user=request.user)
    else:
        run, replayed = reported.record_reported_run_once(idempotency_key, user=request.user, **report)
        if replayed:
            response["Idempotent-Replayed"] = "true"
    return Status(201, run)  # RunOut reads it (its resolvers count messages, find the archive and summary)


@runs_router.get("/{int:run_id}", response={200: RunOut, **ERRORS}, summary="A run: status, stage, stats")
def get_run(request: HttpRequest, run_id: int) -> CompressionRun:
    require(request, VIEW, "read runs")
    return get_object_or_404(CompressionRun.objects.select_related("session"), pk=run_id)


@runs_router.get("/{int:run_id}/messages", response={200: RunMessagesOut, **ERRORS}, summary="Run output")
def run_messages(request: HttpRequest, run_id: int) -> dict[str, Any]:
    require(request, VIEW, "read runs")
    run = get_object_or_404(CompressionRun, pk=run_id)
    if not run.finished:
        raise HttpError(409, f"run {run_id} is {run.status}; its output exists once it ends")
    if not run.output_keys:
        raise HttpError(409, f"run {run_id} ended {run.status} without an output history")
    return {"run_id": run.pk, "messages": Message.load(run.output_keys)}
