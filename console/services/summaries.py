"""Archives and summaries: read verified originals, re-summarize in a worker, promote, check drift."""

from __future__ import annotations

import logging
import traceback
import uuid
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

from django.conf import settings
from django.db import transaction
from django.db.models import F
from django.utils import timezone

from agent_compression import Compressor, count_tokens, render_summary_message
from agent_compression.summary_message import SummaryHeader, summary_history_range

from ..audit import audit, person
from ..errors import Conflict, NotFound
from ..models import Archive, Message, Session, Summary
from . import queue
from .drift import resolve_fixed_cases
from .promotion import DriftNotAcknowledged, acknowledged_row, blocking, open_findings
from .runs import SWEEP_BATCH, beating, config_snapshot
from .summarizer_factory import build_summarizer
from .validation import session_config

log = logging.getLogger(__name__)


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
    """Queue a new summary of an archive (status ``pending``); a worker writes its text.

    A broker that is down leaves it pending and queued (the recovery sweep sends it), never fails the request.
    """
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
        queue.send_on_commit(queue.RESUMMARIZE, summary.pk)
    return summary


def execute_resummarize(summary_id: int) -> str | None:
    """Worker side of a re-summarize. Claims the pending row once; never leaves it running on error.

    ``updated_at`` is its heartbeat while the model works; one silent for RUN_STALE_SECONDS lost its worker
    and is queued again by :func:`recover_stale_summaries`.
    """
    claimed = Summary.objects.filter(pk=summary_id, status=Summary.Status.PENDING, stage="queued").update(
        stage="running", updated_at=timezone.now(), attempts=F("attempts") + 1
    )
    if not claimed:
        return None
    summary = Summary.objects.select_related("archive__session", "archive__run").get(pk=summary_id)
    mine = Summary.objects.filter(pk=summary_id, stage="running", attempts=summary.attempts)
    try:
        with beating(f"summary-{summary_id}", lambda: mine.update(updated_at=timezone.now())):
            return _resummarize(summary, mine)
    except Exception as exc:
        log.exception("re-summarize %s failed", summary_id)
        error = "".join(traceback.format_exception_only(exc)).strip()[:4000]
        mine.update(error=error, status=Summary.Status.FAILED, stage="done", updated_at=timezone.now())
        return Summary.Status.FAILED


def _resummarize(summary: Summary, mine: Any) -> str | None:
    archive = summary.archive
    provenance = dict(summary.provenance)
    messages = archive.verified_messages()
    summarizer = build_summarizer(provenance["generator"], provenance.get("model"), provenance.get("prompt_version"))
    config = session_config(archive.session, archive.run.config if archive.run_id else None)
    outcome, facts = Compressor(config, summarizer).resummarize(
        messages, start_index=archive.start, focus_topic=provenance.get("focus_topic")
    )
    result: dict[str, Any] = {
        "provenance": provenance
        | outcome.provenance()
        | {
            "budget_tokens": config.effective_summary_max_tokens,
            "config": config_snapshot(config, archive.run.config if archive.run_id else None),
        },
        "facts": [f.to_dict() for f in facts],
        "stage": "done",
        "updated_at": timezone.now(),
        # from here on the row waits for its drift check: that task's sends are counted afresh
        "sent_at": None,
        "sends": 0,
    }
    if outcome.ok:
        result |= {"text": outcome.text or "", "status": Summary.Status.DRAFT}
    else:
        result |= {"error": outcome.error or "the summarizer failed", "status": Summary.Status.FAILED}
    # only while the row is still this attempt's (recovery may have given it to another worker)
    if not mine.update(**result):
        log.warning(
            "re-summarize %s: attempt %s was given to another worker; its result is dropped",
            summary.pk,
            summary.attempts,
        )
        return None
    if outcome.ok:
        queue.send(queue.CHECK_DRIFT, summary.pk)  # a broker failure leaves it to the sweep
    return str(result["status"])


# --------------------------------------------------------------------------- recovery

#: summaries that have text and are not waiting for one: their drift check should have run
CHECKABLE = (Summary.Status.DRAFT, Summary.Status.ACTIVE, Summary.Status.SUPERSEDED)


def recover_stale_summaries(stale_after: float | None = None, resend_after: float | None = None) -> dict[str, int]:
    """Re-summarizes whose worker died or whose task was lost, and drift checks that never ran.

    A running re-summarize silent for ``stale_after`` seconds is queued again (up to RUN_MAX_ATTEMPTS
    tries, then failed); a queued one, and a summary with text and no drift check, is sent again when
    its task never reached the broker or was sent a while ago (``resend_after`` seconds, default:
    doubling from RUN_QUEUED_RESEND_SECONDS). Both tasks claim their row, so a duplicate does nothing.
    """
    stale_after = settings.RUN_STALE_SECONDS if stale_after is None else stale_after
    now = timezone.now()
    report = {"requeued": 0, "failed": 0, "resent": 0, "drift_resent": 0}
    requeued: list[int] = []
    pending = Summary.objects.filter(status=Summary.Status.PENDING)
    for summary in pending.filter(stage="running", updated_at__lt=now - timedelta(seconds=stale_after)):
        moved = Summary.objects.filter(pk=summary.pk, stage="running", updated_at=summary.updated_at)
        if summary.attempts < settings.RUN_MAX_ATTEMPTS:
            if moved.update(stage="queued", sent_at=None, sends=0):
                queue.send_on_commit(queue.RESUMMARIZE, summary.pk)
                requeued.append(summary.pk)
                report["requeued"] += 1
        else:
            error = f"the worker stopped responding {summary.attempts} times while re-summarizing"
            if moved.update(status=Summary.Status.FAILED, stage="done", error=error, updated_at=now):
                report["failed"] += 1
    fields = ("pk", "created_at", "updated_at", "sent_at", "sends")
    queued = pending.filter(stage="queued").exclude(pk__in=requeued).only(*fields).order_by("created_at")
    report["resent"] = queue.send_all(
        queue.RESUMMARIZE, queue.due(queued[:SWEEP_BATCH], now, "created_at", resend_after)
    )
    unchecked = (
        Summary.objects.filter(drift_checked_at__isnull=True, status__in=CHECKABLE)
        .filter(drift_attempts__lt=settings.DRIFT_CHECK_MAX_ATTEMPTS)
        .exclude(text="")
        .only(*fields)
        .order_by("created_at")
    )
    report["drift_resent"] = queue.send_all(
        queue.CHECK_DRIFT, queue.due(unchecked[:SWEEP_BATCH], now, "updated_at", resend_after)
    )
    return report


# --------------------------------------------------------------------------- promote


def _live_target(archive: Archive, session: Session) -> tuple[list[Summary], tuple[int, str] | None]:
    """The archive's active summaries, and the position and id of the live message promoting would replace."""
    active = list(archive.summaries.filter(status=Summary.Status.ACTIVE))
    candidates = {s.summary_id for s in active} | ({archive.inserted_id} if archive.inserted_id else set())
    return active, session.live_summary_index(candidates)


def _summary_message(summary: Summary, replaced: dict[str, Any] | None = None) -> dict[str, Any]:
    """The live-history message that carries ``summary`` (what promoting writes).

    ``created=`` is when the summary was made (promoting is recorded on the row and in the audit log);
    the history numbering (``history=A-B``) is that of the message it replaces, ``replaced``.
    """
    archive = summary.archive
    made = summary.created_at or datetime.now(UTC)
    header = SummaryHeader(
        summary_id=summary.summary_id,
        generator=str(summary.provenance.get("generator") or "unknown"),
        model=summary.provenance.get("model"),
        created=made.astimezone(UTC).isoformat(timespec="seconds"),
        archived_range=(archive.start, archive.end),
        archive_sha256=archive.sha256,
        history_range=summary_history_range(replaced) if replaced is not None else None,
    )
    return render_summary_message(summary.text, header)


def _not_promotable(summary: Summary) -> str:
    return f"summary {summary.pk} is {summary.status}; only a finished, inactive summary can be promoted"


LIVE_SUMMARY_GONE = (
    "the summary this would replace is no longer in the live history "
    "(the session was compressed again or rewritten); nothing was changed"
)


def promote_summary(summary_id: int, user: Any = None, *, acknowledge_drift: bool = False) -> Session:
    """Put a summary into the live session in place of its archive's current summary message.

    A summary with open high-severity drift findings is refused (:class:`DriftNotAcknowledged`, naming them)
    unless ``acknowledge_drift``; the acknowledgement is audited (``summary.acknowledge_drift``).
    """
    with transaction.atomic():
        summary = Summary.objects.select_related("archive").filter(pk=summary_id).first()
        if summary is None:
            raise NotFound(f"no summary {summary_id}")
        if not summary.promotable:
            raise Conflict(_not_promotable(summary))
        archive = summary.archive
        session = Session.objects.select_for_update().get(pk=archive.session_id)
        active, found = _live_target(archive, session)
        if found is None:
            raise Conflict(LIVE_SUMMARY_GONE)
        high = blocking(open_findings(summary))
        if high and not acknowledge_drift:
            raise DriftNotAcknowledged(summary, high)
        if high:
            audit(user, "summary.acknowledge_drift", summary, after={"findings": [acknowledged_row(f) for f in high]})
        position, old_id = found
        keys = session.keys()
        [replaced] = Message.load([keys[position]])
        [new_key] = Message.store([_summary_message(summary, replaced)])
        session.replace_from(keys, keys[:position] + [new_key] + keys[position + 1 :])
        Summary.objects.filter(pk__in=[s.pk for s in active]).update(status=Summary.Status.SUPERSEDED)
        before = summary.status
        summary.status = Summary.Status.ACTIVE
        summary.promoted_by, summary.promoted_at = person(user), timezone.now()
        summary.save(update_fields=["status", "updated_at", "promoted_by", "promoted_at"])
        numbers = version_numbers(archive)
        replaced_pk = archive.summaries.filter(summary_id=old_id).values_list("pk", flat=True).first()
        audit(
            user,
            "summary.promote",
            summary,
            # the live summary before and after, by id and version number ("v2 replacing v1")
            before={"status": before, "live_summary": old_id, "summary_version": numbers.get(replaced_pk or 0)},
            after={
                "status": summary.status,
                "live_summary": summary.summary_id,
                "summary_version": numbers.get(summary.pk),
                "session": session.key,
                "position": position,
                "version": session.version,
            },
        )
        resolve_fixed_cases(summary, user)
    return session


def version_numbers(archive: Archive) -> dict[int, int]:
    """The archive's summaries numbered v1, v2, ... oldest first, by primary key (as the pages number them)."""
    rows = archive.summaries.order_by("created_at", "id").values_list("pk", flat=True)
    return {pk: n for n, pk in enumerate(rows, 1)}


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
    live_tokens, replaced = None, None
    if position is not None:
        row = session.entries.filter(position=position).values_list("message__tokens", "message__data").first()
        live_tokens, replaced = row if row is not None else (None, None)
    problem, reason = "", ""
    if not summary.promotable:
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
        new_tokens=count_tokens([_summary_message(summary, replaced)]),
        problem=problem,
        reason=reason,
    )
