from django.core.management.base import BaseCommand, CommandError

from console.apikeys import create_api_key, revoke_api_key
from console.errors import ServiceError
from console.roles import ROLE_PERMISSIONS

LABEL = "manage.py create_api_key"


class Command(BaseCommand):
    help = (
        "Create an API key for an agent runtime: a dedicated user (api:NAME, no password) in the role's group, "
        "and a key of which only the sha256 is stored. The key is printed once, alone on the last line "
        "(`... | tail -1`). --revoke NAME revokes a key instead."
    )

    def add_arguments(self, parser):
        parser.add_argument("--name", help="who uses the key, e.g. the runtime's host (letters, digits, . @ + - _)")
        parser.add_argument("--role", help=f"one of: {', '.join(ROLE_PERMISSIONS)}")
        parser.add_argument("--revoke", metavar="NAME", help="revoke the key called NAME (it stops working at once)")

    def handle(self, *args, name: str | None, role: str | None, revoke: str | None, **options):
        try:
            if revoke is not None:
                if name or role:
                    raise CommandError("--revoke takes no --name or --role")
                self.revoke(revoke.strip())
            else:
                if not role:
                    raise CommandError(f"--role is required: one of {', '.join(ROLE_PERMISSIONS)}")
                self.create(name or "", role)
        except ServiceError as exc:
            raise CommandError(str(exc)) from None

    def create(self, name: str, role: str) -> None:
        api_key, key = create_api_key(name, role, label=LABEL)
        self.stdout.write(f"Created API key {api_key.name!r}: it acts as user {api_key.user} with role {role}.")
        self.stdout.write("Only its sha256 is stored, so it is shown this once: keep it in a secret store.")
        self.stdout.write("Send it as `Authorization: Bearer <key>`; revoke it with `create_api_key --revoke NAME`.")
        self.stdout.write(key)

    def revoke(self, name: str) -> None:
        api_key, changed = revoke_api_key(name, label=LABEL)
        if changed:
            self.stdout.write(f"Revoked API key {name!r}; requests with it now get 401.")
        else:
            self.stdout.write(f"API key {name!r} was already revoked ({api_key.revoked_at:%Y-%m-%d %H:%M %Z}).")
