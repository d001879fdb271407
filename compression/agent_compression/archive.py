"""Stage 3: the middle segment's original messages, kept before any lossy step."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from .messages import copy_json, messages_sha256


@dataclass(frozen=True)
class Archive:
    """The ORIGINAL messages ``[start, end)`` of the history given to ``compress``, checksummed.

    ``messages`` is a deep copy: later changes to the input do not reach it.
    """

    start: int
    end: int
    messages: list[dict[str, Any]]
    sha256: str

    @classmethod
    def of(cls, history: Sequence[dict[str, Any]], start: int, end: int) -> Archive:
        """Archive ``history[start:end]``."""
        if not 0 <= start <= end <= len(history):
            raise ValueError(f"archive range {start}-{end} outside a history of {len(history)} messages")
        messages = copy_json(list(history[start:end]))
        return cls(start=start, end=end, messages=messages, sha256=messages_sha256(messages))

    def __len__(self) -> int:
        return self.end - self.start

    def verify(self) -> bool:
        """True when the messages still match the checksum and the range."""
        return len(self.messages) == self.end - self.start and messages_sha256(self.messages) == self.sha256

    def to_dict(self) -> dict[str, Any]:
        return {"start": self.start, "end": self.end, "sha256": self.sha256, "messages": self.messages}

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Archive:
        """Rebuild a stored archive; raises ``ValueError`` when it does not match its checksum."""
        archive = cls(
            start=int(data["start"]), end=int(data["end"]), messages=list(data["messages"]), sha256=str(data["sha256"])
        )
        if not archive.verify():
            raise ValueError("archive does not match its sha256")
        return archive
