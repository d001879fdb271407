"""Data shared between stages: pinned facts, summary requests and outcomes.

Everything here is a plain dataclass so that results serialize to JSON and
the console can store them without knowing the pipeline's internals.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any, Protocol, runtime_checkable

Message = dict[str, Any]

#: first line of every summary message the pipeline inserts; how a later
#: compression recognises an earlier summary in the history
SUMMARY_MARKER = "[CONTEXT SUMMARY]"


@dataclass(frozen=True)
class Fact:
    """A fact extracted by code and carried verbatim into every summary.

    kind: constraint | approval | path | identifier | error | command | decision
    source_index: the message's *history index*: its position in the session's full history as if it
    had never been compressed (for a first compression, the index in the history given to
    ``compress``; see :func:`agent_compression.facts.history_indexes`). Facts carried from an earlier
    summary keep the index written there; ``None`` only when none is known.
    rank: how strongly the fact was established, used to choose what a cap keeps (for paths,
    :data:`agent_compression.facts.PATH_RANKS`: edited > named by the user > read > listed); not serialized.
    """

    kind: str
    text: str
    source_index: int | None
    role: str = "user"
    rank: int = field(default=0, compare=False)

    def to_dict(self) -> dict[str, Any]:
        return {"kind": self.kind, "text": self.text, "source_index": self.source_index, "role": self.role}


@dataclass
class SummaryRequest:
    """What a summarizer gets: the middle segment (the archived originals with secrets masked) and context."""

    messages: list[Message]
    #: index of ``messages[0]`` in the full history
    start_index: int
    #: pinned facts (from the segment and carried from an earlier summary)
    facts: list[Fact]
    focus_topic: str | None = None
    #: text of an earlier summary found in the segment: update it, do not start over
    previous_summary: str | None = None
    #: cap on the summary's size, in tokens
    max_tokens: int = 2_000
    #: cap on what may be sent to a model, in tokens
    input_tokens: int = 12_000
    #: history index of each of ``messages`` (``None`` for messages the compressor inserted); when
    #: ``None``, message ``i`` is ``start_index + i``. Every ``#N`` a summarizer writes uses these.
    history_indexes: list[int | None] | None = None
    #: tokens in ``messages`` as the compressor counted them (what an extractive summarizer "read")
    segment_tokens: int | None = None

    def index_of(self, position: int) -> int | None:
        """The history index (the ``#N`` to write) of ``messages[position]``."""
        if self.history_indexes is not None and 0 <= position < len(self.history_indexes):
            return self.history_indexes[position]
        return self.start_index + position


@dataclass
class SummaryOutcome:
    """The summarizer's answer. ``text is None`` means it failed; ``error`` says why."""

    text: str | None
    generator: str
    model: str | None = None
    endpoint_host: str | None = None
    prompt_version: str = ""
    prompt_hash: str = ""
    input_tokens: int = 0
    output_tokens: int = 0
    latency_ms: float = 0.0
    error: str | None = None
    extra: dict[str, Any] = field(default_factory=dict)

    @property
    def ok(self) -> bool:
        return self.text is not None

    def provenance(self) -> dict[str, Any]:
        return {
            "generator": self.generator,
            "model": self.model,
            "endpoint_host": self.endpoint_host,
            "prompt_version": self.prompt_version,
            "prompt_hash": self.prompt_hash,
            "input_tokens": self.input_tokens,
            "output_tokens": self.output_tokens,
            "latency_ms": round(self.latency_ms, 1),
            "error": self.error,
        }


@runtime_checkable
class Summarizer(Protocol):
    """Anything that turns a segment into a structured summary.

    Must not raise: failures come back as ``SummaryOutcome(text=None, error=...)``.
    """

    name: str

    def summarize(self, request: SummaryRequest) -> SummaryOutcome: ...

    async def asummarize(self, request: SummaryRequest) -> SummaryOutcome: ...


# ---------------------------------------------------------------- drift vocabulary
# (the values the drift package returns and the console stores; the checks live in ``agent_compression.drift``)

#: the kinds of drift a finding reports
DRIFT_KINDS = (
    "constraint_dropped",
    "constraint_inverted",
    "constraint_fabricated",
    "identifier_missing",
    "identifier_fabricated",
    "hedge_lost",
    "progress_fabricated",
    "wrong_attribution",
)


class Verdict(StrEnum):
    """What the evidence says about one claim of a summary."""

    SUPPORTED = "supported"
    CONTRADICTED = "contradicted"
    UNSUPPORTED = "unsupported"
    CANNOT_TELL = "cannot_tell"


class ClaimType(StrEnum):
    """What a claim is about: a user's rule, the state of the work, a cause or place, an identifier, or else."""

    REQUIREMENT = "requirement"
    STATE = "state"
    CAUSE = "cause"
    IDENTIFIER = "identifier"
    OTHER = "other"


class Severity(StrEnum):
    """How much a finding matters: ``high`` opens a case by itself."""

    HIGH = "high"
    MEDIUM = "medium"
    LOW = "low"
