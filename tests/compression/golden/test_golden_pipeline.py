"""Whole-pipeline golden cases on the demo sessions: structure and invariants, not exact text."""

from __future__ import annotations

import json
from typing import Any

import pytest

from agent_compression import CompressionConfig, Compressor, ExtractiveSummarizer, validate_messages
from agent_compression.summary_message import is_summary_message, parse_summary_message
from tests.compression.builders import FakeSummarizer
from tests.samples import SAMPLES
from tests.samples import load_sample as load


@pytest.fixture(params=sorted(p.name for p in SAMPLES.glob("*.json*")))
def sample(request: pytest.FixtureRequest) -> tuple[str, list[dict[str, Any]], dict[str, Any]]:
    messages, metadata = load(request.param)
    return request.param, messages, metadata


def compress(messages: list[dict[str, Any]], **kwargs: Any) -> Any:
    compressor = Compressor(CompressionConfig(context_window_tokens=4_000), ExtractiveSummarizer())
    return compressor.compress(messages, **kwargs)


def summary_of(messages: list[dict[str, Any]]) -> dict[str, Any]:
    found = [m for m in messages if is_summary_message(m)]
    assert len(found) == 1
    return found[0]


def test_it_compresses_each_sample_into_a_valid_smaller_history(sample: Any) -> None:
    name, messages, metadata = sample
    compressor = Compressor(CompressionConfig(context_window_tokens=4_000), ExtractiveSummarizer())
    assert compressor.should_compress(messages)
    result = compressor.compress(messages, keep_prefix=int(metadata.get("last_consolidated") or 0))
    assert result.was_compressed, name
    assert result.summary_text, name
    assert result.tokens_after < result.tokens_before
    assert result.tokens_after < CompressionConfig(context_window_tokens=4_000).trigger_tokens
    assert validate_messages(result.messages) == []
    assert validate_messages(result.messages, "strict") == [] or name == "wechat_wxid_demo01.jsonl"
    assert result.messages[-1] == messages[-1]
    assert result.messages[0] == messages[0]
    assert result.archive is not None and result.archive.verify()
    assert result.archive.messages == messages[result.archive.start : result.archive.end]
    fields, body = parse_summary_message(summary_of(result.messages))  # type: ignore[misc]
    assert fields["id"] == result.summary_id and fields["generator"] == "extractive"
    assert "## Pinned facts" in body
    json.dumps(result.to_dict())


def test_it_keeps_the_coding_constraint_verbatim_in_the_head() -> None:
    messages, _ = load("coding_export_job.json")
    result = compress(messages, focus_topic=messages[-1]["content"])
    assert "infra/terraform" in messages[1]["content"]
    assert result.messages[1] == messages[1]


def test_it_pins_the_chat_samples_constraints_from_the_middle() -> None:
    messages, _ = load("wechat_wxid_demo01.jsonl")
    result = compress(messages)
    summary = summary_of(result.messages)["content"]
    constraints = [f for f in result.facts if f.kind == "constraint"]
    assert constraints
    for fact in constraints:
        assert fact.text in summary
        assert fact.source_index is not None and fact.text in messages[fact.source_index]["content"]


def test_it_keeps_the_parallel_calls_of_the_coding_sample_together() -> None:
    messages, _ = load("coding_export_job.json")
    result = compress(messages)
    for i, m in enumerate(result.messages):
        ids = [c["id"] for c in m.get("tool_calls") or []]
        if ids:
            following = result.messages[i + 1 : i + 1 + len(ids)]
            assert sorted(r["tool_call_id"] for r in following) == sorted(ids)


def test_it_prunes_the_coding_samples_repeated_dry_runs() -> None:
    messages, _ = load("coding_export_job.json")
    result = compress(messages)
    pruned_kinds = {item.kind for item in result.pruned}
    assert pruned_kinds & {"pruned", "deduplicated"}
    assert any(str(m.get("content") or "").startswith(("[pruned]", "(duplicate")) for m in result.messages)


def test_it_degrades_on_the_chat_sample_when_the_summarizer_fails() -> None:
    messages, _ = load("wechat_wxid_demo01.jsonl")
    compressor = Compressor(CompressionConfig(context_window_tokens=4_000), FakeSummarizer(fail=True))
    result = compressor.compress(messages)
    assert result.was_compressed and result.summary_text is None
    assert result.warning_codes()[0] == "summary_failed"
    assert result.tokens_after < result.tokens_before
    note = summary_of(result.messages)["content"]
    assert "Summary unavailable" in note and "## Pinned facts" in note
    assert validate_messages(result.messages) == []


def test_it_reaches_a_fixed_point_on_the_samples(sample: Any) -> None:
    _, messages, _ = sample
    compressor = Compressor(CompressionConfig(context_window_tokens=4_000), ExtractiveSummarizer())
    first = compressor.compress(messages)
    second = compressor.compress(first.messages)
    assert not second.was_compressed
    assert second.messages == first.messages
