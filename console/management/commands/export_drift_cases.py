"""``manage.py export_drift_cases``: the drift regression set as JSONL."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from django.core.management.base import BaseCommand, CommandParser

from console.audit import audit
from console.management.commands.export_session import write_atomically
from console.models import DriftCase
from console.services.regression import export_cases, exportable_cases

LABEL = "manage.py export_drift_cases"


class Command(BaseCommand):
    help = (
        "Write every confirmed or resolved drift case as one JSON record a line (JSONL): the archived originals, "
        "the bad summary, the findings and the corrected summary. Secrets are masked unless --reveal is given. "
        "A case whose archive no longer matches its checksum is skipped with a warning. "
        "manage.py replay_drift_cases reads the file."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument(
            "--output", "-o", type=Path, help="write to this file (readable by you only) instead of standard output"
        )
        parser.add_argument("--reveal", action="store_true", help="export secrets unmasked (audited for each case)")

    def handle(self, *args: Any, output: Path | None, reveal: bool, **options: Any) -> None:
        def skipped(case: DriftCase, reason: str) -> None:
            self.stderr.write(f"warning: drift case {case.pk} skipped: {reason}")

        lines, cases = [], []
        for record in export_cases(exportable_cases(), reveal=reveal, on_skip=skipped):
            line = json.dumps(record, ensure_ascii=False)
            if output is None:
                self.stdout.write(line)
            else:
                lines.append(line + "\n")
            cases.append(record["case"])
        if output is not None:
            write_atomically(output, "".join(lines))
        if reveal:
            for pk in cases:
                audit(None, "secrets.reveal", DriftCase(pk=pk), after={"command": f"{LABEL} --reveal"}, label=LABEL)
        where = f" to {output}" if output is not None else ""
        masked = "unmasked" if reveal else "secrets masked"
        self.stderr.write(f"exported {len(cases)} drift case(s){where} ({masked})")
