import contextlib
import os
from pathlib import Path

from django.conf import settings
from django.contrib.auth.models import Group, User
from django.core.management import call_command
from django.core.management.base import BaseCommand

from console.importers import read_session_file
from console.models import CompressionRun, Session, Summary
from console.roles import ROLE_PERMISSIONS
from console.services import InvalidSession

DEMO_PASSWORD = "demo-console"
#: the demo's drifted draft: the coding sample's constraint, and what the draft makes of it
DEMO_DRIFT_SESSION = "import:coding_export_job"
DEMO_CONSTRAINT = "but don't deploy; just run the job locally"
DEMO_INVERTED = "and deploy it to production now"
#: small enough that the samples (about 28k tokens each) really compress
DEMO_CONFIG = {"context_window_tokens": 8_000}


class Command(BaseCommand):
    help = "Create the demo admin and one user per role, and load the sample sessions when present."

    def handle(self, *args, **options):
        admin, created = User.objects.get_or_create(username="admin", defaults={"is_staff": True, "is_superuser": True})
        if created:
            admin.set_password(DEMO_PASSWORD)
            admin.save()
        for role in ROLE_PERMISSIONS:
            user, made = User.objects.get_or_create(username=role)
            if made:
                user.set_password(DEMO_PASSWORD)
                user.save()
            user.groups.add(Group.objects.get(name=role))
        samples = Path(os.environ.get("DEMO_SAMPLES_DIR") or settings.BASE_DIR.parent / "shared" / "samples")
        if samples.is_dir():
            call_command("import_sessions", str(samples), skip_existing=True, stdout=self.stdout, stderr=self.stderr)
            self.compress_demo_sessions(admin, samples)
            self.open_demo_drift_case()
        else:
            self.stdout.write(f"no sample sessions at {samples}; set DEMO_SAMPLES_DIR to load some")
        roles = ", ".join(ROLE_PERMISSIONS)
        self.stdout.write(self.style.SUCCESS(f"Demo users (password {DEMO_PASSWORD!r}): admin (staff), {roles}"))

    def compress_demo_sessions(self, admin: User, samples: Path) -> None:
        """Give each demo session that has no run one compression, so every page has something to show.

        Runs in this process (tasks eager), so the demo does not depend on a worker being up yet.
        """
        from console.celery import tasks_inline
        from console.runs import execute_run

        keys = []
        for path in sorted(samples.glob("*.json*")):
            with contextlib.suppress(InvalidSession):  # import_sessions reported it
                keys.append(read_session_file(path).key)
        with tasks_inline():
            for session in Session.objects.filter(key__in=keys, runs__isnull=True):
                run = CompressionRun.objects.create(
                    session=session, trigger=CompressionRun.Trigger.MANUAL, created_by=admin, config=DEMO_CONFIG
                )
                status = execute_run(run.pk)
                self.stdout.write(f"compressed {session.key}: run {run.pk} {status}")

    def open_demo_drift_case(self) -> None:
        """Give the drift review something to show: a draft that turns the coding sample's "don't deploy" into
        "deploy", labelled as written by hand for the demo, checked like any summary (which opens its case)."""
        from console.drift import check_summary_drift

        active = Summary.objects.filter(archive__session__key=DEMO_DRIFT_SESSION, status=Summary.Status.ACTIVE).first()
        if active is None or DEMO_CONSTRAINT not in active.text:
            return
        drifted, made = Summary.objects.get_or_create(
            summary_id=f"sum_demo_drift_{active.archive_id}",
            defaults={
                "archive": active.archive,
                "parent": active,
                "status": Summary.Status.DRAFT,
                "text": active.text.replace(DEMO_CONSTRAINT, DEMO_INVERTED, 1),
                "provenance": {"generator": "demo", "trigger": "demo", "note": "written by hand to show drift review"},
            },
        )
        if made:
            check_summary_drift(drifted.pk)
            for case in drifted.drift_cases.all():
                self.stdout.write(f"opened drift case {case.pk} on the demo's drifted draft {drifted.summary_id}")
