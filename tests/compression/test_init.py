from __future__ import annotations

import subprocess
import sys

import compression

EXPECTED = {
    "Archive",
    "CompressionConfig",
    "CompressionResult",
    "CompressionWarning",
    "Compressor",
    "DriftFinding",
    "ExtractiveSummarizer",
    "Fact",
    "InMemoryCooldown",
    "OpenAISummarizer",
    "Summarizer",
    "SummaryOutcome",
    "SummaryRequest",
    "check_drift",
    "count_tokens",
    "mask_messages",
    "mask_secrets",
    "prune_tool_outputs",
    "repair_messages",
    "resolve_boundaries",
    "validate_messages",
}


def test_it_exports_the_public_contract() -> None:
    assert set(compression.__all__) >= EXPECTED


def test_it_resolves_every_name_in_all() -> None:
    for name in compression.__all__:
        assert getattr(compression, name) is not None, name
    assert sorted(compression.__all__) == sorted(set(compression.__all__))


def test_it_never_imports_django_or_openai_on_import() -> None:
    code = "import sys, compression; print('django' in sys.modules, 'openai' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.split() == ["False", "False"]
