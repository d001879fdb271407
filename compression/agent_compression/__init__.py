"""Context compression for long-running tool-using agents (framework-free).

The five-stage pipeline: tool-output pruning, boundary resolution, archive,
summary, reassembly + validation. See ``Compressor``.

Names from the summarizer, drift and reporting modules load on first use, so
``import agent_compression`` stays cheap; the ``openai`` client is only imported
when an ``OpenAISummarizer`` first needs its client, ``urllib.request`` when a
``ConsoleReporter`` is asked for. Fact extraction and masking are part of every
compression and load with the pipeline.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from .archive import Archive
from .assemble import assemble
from .boundaries import Boundaries, resolve_boundaries
from .config import CompressionConfig
from .facts import extract_facts, find_previous_summary
from .messages import canonical_json, messages_sha256
from .pipeline import CompressionResult, CompressionWarning, Compressor, StageStat, ThrashState
from .prune import PrunedItem, PruneResult, prune_tool_outputs
from .secrets import mask_json, mask_messages, mask_secrets
from .summary_message import ACKNOWLEDGEMENT, is_summary_message, parse_summary_message, render_summary_message
from .tokens import TokenCounter, count_text_tokens, count_tokens
from .types import SUMMARY_MARKER, Fact, Message, Summarizer, SummaryOutcome, SummaryRequest
from .validate import LOST_RESULT, RepairReport, Violation, repair_messages, validate_messages

if TYPE_CHECKING:
    from .drift import DriftFinding, assess_summary, check_drift
    from .reporting import ConsoleReporter, Reporter, ReporterStats
    from .summarize import CooldownState, ExtractiveSummarizer, InMemoryCooldown, OpenAISummarizer

_LAZY = {
    "ExtractiveSummarizer": "summarize",
    "OpenAISummarizer": "summarize",
    "CooldownState": "summarize",
    "InMemoryCooldown": "summarize",
    "check_drift": "drift",
    "assess_summary": "drift",
    "DriftFinding": "drift",
    "ConsoleReporter": "reporting",
    "Reporter": "reporting",
    "ReporterStats": "reporting",
}

__all__ = [
    "ACKNOWLEDGEMENT",
    "LOST_RESULT",
    "SUMMARY_MARKER",
    "Archive",
    "Boundaries",
    "CompressionConfig",
    "CompressionResult",
    "CompressionWarning",
    "Compressor",
    "ConsoleReporter",
    "CooldownState",
    "DriftFinding",
    "ExtractiveSummarizer",
    "Fact",
    "InMemoryCooldown",
    "Message",
    "OpenAISummarizer",
    "PruneResult",
    "PrunedItem",
    "RepairReport",
    "Reporter",
    "ReporterStats",
    "StageStat",
    "Summarizer",
    "SummaryOutcome",
    "SummaryRequest",
    "ThrashState",
    "TokenCounter",
    "Violation",
    "assemble",
    "assess_summary",
    "canonical_json",
    "check_drift",
    "count_text_tokens",
    "count_tokens",
    "extract_facts",
    "find_previous_summary",
    "is_summary_message",
    "mask_json",
    "mask_messages",
    "mask_secrets",
    "messages_sha256",
    "parse_summary_message",
    "prune_tool_outputs",
    "render_summary_message",
    "repair_messages",
    "resolve_boundaries",
    "validate_messages",
]


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'agent_compression' has no attribute {name!r}")
    value = getattr(importlib.import_module(f".{module}", __name__), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))
