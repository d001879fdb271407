"""A session and everything recorded about it (runs, archives, summaries, drift cases, messages) as JSON-ready data.

``manage.py export_session`` writes it; secrets are masked unless the caller reveals them (audited).
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from django.core.serializers.json import DjangoJSONEncoder
from django.db import connection, transaction
from django.utils import timezone

from agent_compression.messages import message_sha256

from ..audit import audit
from ..errors import ArchiveCorrupted, NotFound
from ..masking import mask_text, mask_value
from ..models import Archive, CompressionRun, DriftCase, Message, Session, Summary

FORMAT = "compression-console/session-export"
FORMAT_VERSION = 1
RUN_FIELDS = (
    "trigger", "status", "stage", "config", "focus_topic", "base_version", "base_length", "input_keys",
    "output_keys", "was_compressed", "applied", "tokens_before", "tokens_after", "stages", "boundaries", "pruned",
    "repair", "warnings", "error", "attempts", "worker", "created_at", "started_at", "heartbeat_at", "finished_at",
)  # fmt: skip
SUMMARY_FIELDS = (
    "summary_id", "status", "stage", "text", "error", "provenance", "facts", "drift_findings", "drift_checked_at",
    "created_at", "updated_at",
)  # fmt: skip


def export_session(key: str, *, reveal: bool = False, label: str = "export", user: Any = None) -> dict[str, Any]:
    """The session called ``key`` and everything recorded about it, as JSON-ready data (masked unless ``reveal``).

    A reveal is audited as ``user``'s (a page's download), or under ``label`` when there is none (a command).
    """
    with _snapshot():
        session = Session.objects.filter(key=key).first()
        if session is None:
            raise NotFound(mask_text(f"no session {key!r}"))
        data = _export(session)
    if reveal:
        after = {"command": f"{label} --reveal"} if user is None else {"download": label}
        audit(user, "secrets.reveal", session, after=after, label="" if user is not None else label)
        return data
    # JSON-ready first (dates as strings), so that every string is masked
    return mask_value(json.loads(json.dumps(data, cls=DjangoJSONEncoder)))


@contextmanager
def _snapshot() -> Iterator[None]:
    """One consistent view while a worker may be writing: a read-only repeatable-read transaction on
    PostgreSQL. Not on SQLite, where a transaction here would take the write lock (IMMEDIATE mode)."""
    if connection.vendor == "postgresql" and not connection.in_atomic_block:
        with transaction.atomic():
            with connection.cursor() as cursor:
                cursor.execute("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ READ ONLY")
            yield
    else:
        yield


def _export(session: Session) -> dict[str, Any]:
    keys: list[str] = session.keys()
    wanted: dict[str, None] = dict.fromkeys(keys)
    runs = list(
        CompressionRun.objects.filter(session=session).select_related("created_by").order_by("created_at", "id")
    )
    archives = list(Archive.objects.filter(session=session).order_by("created_at", "id"))
    summaries = list(
        Summary.objects.filter(archive__session=session)
        .select_related("parent", "created_by")
        .order_by("created_at", "id")
    )
    cases = list(
        DriftCase.objects.filter(session=session)
        .select_related("summary", "assignee", "opened_by")
        .prefetch_related("comments__author")
        .order_by("created_at", "id")
    )
    for run in runs:
        wanted.update(dict.fromkeys(run.input_keys or []))
        wanted.update(dict.fromkeys(run.output_keys or []))
    for archive in archives:
        wanted.update(dict.fromkeys(archive.message_keys or []))
    messages, missing, altered = _messages(list(wanted))
    return {
        "format": FORMAT,
        "format_version": FORMAT_VERSION,
        "exported_at": timezone.now(),
        "session": {
            "key": session.key,
            "channel": session.channel,
            "status": session.status,
            "metadata": session.metadata,
            "version": session.version,
            "message_count": session.message_count,
            "token_count": session.token_count,
            "last_consolidated": session.last_consolidated,
            "context_window_tokens": session.context_window_tokens,
            "ineffective_compressions": session.ineffective_compressions,
            "auto_compression_stopped": session.auto_compression_stopped,
            "created_at": session.created_at,
            "updated_at": session.updated_at,
            "message_keys": keys,
        },
        "runs": [_run(run) for run in runs],
        "archives": [_archive(archive) for archive in archives],
        "summaries": [_summary(summary) for summary in summaries],
        "drift_cases": [_case(case) for case in cases],
        "messages": messages,
        "integrity": {"missing_messages": missing, "altered_messages": altered},
    }


def _messages(keys: list[str]) -> tuple[dict[str, Any], list[str], list[str]]:
    found: dict[str, Any] = {}
    for i in range(0, len(keys), 2000):
        found.update(Message.objects.filter(sha256__in=keys[i : i + 2000]).values_list("sha256", "data"))
    messages = {key: found[key] for key in keys if key in found}
    missing = [key for key in keys if key not in found]
    altered = [key for key, data in messages.items() if message_sha256(data) != key]
    return messages, missing, altered


def _username(user: Any) -> str | None:
    return user.get_username() if user is not None else None


def _run(run: CompressionRun) -> dict[str, Any]:
    return {"id": run.pk, **{f: getattr(run, f) for f in RUN_FIELDS}, "created_by": _username(run.created_by)}


def _archive(archive: Archive) -> dict[str, Any]:
    try:
        archive.verified_messages()
        verified, problem = True, None
    except ArchiveCorrupted as exc:
        verified, problem = False, str(exc)
    return {
        "id": archive.pk,
        "run": archive.run_id,
        "start": archive.start,
        "end": archive.end,
        "message_keys": archive.message_keys,
        "sha256": archive.sha256,
        "inserted_id": archive.inserted_id,
        "created_at": archive.created_at,
        "verified": verified,
        "problem": problem,
    }


def _summary(summary: Summary) -> dict[str, Any]:
    return {
        "id": summary.pk,
        "archive": summary.archive_id,
        "run": summary.run_id,
        "parent": summary.parent.summary_id if summary.parent else None,
        **{f: getattr(summary, f) for f in SUMMARY_FIELDS},
        "created_by": _username(summary.created_by),
    }


def _case(case: DriftCase) -> dict[str, Any]:
    return {
        "id": case.pk,
        "summary": case.summary.summary_id,
        "severity": case.severity,
        "status": case.status,
        "findings": case.findings,
        "assignee": _username(case.assignee),
        "verdict": case.verdict,
        "opened_by": _username(case.opened_by),
        "created_at": case.created_at,
        "updated_at": case.updated_at,
        "comments": [
            {"author": _username(c.author), "body": c.body, "quote": c.quote, "created_at": c.created_at}
            for c in case.comments.all()
        ],
    }


def export_problems(data: dict[str, Any]) -> list[str]:
    problems = [f"archive {a['id']} is not verified: {a['problem']}" for a in data["archives"] if not a["verified"]]
    if data["integrity"]["missing_messages"]:
        problems.append(f"{len(data['integrity']['missing_messages'])} referenced message(s) are missing")
    if data["integrity"]["altered_messages"]:
        problems.append(f"{len(data['integrity']['altered_messages'])} stored message(s) no longer match their key")
    return problems
