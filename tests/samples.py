"""The session files the tests read: the project's own demo data in ``console/demo/sessions/``.

``console/demo/make_demo.py`` writes them (its docstrings say which properties the tests rely on). A missing
file fails the test that asked for it; nothing here is looked for outside the repository.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from agent_compression.session_file import load_session

SAMPLES = Path(__file__).resolve().parents[1] / "console" / "demo" / "sessions"
CODING = "coding_export_job.json"
WECHAT = "wechat_wxid_demo01.jsonl"


def sample_path(name: str) -> Path:
    """The path of one sample file; raises (never skips) when it is missing."""
    path = SAMPLES / name
    if not path.is_file():
        raise FileNotFoundError(f"sample {name} is missing from {SAMPLES} (console/demo/make_demo.py writes it)")
    return path


def load_sample(name: str) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    """``(messages, header)`` of one sample, read as the importer reads it."""
    return load_session(sample_path(name).read_text(encoding="utf-8"))


def sample_messages(name: str) -> list[dict[str, Any]]:
    return load_sample(name)[0]
