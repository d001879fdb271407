"""Archives and summaries: read verified originals, re-summarize in a worker, promote, check drift."""

from __future__ import annotations

import logging
import traceback
import uuid
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from django.db import transaction
from django.utils import timezone

from compression import Archive as PipelineArchive
from compression import Compressor, count_tokens, render_summary_message
from compression.summary_message import SummaryHeader

from .models import Archive, Message, Session, Summary
from .runs import live_summary_index, send_drift_check
from .services import Conflict, NotFound, ServiceError, audit, person, session_config
from .summarizers import build_summarizer

log = logging.getLogger(__name__)


class ArchiveCorrupted(ServiceError):
    """Stored originals no longer match their checksum: never used silently."""

    status = 500


def archive_messages(archive: Archive) -> list[dict[str, Any]]:
    """The archived originals, verified against the archive's sha256 and range."""
    try:
        messages = Message.load(archive.message_keys)
    except LookupError as exc:
        raise ArchiveCorrupted(f"archive {archive.pk} is incomplete: {exc}") from None
    if not PipelineArchive(archive.start, archive.end, messages, archive.sha256).verify():
        raise ArchiveCorrupted(
            f"archive {archive.pk} does not match its sha256 {archive.sha256[:16]}: its originals were altered"
        )
    return messages


# --------------------------------------------------------------------------- re-summarize


def request_resummarize(
    archive_id: int,
    *,
    summarizer: str,
    model: str | None = None,
    focus_topic: str | None = None,
    prompt_version: str | None = None,
    user: Any = None,
) -> Summary:
    """Queue a new summary of an archive (status ``pending``); a worker writes its text."""
    from .tasks import resummarize_task

    build_summarizer(summarizer, model, prompt_version)  # unknown names and versions are refused now
    with transaction.atomic():
        archive = Archive.objects.filter(pk=archive_id).first()
        if archive is None:
            raise NotFound(f"no archive {archive_id}")
        parent = archive.summaries.filter(status=Summary.Status.ACTIVE).first() or archive.summaries.first()
        summary = Summary.objects.create(
            archive=archive,
            parent=parent,
            summary_id=f"sum_{uuid.uuid4().hex[:16]}",
            status=Summary.Status.PENDING,
            stage="queued",
            provenance={
                "generator": summarizer,
                "model": model,
                "prompt_version": prompt_version,
                "focus_topic": focus_topic or None,
                "trigger": "resummarize",
                "created_by": user.get_username() if person(user) else None,
            },
            created_by=person(user),
        )
        audit(user, "summary.resummarize", summary, after={"archive": archive.pk, **summary.provenance})
        transaction.on_commit(lambda: resummarize_task.delay(summary.pk))
    return summary


def execute_resummarize(summary_id: int) -> str | None:
    """Worker side of a re-summarize. Claims the pending row once; never leaves it running on error."""
    claimed = Summary.objects.filter(pk=summary_id, status=Summary.Status.PENDING, stage="queued").update(
        stage="running", updated_at=timezone.now()
    )
    if not claimed:
        return None
    summary = Summary.objects.select_related("archive__session").get(pk=summary_id)
    try:
        return _resummarize(summary)
    except Exception as exc:
        log.exception("re-summarize %s failed", summary_id)
        summary.error = "".join(traceback.format_exception_only(exc)).strip()[:4000]
        summary.status, summary.stage = Summary.Status.FAILED, "done"
        summary.save(update_fields=["error", "status", "stage", "updated_at"])
        return summary.status


def _resummarize(summary: Summary) -> str:
    archive = summary.archive
    provenance = dict(summary.provenance)
    messages = archive_messages(archive)
    summarizer = build_summarizer(provenance["generator"], provenance.get("model"), provenance.get("prompt_version"))
    config = session_config(archive.session, archive.run.config if archive.run_id else None)
    outcome, facts = Compressor(config, summarizer).resummarize(
        messages, start_index=archive.start, focus_topic=provenance.get("focus_topic")
    )
    summary.provenance = provenance | outcome.provenance() | {"budget_tokens": config.effective_summary_max_tokens}
    summary.facts = [f.to_dict() for f in facts]
    summary.stage = "done"
    if outcome.ok:
        summary.text, summary.status = outcome.text or "", Summary.Status.DRAFT
    else:
        summary.error, summary.status = outcome.error or "the summarizer failed", Summary.Status.FAILED
    summary.save(update_fields=["text", "error", "provenance", "facts", "status", "stage", "updated_at"])
    if outcome.ok:
        send_drift_check(summary.pk)
    return summary.status


# --------------------------------------------------------------------------- promote


def _live_target(archive: Archive, session: Session) -> tuple[list[Summary], tuple[int, str] | None]:
    """The archive's active summaries, and the position and id of the live message promoting would replace."""
    active = list(archive.summaries.filter(status=Summary.Status.ACTIVE))
    candidates = {s.summary_id for s in active} | ({archive.inserted_id} if archive.inserted_id else set())
    return active, live_summary_index(session, candidates)


def _summary_message(summary: Summary) -> dict[str, Any]:
    """The live-history message that carries ``summary`` (what promoting writes)."""
    archive = summary.archive
    header = SummaryHeader(
        summary_id=summary.summary_id,
        generator=str(summary.provenance.get("generator") or "unknown"),
        model=summary.provenance.get("model"),
        created=datetime.now(UTC).isoformat(timespec="seconds"),
        archived_range=(archive.start, archive.end),
        archive_sha256=archive.sha256,
    )
    return render_summary_message(summary.text, header)


PROMOTABLE = (Summary.Status.DRAFT, Summary.Status.SUPERSEDED)


def _not_promotable(summary: Summary) -> str:
    return f"summary {summary.pk} is {summary.status}; only a finished, inactive summary can be promoted"


LIVE_SUMMARY_GONE = (
    "the summary this would replace is no longer in the live history "
    "(the session was compressed again or rewritten); nothing was changed"
)


def promote_summary(summary_id: int, user: Any = None) -> Session:
    """Put a summary into the live session in place of its archive's current summary message."""
    from .drift import resolve_fixed_cases  # drift reads archives through this module

    with transaction.atomic():
        summary = Summary.objects.select_related("archive").filter(pk=summary_id).first()
        if summary is None:
            raise NotFound(f"no summary {summary_id}")
        if summary.status not in PROMOTABLE:
            raise Conflict(_not_promotable(summary))
        archive = summary.archive
        session = Session.objects.select_for_update().get(pk=archive.session_id)
        active, found = _live_target(archive, session)
        if found is None:
            raise Conflict(LIVE_SUMMARY_GONE)
        position, old_id = found
        keys = session.keys()
        [new_key] = Message.store([_summary_message(summary)])
        session.replace_from(keys, keys[:position] + [new_key] + keys[position + 1 :])
        Summary.objects.filter(pk__in=[s.pk for s in active]).update(status=Summary.Status.SUPERSEDED)
        before = summary.status
        summary.status = Summary.Status.ACTIVE
        summary.save(update_fields=["status", "updated_at"])
        audit(
            user,
            "summary.promote",
            summary,
            before={"status": before, "live_summary": old_id},
            after={"status": summary.status, "session": session.key, "position": position, "version": session.version},
        )
        resolve_fixed_cases(summary, user)
    return session


@dataclass
class PromotionPreview:
    """What promoting a summary would change, read without changing anything."""

    summary: Summary
    session: Session
    #: the archive's active versions, which become superseded
    active: list[Summary]
    #: position and header id of the live summary message that would be replaced (None: it is gone)
    position: int | None
    live_id: str | None
    #: the summary row behind ``live_id`` (None when no row carries it)
    live_summary: Summary | None
    live_tokens: int | None
    new_tokens: int
    #: why promoting would be refused ("" when it would go ahead); ``reason`` is "status" or "gone"
    problem: str
    reason: str

    @property
    def possible(self) -> bool:
        return not self.problem


def promotion_preview(summary: Summary) -> PromotionPreview:
    """What :func:`promote_summary` would do to the live session now (read-only; it decides again under lock)."""
    archive = summary.archive
    session = archive.session
    active, found = _live_target(archive, session)
    position, live_id = found if found is not None else (None, None)
    live_summary = Summary.objects.filter(summary_id=live_id).first() if live_id else None
    live_tokens = None
    if position is not None:
        live_tokens = session.entries.filter(position=position).values_list("message__tokens", flat=True).first()
    problem, reason = "", ""
    if summary.status not in PROMOTABLE:
        problem, reason = _not_promotable(summary), "status"
    elif found is None:
        problem, reason = LIVE_SUMMARY_GONE, "gone"
    return PromotionPreview(
        summary=summary,
        session=session,
        active=[s for s in active if s.pk != summary.pk],
        position=position,
        live_id=live_id,
        live_summary=live_summary,
        live_tokens=live_tokens,
        new_tokens=count_tokens([_summary_message(summary)]),
        problem=problem,
        reason=reason,
    )
