"""The demo ``make run`` starts with: users for each role, and the project's own sessions with real work done on them.

Everything runs in this process (tasks inline), so the demo does not wait for a worker. Running it again changes
nothing: each step looks for what it made before.
"""

import contextlib
import os
from pathlib import Path
from typing import Any

from django.contrib.auth.models import Group, User
from django.core.management import call_command
from django.core.management.base import BaseCommand, CommandError

from agent_compression.facts import pinned_facts_of
from console.celery import tasks_inline
from console.errors import InvalidInput
from console.importers import read_session_file
from console.models import CompressionRun, DriftCase, Session, Summary
from console.roles import ROLE_PERMISSIONS
from console.services.drift import add_comment, check_summary_drift, update_drift_case
from console.services.runs import execute_run
from console.services.sessions import ImportedSession, append_messages, create_session
from console.services.summaries import execute_resummarize, promote_summary, request_resummarize

DEMO_PASSWORD = "demo-console"
#: the project's demo sessions (console/demo/make_demo.py writes them)
DEMO_DIR = Path(__file__).resolve().parents[2] / "demo" / "sessions"
SUFFIXES = {".json", ".jsonl"}
#: what every session setup_demo loads carries in its metadata
DEMO_LABEL = {"demo": True}
#: small enough that the demo sessions really compress
DEMO_CONFIG = {"context_window_tokens": 8_000}
#: the long session, replayed in this many parts as a runtime would append them: compressed once per part
GROWING_FILE = "slack_oncall_platform.jsonl"
GROWING_PARTS = 4

#: the drift stories: (session, passage of its active summary, what a hand-written draft makes of it; "" drops
#: the lines that hold it)
OPEN_DRIFT = (
    "import:coding_export_job",
    "but don't deploy; just run the job locally",
    "and deploy it to production now",
)
CONFIRMED_DRIFT = ("wechat:wxid_demo01", "周三上午的评审会不要动，其他会议可以挪。", "周三上午的评审会也可以挪。")
RESOLVED_DRIFT = ("slack:oncall-platform", "Do not restart payments-db during business hours.", "")
#: the archive re-summarized once, so Compare and Promote have two versions
RESUMMARIZED = ("import:coding_export_job", "the batch size and the local dry runs")


def session_files(folder: Path) -> list[Path]:
    return sorted(p for p in folder.iterdir() if p.suffix in SUFFIXES and p.is_file())


class Command(BaseCommand):
    help = (
        "Create the demo admin and one user per role; load the demo sessions (console/demo/sessions, plus "
        "DEMO_SAMPLES_DIR when set), compress them, re-summarize one archive and leave drift cases to review."
    )

    def handle(self, *args: Any, **options: Any) -> None:
        admin, users = self.create_users()
        files = session_files(DEMO_DIR)
        extra = os.environ.get("DEMO_SAMPLES_DIR", "").strip()
        if extra:
            folder = Path(extra)
            if folder.is_dir():
                files += session_files(folder)
            else:
                self.stdout.write(f"no sample sessions at {folder} (DEMO_SAMPLES_DIR); loading the built-in demo only")
        growing = DEMO_DIR / GROWING_FILE
        imported = [p for p in files if p != growing]
        with contextlib.suppress(CommandError):  # import_sessions reported the file at fault; load the rest
            call_command(
                "import_sessions", *map(str, imported), skip_existing=True, stdout=self.stdout, stderr=self.stderr
            )
        keys = []
        for path in imported:
            with contextlib.suppress(InvalidInput):  # import_sessions reported it
                keys.append(read_session_file(path).key)
        with tasks_inline():
            self.label(keys)
            self.compress_once(admin, keys)
            self.replay_growing_session(admin, growing)
            self.resummarize(users["operator"])
            self.open_drift_case()
            self.confirmed_drift_case(users["reviewer"], users["operator"])
            self.resolved_drift_case(users["reviewer"], users["operator"])
        self.stdout.write(self.style.SUCCESS(users_line()))

    def create_users(self) -> tuple[User, dict[str, User]]:
        admin, created = User.objects.get_or_create(username="admin", defaults={"is_staff": True, "is_superuser": True})
        if created:
            admin.set_password(DEMO_PASSWORD)
            admin.save()
        users = {}
        for role in ROLE_PERMISSIONS:  # the admin role's group goes to the superuser admin
            user, made = User.objects.get_or_create(username=role)
            if made:
                user.set_password(DEMO_PASSWORD)
                user.save()
            user.groups.add(Group.objects.get(name=role))
            users[role] = user
        return admin, users

    def label(self, keys: list[str]) -> None:
        """Mark the loaded sessions as demo data (a JSON array file has no header to say so itself)."""
        for session in Session.objects.filter(key__in=keys):
            if session.metadata.get("demo") is None:
                Session.objects.filter(pk=session.pk).update(metadata={**session.metadata, **DEMO_LABEL})

    def compress(self, session: Session, user: User, config: dict[str, Any] | None) -> CompressionRun:

        run = CompressionRun.objects.create(
            session=session, trigger=CompressionRun.Trigger.MANUAL, created_by=user, config=config or {}
        )
        status = execute_run(run.pk)
        self.stdout.write(f"compressed {session.key}: run {run.pk} {status}")
        return run

    def compress_once(self, admin: User, keys: list[str]) -> None:
        """Give each loaded session that has no run one compression, so every page has something to show."""
        for session in Session.objects.filter(key__in=keys, runs__isnull=True):
            self.compress(session, admin, DEMO_CONFIG)

    def replay_growing_session(self, admin: User, path: Path) -> None:
        """Load the long session in parts, as its runtime appended them: each part pushes it past its trigger, so
        it is compressed once per part (automatically when AUTO_COMPRESS is on) and each summary is written
        from the previous one plus what came since."""

        data = read_session_file(path)
        if Session.objects.filter(key=data.key).exists():
            return
        messages = data.messages
        cuts = [part_start(messages, len(messages) * n // GROWING_PARTS) for n in range(1, GROWING_PARTS)]
        parts = [messages[a:b] for a, b in zip([0, *cuts], [*cuts, len(messages)], strict=True)]
        session = create_session(
            ImportedSession(
                key=data.key,
                messages=parts[0],
                metadata={**data.metadata, **DEMO_LABEL},
                status=data.status,
                context_window_tokens=data.context_window_tokens,
            )
        )
        self.stdout.write(
            f"imported {path.name}: {session.key} (the first {len(parts[0])} of {len(messages)} messages)"
        )
        self.compress(session, admin, None)
        for part in parts[1:]:
            session, run = append_messages(session.key, part)
            if run is None:  # AUTO_COMPRESS is off: compress it by hand, as an operator would
                run = self.compress(session, admin, None)
            else:
                execute_run(run.pk)  # done already if its task ran when the append committed
                run.refresh_from_db()
                self.stdout.write(f"appended {len(part)} messages to {session.key}: run {run.pk} {run.status}")

    def resummarize(self, operator: User) -> None:
        """A second version of one archive's summary, so Compare and Promote have something to work on."""

        key, focus = RESUMMARIZED
        active = active_summary(key)
        if active is None or active.archive.summaries.filter(provenance__trigger="resummarize").exists():
            return
        summary = request_resummarize(active.archive_id, summarizer="extractive", focus_topic=focus, user=operator)
        summary = finished(summary)
        self.stdout.write(f"re-summarized archive {active.archive_id} of {key}: summary {summary.pk} {summary.status}")

    def drifted_draft(self, story: tuple[str, str, str], name: str) -> Summary | None:
        """A draft of the session's active summary with one passage changed by hand (labelled as the demo's),
        checked like any summary: the check opens its case. None when it exists already or cannot be made."""

        key, passage, replacement = story
        active = active_summary(key)
        if active is None or passage not in active.text:
            return None
        text = rewrite(active.text, passage, replacement)
        # its pinned facts are those its text lists, with their sources where the active summary had them
        sources = {f.get("text"): f for f in active.facts or []}
        facts = [sources.get(f.text) or f.to_dict() for f in pinned_facts_of(text)]
        drifted, made = Summary.objects.get_or_create(
            summary_id=f"sum_demo_{name}_{active.archive_id}",
            defaults={
                "archive": active.archive,
                "parent": active,
                "status": Summary.Status.DRAFT,
                "text": text,
                "facts": facts,
                "provenance": {"generator": "demo", "trigger": "demo", "note": "written by hand to show drift review"},
            },
        )
        if not made:
            return None
        check_summary_drift(drifted.pk)
        for case in drifted.drift_cases.all():
            self.stdout.write(f"opened drift case {case.pk} on the demo's drifted draft {drifted.summary_id}")
        return drifted

    def open_drift_case(self) -> None:
        """Left open for a reviewer: the coding session's "don't deploy" turned into "deploy"."""
        self.drifted_draft(OPEN_DRIFT, "drift")

    def confirmed_drift_case(self, reviewer: User, operator: User) -> None:
        """Reviewed and confirmed, with a discussion: the WeChat session's meeting that must not move, moved."""

        drifted = self.drifted_draft(CONFIRMED_DRIFT, "confirmed")
        case = drifted.drift_cases.first() if drifted else None
        if case is None:
            return
        update_drift_case(case.pk, {"claim": True}, reviewer)
        add_comment(
            case,
            "The user said twice that this review must stay where it is. @operator did the runtime act on this draft?",
            CONFIRMED_DRIFT[2],
            reviewer,
        )
        add_comment(case, "No, it was never promoted; the live summary still has the original wording.", "", operator)
        case = update_drift_case(
            case.pk,
            {
                "status": DriftCase.Status.CONFIRMED,
                "verdict": "Inverts the user's constraint (#5): the review may not move.",
            },
            reviewer,
        )
        self.stdout.write(f"drift case {case.pk}: {case.status}, with a verdict and comments")

    def resolved_drift_case(self, reviewer: User, operator: User) -> None:
        """The whole loop: a draft that drops a constraint goes live, a reviewer confirms the drift, an operator
        re-summarizes from the archive and promotes the clean version, which resolves the case."""

        drifted = self.drifted_draft(RESOLVED_DRIFT, "resolved")
        case = drifted.drift_cases.first() if drifted else None
        if drifted is None or case is None:
            return
        promote_summary(drifted.pk, operator, acknowledge_drift=True)  # the mistake the loop then fixes
        update_drift_case(
            case.pk,
            {"claim": True, "status": DriftCase.Status.CONFIRMED, "verdict": "Drops the payments-db rule (#25)."},
            reviewer,
        )
        fixed = finished(request_resummarize(drifted.archive_id, summarizer="extractive", user=operator))
        promote_summary(fixed.pk, operator)
        case.refresh_from_db()
        self.stdout.write(f"drift case {case.pk}: {case.status} by promoting summary {fixed.pk}")


def users_line() -> str:
    """Who can log in (the admin user holds the admin role, so it is named once)."""
    roles = ", ".join(role for role in ROLE_PERMISSIONS if role != "admin")
    return f"Demo users (password {DEMO_PASSWORD!r}): admin (superuser, admin role), {roles}"


def finished(summary: Summary) -> Summary:
    """A queued re-summarize, done (by its task if that ran when the request committed, else here)."""

    execute_resummarize(summary.pk)
    summary.refresh_from_db()
    return summary


def active_summary(key: str) -> Summary | None:
    """The active summary of the session's latest archive."""
    return (
        Summary.objects.filter(archive__session__key=key, status=Summary.Status.ACTIVE)
        .select_related("archive")
        .order_by("-archive_id")
        .first()
    )


def rewrite(text: str, passage: str, replacement: str) -> str:
    if replacement:
        return text.replace(passage, replacement)
    return "\n".join(line for line in text.splitlines() if passage not in line)


def part_start(messages: list[dict[str, Any]], near: int) -> int:
    """The index of the first user message at or after ``near``: a part ends with a finished turn."""
    for i in range(near, len(messages)):
        if messages[i].get("role") == "user":
            return i
    return len(messages)
