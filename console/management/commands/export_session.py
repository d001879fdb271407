import argparse
import json
import os
import tempfile
from pathlib import Path
from typing import Any

from django.core.management.base import BaseCommand, CommandError, DjangoHelpFormatter
from django.core.serializers.json import DjangoJSONEncoder

from console.errors import NotFound
from console.services.exports import FORMAT, FORMAT_VERSION, export_problems, export_session

LABEL = "manage.py export_session"
HELP = f"""\
Export one session with its runs, archives, summaries and drift cases as UTF-8 JSON
(Chinese and other text kept readable, not \\u-escaped). Secrets are masked in every
string (keys included), as the API and the pages show them; --reveal exports them raw
and writes an audit event. A masked message no longer hashes to its key.

Messages are stored once and referred to by key (the sha256 of the message's canonical
JSON, agent_compression.messages.message_sha256), so the export is compact:

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
        try:
            data = export_session(key, reveal=reveal, label=LABEL)
        except NotFound as exc:
            raise CommandError(str(exc)) from None
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
        for problem in export_problems(data):
            self.stderr.write(f"warning: {problem}")


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
