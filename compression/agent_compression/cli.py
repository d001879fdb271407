"""``python -m agent_compression compress FILE``: run the pipeline from the shell.

Reads a JSON array of chat messages, or an echo-agent JSONL session file
(a metadata line, then one message per line). Prints the result JSON on
stdout and a one-line report on stderr. Malformed input exits with code 2
and a message naming the problem.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from .config import CompressionConfig
from .pipeline import Compressor
from .session_file import InputError, load_session
from .summarize import OpenAISummarizer
from .types import Summarizer


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m agent_compression", description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command", required=True)
    c = sub.add_parser("compress", help="compress a session file and print the result JSON")
    c.add_argument("file", help="JSON array or echo-agent JSONL session file ('-' for stdin)")
    c.add_argument("--window", type=int, default=None, help="context window in tokens (default 128000)")
    c.add_argument("--trigger-ratio", type=float, default=None)
    c.add_argument("--focus", default=None, help="focus topic (default: the latest user message)")
    c.add_argument("--keep-prefix", type=int, default=None, help="messages never rewritten (default: metadata)")
    c.add_argument("--profile", choices=("openai", "strict"), default="openai")
    c.add_argument("--openai-base-url", default=os.environ.get("OPENAI_BASE_URL"))
    c.add_argument("--model", default=os.environ.get("SUMMARY_MODEL"))
    c.add_argument("--timeout", type=float, default=60.0)
    c.add_argument("--indent", type=int, default=None, help="indent the output JSON")
    return parser


def _summarizer(args: argparse.Namespace) -> Summarizer | None:
    if not args.openai_base_url:
        return None
    return OpenAISummarizer(
        base_url=args.openai_base_url,
        api_key=os.environ.get("OPENAI_API_KEY", "unused"),
        model=args.model or "gpt-4o-mini",
        timeout=args.timeout,
    )


def _latest_user_text(messages: list[dict[str, Any]]) -> str | None:
    for m in reversed(messages):
        if m.get("role") == "user" and isinstance(m.get("content"), str):
            return str(m["content"])[:500]
    return None


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point; returns the exit code."""
    args = _parser().parse_args(argv)
    try:
        text = sys.stdin.read() if args.file == "-" else Path(args.file).read_text(encoding="utf-8")
        messages, metadata = load_session(text)
        options: dict[str, Any] = {}
        if args.window is not None:
            options["context_window_tokens"] = args.window
        if args.trigger_ratio is not None:
            options["trigger_ratio"] = args.trigger_ratio
        config = CompressionConfig(**options)
    except (OSError, UnicodeDecodeError, InputError, ValueError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    keep_prefix = args.keep_prefix
    if keep_prefix is None:
        keep_prefix = int(metadata.get("last_consolidated") or 0)
    compressor = Compressor(config, _summarizer(args), profile=args.profile)
    result = compressor.compress(
        messages, focus_topic=args.focus or _latest_user_text(messages), keep_prefix=keep_prefix
    )
    json.dump(result.to_dict(), sys.stdout, ensure_ascii=False, indent=args.indent)
    sys.stdout.write("\n")
    summary = "ok" if result.summary_text is not None else ("failed" if result.was_compressed else "none")
    codes = ",".join(result.warning_codes()) or "none"
    print(
        f"tokens {result.tokens_before} -> {result.tokens_after}, messages {len(messages)} -> "
        f"{len(result.messages)}, compressed {'yes' if result.was_compressed else 'no'}, "
        f"summary {summary}, warnings {codes}",
        file=sys.stderr,
    )
    return 0
