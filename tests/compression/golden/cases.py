"""Whole-pipeline runs over the repository's demo sessions, and the files their expected output is kept in.

Each case writes three files under ``expected/<case>/``:

- ``history.json``: the compressed history, one message per line-block (the JSON the caller gets back);
- ``summary.md``: the summary text (or ``(no summary)``);
- ``result.json``: tokens before and after, each stage's counts, the boundaries, the archive's range and
  checksum, what was pruned, the facts, the warnings (codes, params and messages).

Runs are deterministic: the extractive summarizer (or a scripted failing one), a fixed config, and the
two values the pipeline takes from the clock and from ``uuid4`` (the summary's ``created`` and ``id``)
pinned while a case runs, since both are written into the summary message and counted in its tokens.
Timings (each stage's ``ms``, the summarizer's ``latency_ms``) are left out.

Regenerate after an intended change, then review the diff like code::

    .venv/bin/python -m tests.compression.golden.regen      # or: make golden
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any
from unittest import mock

from agent_compression import CompressionConfig, CompressionResult, Compressor, ExtractiveSummarizer
from agent_compression.types import Summarizer
from tests.compression.builders import FakeSummarizer
from tests.samples import CODING, WECHAT, load_sample

EXPECTED = Path(__file__).resolve().parent / "expected"
FILES = ("history.json", "summary.md", "result.json")

#: what the pinned clock and uuid give while a case runs
FIXED_NOW = datetime(2026, 1, 1, tzinfo=UTC)
FIXED_UUID = uuid.UUID("00000000-0000-4000-8000-000000000000")


@dataclass(frozen=True)
class Case:
    name: str
    sample: str
    window: int = 4_000
    #: ``"last_user"``: the latest user message's text as the focus topic
    focus: str | None = None
    #: keep the sample's ``last_consolidated`` prefix, as the importer does
    keep_prefix: bool = False
    summarizer: Callable[[], Summarizer] = ExtractiveSummarizer
    config: dict[str, Any] = field(default_factory=dict)


CASES = [
    Case("coding", CODING),
    Case("coding_small_window", CODING, window=2_000),
    Case("wechat", WECHAT),
    Case("wechat_focus", WECHAT, focus="last_user", window=3_000),
    Case("wechat_summary_failed", WECHAT, summarizer=lambda: FakeSummarizer(fail=True)),
    Case("discord", "discord_design_review.jsonl"),
    Case("secrets_and_html", "secrets_and_html.json"),
    Case("slack_consolidated", "slack_oncall_platform.jsonl", window=16_000, keep_prefix=True),
]


@contextmanager
def pinned() -> Iterator[None]:
    """The pipeline's clock and summary id fixed, so the summary message (and its token count) repeat."""

    class Clock(datetime):
        @classmethod
        def now(cls, tz: Any = None) -> Clock:  # type: ignore[override]
            return cls.fromtimestamp(FIXED_NOW.timestamp(), tz)

    with mock.patch("agent_compression.pipeline.datetime", Clock), mock.patch("uuid.uuid4", return_value=FIXED_UUID):
        yield


def run(case: Case) -> CompressionResult:
    messages, header = load_sample(case.sample)
    config = CompressionConfig(context_window_tokens=case.window, **case.config)
    kwargs: dict[str, Any] = {}
    if case.focus == "last_user":
        kwargs["focus_topic"] = next(m["content"] for m in reversed(messages) if m.get("role") == "user")
    if case.keep_prefix:
        kwargs["keep_prefix"] = int(header.get("last_consolidated") or 0)
    with pinned():
        return Compressor(config, case.summarizer()).compress(messages, **kwargs)


def dumps(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, indent=1, sort_keys=True) + "\n"


def render(result: CompressionResult) -> dict[str, str]:
    """The expected-output files of one result, by file name."""
    data = result.to_dict()
    archive = data["archive"]
    report = {
        "was_compressed": data["was_compressed"],
        "tokens_before": data["tokens_before"],
        "tokens_after": data["tokens_after"],
        "summary_id": data["summary_id"],
        "summary": {k: v for k, v in (data["summary"] or {}).items() if k not in {"text", "latency_ms"}} or None,
        "boundaries": data["boundaries"],
        "archive": {k: v for k, v in archive.items() if k != "messages"} if archive else None,
        "stages": [{"name": s["name"], "counts": s["counts"]} for s in data["stages"]],
        "pruned": data["pruned"],
        "facts": data["facts"],
        "warning_codes": result.warning_codes(),
        "warnings": data["warnings"],
        "repair": data["repair"],
        "messages": len(result.messages),
    }
    return {
        "history.json": dumps(result.messages),
        "summary.md": (result.summary_text or "(no summary)").rstrip() + "\n",
        "result.json": dumps(report),
    }


def write(case: Case) -> list[Path]:
    folder = EXPECTED / case.name
    folder.mkdir(parents=True, exist_ok=True)
    written = []
    for name, text in render(run(case)).items():
        path = folder / name
        path.write_text(text, encoding="utf-8")
        written.append(path)
    return written
