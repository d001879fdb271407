from __future__ import annotations

import subprocess
import sys

import agent_compression

#: the public names, all of them: adding or removing one is a decision made here too, like httpx's test_all
EXPECTED = [
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


def test_it_exports_exactly_the_public_contract() -> None:
    assert agent_compression.__all__ == EXPECTED


def test_it_resolves_every_name_in_all() -> None:
    for name in agent_compression.__all__:
        assert getattr(agent_compression, name) is not None, name
    assert sorted(agent_compression.__all__) == sorted(set(agent_compression.__all__))


def test_it_never_imports_django_or_openai_on_import() -> None:
    code = "import sys, compression; print('django' in sys.modules, 'openai' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.split() == ["False", "False"]
