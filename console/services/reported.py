"""Reported runs: a compression a runtime did in-process, stored so it can be audited like any other."""

from __future__ import annotations

import hashlib
import string
from typing import Any

from django.db import IntegrityError, transaction
from django.utils import timezone

from agent_compression.messages import canonical_json, messages_sha256
from agent_compression.summary_message import parse_summary_message

from ..audit import audit, person
from ..errors import Conflict, InvalidInput
from ..models import Archive, CompressionRun, Message, Session, Summary
from . import queue
from .sessions import ImportedSession, create_session
from .validation import check_messages

Status = CompressionRun.Status


def _find_slice(haystack: list[str], needle: list[str]) -> int | None:
    if not needle:
        return None
    first = needle[0]
    for start in range(len(haystack) - len(needle) + 1):
        if haystack[start] == first and haystack[start : start + len(needle)] == needle:
            return start
    return None


#: the characters an ``Idempotency-Key`` may hold: printable ASCII without spaces (a UUID fits, so does a ULID)
_KEY_CHARACTERS = frozenset(string.ascii_letters + string.digits + string.punctuation)
IDEMPOTENCY_KEY_MAX = 255


def check_idempotency_key(key: str) -> str:
    if not key or len(key) > IDEMPOTENCY_KEY_MAX or not set(key) <= _KEY_CHARACTERS:
        raise InvalidInput(
            f"Idempotency-Key must be 1 to {IDEMPOTENCY_KEY_MAX} printable ASCII characters without spaces "
            "(a UUID per report is usual)"
        )
    return key


def report_sha256(report: dict[str, Any]) -> str:
    """The fingerprint of a report: a key sent again with different content is refused, not replayed."""
    return hashlib.sha256(canonical_json(report).encode("utf-8")).hexdigest()


def record_reported_run_once(idempotency_key: str, *, user: Any, **report: Any) -> tuple[CompressionRun, bool]:
    """:func:`record_reported_run`, stored at most once per ``idempotency_key`` and caller.

    Returns ``(run, replayed)``: a key this caller sent before answers the run it stored then (a retry after a
    lost response), also when both requests arrive at once (the unique constraint lets one insert win; the
    other finds its run). The same key with another report is refused.
    """
    check_idempotency_key(idempotency_key)
    fingerprint = report_sha256(report)
    stored = _run_for_key(idempotency_key, user, fingerprint)
    if stored is not None:
        return stored, True
    try:
        return record_reported_run(**report, user=user, idempotency=(idempotency_key, fingerprint)), False
    except (IntegrityError, Conflict):
        # a concurrent request with this key committed first (its run, or the session both tried to create)
        stored = _run_for_key(idempotency_key, user, fingerprint)
        if stored is None:
            raise
        return stored, True


def _run_for_key(key: str, user: Any, fingerprint: str) -> CompressionRun | None:
    run = (
        CompressionRun.objects.select_related("session")
        .filter(idempotency_key=key, created_by=person(user), trigger=CompressionRun.Trigger.REPORTED)
        .first()
    )
    if run is not None and run.request_sha256 != fingerprint:
        raise InvalidInput(
            f"Idempotency-Key {key!r} was already used for another report (run {run.pk}); send a new key per report"
        )
    return run


def record_reported_run(
    *,
    session_key: str,
    input_messages: Any,
    output_messages: Any,
    archive_messages: Any = None,
    summary_text: str | None = None,
    provenance: dict[str, Any] | None = None,
    user: Any = None,
    idempotency: tuple[str, str] = ("", ""),
) -> CompressionRun:
    """Store a compression a runtime did in-process, so it can be audited like any other.

    The session is created from the output when it does not exist. When its live history is the
    reported input, or the start of it (the runtime added messages since it last reported), it
    becomes the output; otherwise it is left alone. ``idempotency``: the caller's key and the
    report's fingerprint, stored on the run (see :func:`record_reported_run_once`).
    """
    check_messages(input_messages)
    check_messages(output_messages)
    if archive_messages is not None:
        check_messages(archive_messages)
    if summary_text is not None and not summary_text.strip():
        raise InvalidInput("summary_text is empty; leave it out when there is no summary")
    with transaction.atomic():  # a rejected report writes nothing, stored messages included
        input_keys = Message.store(input_messages)
        output_keys = Message.store(output_messages)
        session = _reported_session(session_key, user)
        start = None
        archive_keys: list[str] = []
        if archive_messages is not None:
            archive_keys = Message.store(archive_messages)
            start = _find_slice(input_keys, archive_keys)
            if start is None:
                raise InvalidInput("archive_messages must be a contiguous, non-empty slice of input_messages")
        run = _reported_run_row(session, input_keys, output_keys, user, idempotency)
        _apply_if_current(run, session, input_keys, output_keys)
        summary = None
        if start is not None:
            archive = Archive.objects.create(
                session=session,
                run=run,
                start=start,
                end=start + len(archive_keys),
                message_keys=archive_keys,
                sha256=messages_sha256(archive_messages),
                inserted_id=_summary_id_in(output_messages) or "",
            )
            if summary_text is not None:
                summary = _reported_summary(run, archive, summary_text, provenance)
        elif summary_text is not None:
            raise InvalidInput("a summary_text needs the archive_messages it summarizes")
        audit(user, "run.report", run, after={"session": session.key, "applied": run.applied})
    if summary is not None:
        queue.send_on_commit(queue.CHECK_DRIFT, summary.pk)
    return run


def _reported_session(key: str, user: Any) -> Session:
    """The session ``key``, locked; created empty when it does not exist yet."""
    session = Session.objects.select_for_update().filter(key=key).first()
    if session is None:
        session = create_session(ImportedSession(key=key, messages=[], metadata={}), user=user)
        session = Session.objects.select_for_update().get(pk=session.pk)
    return session


def _reported_run_row(
    session: Session, input_keys: list[str], output_keys: list[str], user: Any, idempotency: tuple[str, str]
) -> CompressionRun:
    now = timezone.now()
    return CompressionRun.objects.create(
        idempotency_key=idempotency[0],
        request_sha256=idempotency[1],
        session=session,
        trigger=CompressionRun.Trigger.REPORTED,
        status=Status.SUCCEEDED if input_keys != output_keys else Status.NOTHING,
        created_by=person(user),
        input_keys=input_keys,
        output_keys=output_keys,
        base_version=session.version,
        base_length=session.message_count,
        was_compressed=input_keys != output_keys,
        tokens_before=Message.token_total(input_keys),
        tokens_after=Message.token_total(output_keys),
        started_at=now,
        finished_at=now,
    )


def _apply_if_current(run: CompressionRun, session: Session, input_keys: list[str], output_keys: list[str]) -> None:
    """The output becomes the live history when that is the reported input or its start (or empty); else a warning.

    A runtime that only reports sends, each time, its history as it grew since the last report: the live
    history (the previous output) is then where the reported input starts.
    """
    current = session.keys()
    consolidated = session.last_consolidated
    if current and input_keys[: len(current)] != current:
        not_applied = "the session's live history is not the reported input; it was left unchanged"
    elif output_keys[:consolidated] != current[:consolidated]:
        not_applied = f"the output rewrites the first {consolidated} (consolidated) messages; it was not applied"
    else:
        not_applied = ""
        session.replace_from(current, output_keys)
        run.applied = True
    if not_applied:
        run.warnings = [{"code": "not_applied", "message": not_applied}]
    run.save(update_fields=["applied", "warnings"])


def _reported_summary(run: CompressionRun, archive: Archive, text: str, provenance: Any) -> Summary:
    checked = _reported_provenance(provenance)
    summary_id = archive.inserted_id or f"rep_{run.pk}_{archive.pk}"
    stored = Summary.objects.filter(summary_id=summary_id).values_list("run_id", flat=True).first()
    if stored is not None:
        raise Conflict(
            f"summary {summary_id} was already reported (run {stored}); report each compression once "
            "(an Idempotency-Key makes a retry safe)"
        )
    return Summary.objects.create(
        archive=archive,
        run=run,
        summary_id=summary_id,
        status=Summary.Status.ACTIVE if run.applied else Summary.Status.DRAFT,
        text=text,
        provenance=checked,
        created_by=run.created_by,
    )


_PROVENANCE_KEYS = (
    "generator",
    "model",
    "endpoint_host",
    "prompt_version",
    "prompt_hash",
    "focus_topic",
    "input_tokens",
    "output_tokens",
    "latency_ms",
)


def _reported_provenance(data: Any) -> dict[str, Any]:
    if data is not None and not isinstance(data, dict):
        raise InvalidInput("provenance must be a JSON object")
    data = data or {}
    unknown = sorted(set(data) - set(_PROVENANCE_KEYS))
    if unknown:
        raise InvalidInput(f"unknown provenance fields: {', '.join(unknown)}; known: {', '.join(_PROVENANCE_KEYS)}")
    out = {key: data.get(key) for key in _PROVENANCE_KEYS}
    out["generator"] = out["generator"] or "reported"
    out["trigger"] = CompressionRun.Trigger.REPORTED
    return out


def _summary_id_in(messages: list[dict[str, Any]]) -> str | None:
    for message in messages:
        parsed = parse_summary_message(message) if isinstance(message, dict) else None
        if parsed and parsed[0].get("id"):
            return parsed[0]["id"][:64]
    return None
