"""``manage.py replay_drift_cases FILE``: does the current pipeline still drift on the regression set?"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from console.errors import ServiceError
from console.services.regression import FAILED, STILL_DRIFTS, MalformedRecord, read_records, replay_cases


class Command(BaseCommand):
    help = (
        "Re-summarize the originals of each case in a regression set (from manage.py export_drift_cases) with the "
        "current pipeline and summarizer, and check the new summary for drift. A case still drifts when the new "
        "summary has a finding at or above DRIFT_CASE_MIN_SEVERITY. Prints one line per case and a total; exits "
        "with status 1 when a case still drifts or its summarizer failed, so it can gate CI."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("file", help="the JSONL regression set, or - for standard input")
        parser.add_argument("--summarizer", help="extractive or openai (default: openai when a model is configured)")
        parser.add_argument("--model", help="the model to ask (default: SUMMARY_MODEL)")
        parser.add_argument("--prompt-version", help="the summarizer's prompt version (default: its current one)")

    def handle(self, *args: Any, file: str, **options: Any) -> None:
        records = self._read(file)
        if not records:
            self.stdout.write(f"{file} holds no drift cases; nothing to replay")
            return
        try:
            results = replay_cases(records, options["summarizer"], options["model"], options["prompt_version"])
        except ServiceError as exc:
            raise CommandError(str(exc)) from None
        for result in results:
            self.stdout.write(result.line())
        drifting = sum(r.outcome == STILL_DRIFTS for r in results)
        failed = sum(r.outcome == FAILED for r in results)
        fixed = len(results) - drifting - failed
        self.stdout.write(f"{len(results)} cases: {drifting} still drift, {fixed} fixed, {failed} failed")
        if drifting or failed:
            raise CommandError(f"{drifting + failed} of {len(results)} drift case(s) not fixed", returncode=1)

    def _read(self, file: str) -> list[dict[str, Any]]:
        try:
            if file == "-":
                return read_records(sys.stdin)
            with Path(file).expanduser().open(encoding="utf-8") as handle:
                return read_records(handle)
        except MalformedRecord as exc:
            raise CommandError(f"{file}, {exc}; nothing was replayed") from None
        except (OSError, UnicodeDecodeError) as exc:
            raise CommandError(f"cannot read {file}: {exc}") from None
