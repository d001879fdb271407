"""``CompressionConfig.recall_hint``: one line in the summary message saying how to read the originals back."""

from __future__ import annotations

import pytest

from agent_compression import CompressionConfig, Compressor, ExtractiveSummarizer
from agent_compression.summary_message import parse_summary_message


def _history() -> list[dict[str, str]]:
    messages = [{"role": "system", "content": "You help."}, {"role": "user", "content": "Start."}]
    for turn in range(20):
        messages += [
            {"role": "user", "content": f"Step {turn}."},
            {"role": "assistant", "content": f"Done with step {turn}. " + "Details follow. " * 40},
        ]
    return messages


def test_the_hint_is_a_header_line_of_the_summary_message() -> None:
    hint = "Read originals back with the tool read_archived_message(#N)."
    config = CompressionConfig(context_window_tokens=2000, recall_hint=hint)
    result = Compressor(config, summarizer=ExtractiveSummarizer()).compress(_history())
    summary = next(parse_summary_message(m) for m in result.messages if parse_summary_message(m))
    header = result.messages[[parse_summary_message(m) is not None for m in result.messages].index(True)]["content"]
    assert hint in header.partition("\n\n")[0]  # in the header, not the body the summarizer wrote
    assert hint not in summary[1]


def test_the_hint_is_set_in_code_only() -> None:
    assert "recall_hint" not in CompressionConfig(recall_hint="x").to_dict()
    with pytest.raises(ValueError, match="unknown config option"):
        CompressionConfig.from_dict({"recall_hint": "x"})
    with pytest.raises(ValueError, match="one line"):
        CompressionConfig(recall_hint="two\nlines")
