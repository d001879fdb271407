import os
from pathlib import Path

from django.conf import settings
from django.contrib.auth.models import Group, User
from django.core.management import call_command
from django.core.management.base import BaseCommand

from console.roles import ROLE_PERMISSIONS

DEMO_PASSWORD = "demo-console"


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
        else:
            self.stdout.write(f"no sample sessions at {samples}; set DEMO_SAMPLES_DIR to load some")
        roles = ", ".join(ROLE_PERMISSIONS)
        self.stdout.write(self.style.SUCCESS(f"Demo users (password {DEMO_PASSWORD!r}): admin (staff), {roles}"))
