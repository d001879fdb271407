"""Readers for session files: echo-agent JSONL sessions and plain JSON message arrays."""

from __future__ import annotations

import json
from pathlib import Path

from .services import ImportedSession, InvalidSession


def read_session_file(path: Path) -> ImportedSession:
    """Parse one file; raise InvalidSession naming the line or the problem."""
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise InvalidSession(f"cannot read {path.name}: {exc}") from None
    if path.suffix == ".jsonl":
        return _read_jsonl(path, text)
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        raise InvalidSession(f"{path.name} is not valid JSON: {exc}") from None
    if isinstance(data, dict) and isinstance(data.get("messages"), list):
        metadata = data.get("metadata") or {}
        return ImportedSession(key=str(data.get("key") or path.stem), messages=data["messages"], metadata=metadata)
    if not isinstance(data, list):
        raise InvalidSession(f"{path.name} is neither a JSON array of messages nor a session object")
    return ImportedSession(key=f"import:{path.stem}", messages=data, metadata={"source_file": path.name})


def _read_jsonl(path: Path, text: str) -> ImportedSession:
    header: dict = {}
    messages = []
    for number, line in enumerate(text.splitlines(), start=1):
        if not line.strip():
            continue
        try:
            item = json.loads(line)
        except json.JSONDecodeError as exc:
            raise InvalidSession(f"{path.name} line {number} is not valid JSON: {exc.msg}") from None
        if not isinstance(item, dict):
            raise InvalidSession(f"{path.name} line {number} is not a JSON object")
        if item.get("_type") == "metadata":
            header = item
        else:
            messages.append(item)
    metadata = dict(header.get("metadata") or {})
    for field in ("created_at", "updated_at"):
        if header.get(field):
            metadata.setdefault(field, header[field])
    return ImportedSession(
        key=str(header.get("key") or f"import:{path.stem}"),
        messages=messages,
        metadata=metadata,
        last_consolidated=int(header.get("last_consolidated") or 0),
        status=str(header.get("status") or "active"),
    )
