"""Session files to ImportedSession: the library's reader plus the console's defaults."""

from __future__ import annotations

from pathlib import Path

from compression.session_file import InputError, load_session

from .services import ImportedSession, InvalidSession


def read_session_file(path: Path) -> ImportedSession:
    """Parse one file (echo-agent JSONL, a session object or a message array)."""
    try:
        messages, header = load_session(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, InputError) as exc:
        raise InvalidSession(str(exc)) from None
    metadata = dict(header.get("metadata") or {})
    for field in ("created_at", "updated_at"):
        if header.get(field):
            metadata.setdefault(field, header[field])
    if not header:
        metadata["source_file"] = path.name
    try:
        last_consolidated = int(header.get("last_consolidated") or 0)
    except (TypeError, ValueError):
        raise InvalidSession("last_consolidated is not a whole number") from None
    return ImportedSession(
        key=str(header.get("key") or f"import:{path.stem}"),
        messages=messages,
        metadata=metadata,
        last_consolidated=last_consolidated,
        status=str(header.get("status") or "active"),
    )
