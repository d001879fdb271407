import argparse
import json
import os
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from django.core.management.base import BaseCommand, CommandError, DjangoHelpFormatter
from django.core.serializers.json import DjangoJSONEncoder
from django.db import connection, transaction
from django.utils import timezone

from compression.messages import message_sha256
from console.audit import audit
from console.errors import ArchiveCorrupted
from console.masking import mask_text, mask_value
from console.models import Archive, CompressionRun, DriftCase, Message, Session, Summary

LABEL = "manage.py export_session"
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

HELP = f"""\
Export one session with its runs, archives, summaries and drift cases as UTF-8 JSON
(Chinese and other text kept readable, not \\u-escaped). Secrets are masked in every
string (keys included), as the API and the pages show them; --reveal exports them raw
and writes an audit event. A masked message no longer hashes to its key.

Messages are stored once and referred to by key (the sha256 of the message's canonical
JSON, compression.messages.message_sha256), so the export is compact:

  format, format_version   "{FORMAT}", {FORMAT_VERSION}
  session                  key, channel, status, metadata, version, message_count,
                           token_count, last_consolidated, context_window_tokens, ...,
                           message_keys (the live history, in order)
  runs[]                   every run, oldest first: trigger, status, config, focus_topic,
                           base_version/base_length, input_keys and output_keys (the histories
                           before and after), stages, boundaries, pruned, repair, warnings,
                           error, tokens, who started it, timestamps
  archives[]               run, [start, end), message_keys, sha256, inserted_id, and
                           verified: whether the stored originals still match sha256
                           (problem says why when they do not)
  summaries[]              archive, run, summary_id, parent (a summary_id), status, text,
                           provenance, facts, drift_findings
  drift_cases[]            summary (a summary_id), severity, status, findings, assignee,
                           verdict, comments[]
  messages                 {{key: message}} for every key above; a history is
                           [messages[k] for k in keys]
  integrity                missing_messages and altered_messages (stored content that no
                           longer hashes to its key); both empty for a healthy export
"""


class Formatter(DjangoHelpFormatter, argparse.RawDescriptionHelpFormatter):
    pass


class Command(BaseCommand):
    help = HELP

    def create_parser(self, prog_name: str, subcommand: str, **kwargs: Any) -> Any:
        return super().create_parser(prog_name, subcommand, formatter_class=Formatter, **kwargs)

    def add_arguments(self, parser):
        parser.add_argument("key", help="the session's key, e.g. wechat:wxid_demo01")
        parser.add_argument(
            "--output", "-o", type=Path, help="write to this file (readable by you only) instead of standard output"
        )
        parser.add_argument("--reveal", action="store_true", help="export secrets unmasked (audited)")

    def handle(self, *args, key: str, output: Path | None, reveal: bool = False, **options):
        data = export_session(key, reveal=reveal)
        text = json.dumps(data, cls=DjangoJSONEncoder, ensure_ascii=False, indent=2)
        if output is None:
            self.stdout.write(text)
        else:
            write_atomically(output, text + "\n")
            self.stdout.write(
                f"wrote {output}: session {data['session']['key']}, {len(data['runs'])} run(s), "
                f"{len(data['archives'])} archive(s), "
                f"{len(data['summaries'])} summary(ies), {len(data['drift_cases'])} drift case(s), "
                f"{len(data['messages'])} distinct message(s)"
            )
        for problem in _problems(data):
            self.stderr.write(f"warning: {problem}")


def export_session(key: str, *, reveal: bool = False) -> dict[str, Any]:
    """The session called ``key`` and everything recorded about it, as JSON-ready data (masked unless ``reveal``)."""
    with _snapshot():
        session = Session.objects.filter(key=key).first()
        if session is None:
            raise CommandError(mask_text(f"no session {key!r}"))
        data = _export(session)
    if reveal:
        audit(None, "secrets.reveal", session, after={"command": f"{LABEL} --reveal"}, label=LABEL)
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


def _problems(data: dict[str, Any]) -> list[str]:
    problems = [f"archive {a['id']} is not verified: {a['problem']}" for a in data["archives"] if not a["verified"]]
    if data["integrity"]["missing_messages"]:
        problems.append(f"{len(data['integrity']['missing_messages'])} referenced message(s) are missing")
    if data["integrity"]["altered_messages"]:
        problems.append(f"{len(data['integrity']['altered_messages'])} stored message(s) no longer match their key")
    return problems


def write_atomically(path: Path, text: str) -> None:
    """Write the whole file or nothing: a half-written export must not pass for a complete one."""
    path = path.expanduser()
    if path.is_dir():
        raise CommandError(f"{path} is a directory; name a file")
    if not path.parent.is_dir():
        raise CommandError(f"{path.parent} does not exist")
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            handle.write(text)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
