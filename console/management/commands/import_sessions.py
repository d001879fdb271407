from pathlib import Path

from django.core.management.base import BaseCommand, CommandError

from console.importers import read_session_file
from console.services import InvalidSession, create_session


class Command(BaseCommand):
    help = "Import echo-agent session files (.jsonl), JSON message arrays (.json), or a directory of them."

    def add_arguments(self, parser):
        parser.add_argument("paths", nargs="+", type=Path)
        parser.add_argument("--skip-existing", action="store_true", help="report existing keys as skipped, not failed")

    def handle(self, *args, paths: list[Path], skip_existing: bool, **options):
        files: list[Path] = []
        for path in paths:
            if path.is_dir():
                for child in sorted(path.iterdir()):
                    if child.suffix in {".jsonl", ".json"}:
                        files.append(child)
                    else:
                        self.stdout.write(f"ignored  {child.name}: not a .jsonl or .json file")
            elif path.exists():
                files.append(path)
            else:
                raise CommandError(f"{path} does not exist")
        failed = 0
        for path in files:
            try:
                data = read_session_file(path)
                if skip_existing and _exists(data.key):
                    self.stdout.write(f"skipped  {path.name}: session {data.key} already exists")
                    continue
                session = create_session(data)
            except InvalidSession as exc:
                failed += 1
                self.stderr.write(f"failed   {path.name}: {exc}")
                continue
            self.stdout.write(
                f"imported {path.name}: {session.key} ({session.message_count} messages, {session.token_count} tokens)"
            )
        if failed:
            raise CommandError(f"{failed} of {len(files)} file(s) could not be imported")


def _exists(key: str) -> bool:
    from console.models import Session

    return Session.objects.filter(key=key).exists()
