from pathlib import Path

from django.core.management.base import BaseCommand, CommandError
from django.db import DataError, IntegrityError

from console.errors import Conflict, ServiceError
from console.importers import read_session_file
from console.models import Session
from console.services.sessions import create_session

SUFFIXES = {".jsonl", ".json"}


class Command(BaseCommand):
    help = (
        "Import echo-agent session files (.jsonl), session objects or message arrays (.json), or directories of "
        "them (not recursive). Each file is one transaction, reported as imported, skipped, failed (and why) or "
        "ignored; the command fails when any file failed. A header may set key, metadata, status, "
        "last_consolidated and context_window_tokens."
    )

    def add_arguments(self, parser):
        parser.add_argument("paths", nargs="+", type=Path)
        parser.add_argument("--skip-existing", action="store_true", help="report existing keys as skipped, not failed")

    def handle(self, *args, paths: list[Path], skip_existing: bool, **options):
        self.ignored = 0
        files = self.collect(paths)
        counts = {"imported": 0, "skipped": 0, "failed": 0}
        for path in files:
            counts[self.import_file(path, skip_existing)] += 1
        counts["ignored"] = self.ignored
        self.stdout.write("done: " + ", ".join(f"{what} {n}" for what, n in counts.items()))
        if counts["failed"]:
            raise CommandError(f"{counts['failed']} of {len(files)} file(s) could not be imported")

    def collect(self, paths: list[Path]) -> list[Path]:
        """The files to import, in order; anything passed over is reported as ignored."""
        files: list[Path] = []
        seen: set[Path] = set()
        for path in paths:
            if not path.exists():
                raise CommandError(f"{path} does not exist")
            if path.is_dir():
                children = sorted(path.iterdir())
                if not children:
                    self.ignore(f"{path}: the directory is empty")
                for child in children:
                    if child.is_dir():
                        self.ignore(f"{child.name}/: a directory (directories are not searched)")
                    elif child.suffix not in SUFFIXES:
                        self.ignore(f"{child.name}: not a .jsonl or .json file")
                    else:
                        files.append(child)
            else:
                files.append(path)
        unique = []
        for path in files:
            if path.resolve() in seen:
                self.ignore(f"{path.name}: named twice")
                continue
            seen.add(path.resolve())
            unique.append(path)
        return unique

    def ignore(self, why: str) -> None:
        self.ignored += 1
        self.stdout.write(f"ignored  {why}")

    def import_file(self, path: Path, skip_existing: bool) -> str:
        try:
            data = read_session_file(path)
            if skip_existing and Session.objects.filter(key=data.key).exists():
                self.stdout.write(f"skipped  {path.name}: session {data.key} already exists")
                return "skipped"
            session = create_session(data)
        except Conflict as exc:
            if skip_existing:  # created by someone else since the check above
                self.stdout.write(f"skipped  {path.name}: {exc}")
                return "skipped"
            self.stderr.write(f"failed   {path.name}: {exc} (--skip-existing passes over existing sessions)")
            return "failed"
        except ServiceError as exc:
            self.stderr.write(f"failed   {path.name}: {exc}")
            return "failed"
        except (DataError, IntegrityError) as exc:  # e.g. PostgreSQL refuses NUL characters in text
            self.stderr.write(f"failed   {path.name}: the database refused it: {exc}")
            return "failed"
        self.stdout.write(
            f"imported {path.name}: {session.key} ({session.message_count} messages, {session.token_count} tokens)"
        )
        return "imported"
