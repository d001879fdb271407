"""Invariants over messy histories: the output always validates, nothing verbatim is lost."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from agent_compression.config import CompressionConfig
from agent_compression.messages import latest_user_index
from agent_compression.pipeline import Compressor
from agent_compression.summary_message import BRIDGE, is_summary_message
from agent_compression.tokens import count_tokens
from agent_compression.types import SUMMARY_MARKER
from agent_compression.validate import repair_messages, validate_messages
from tests.compression.builders import FakeSummarizer

# COMPRESSION_PROPERTY_EXAMPLES=2000 for a longer hunt; the default keeps the suite fast
EXAMPLES = int(os.environ.get("COMPRESSION_PROPERTY_EXAMPLES", "120"))
# `make test` runs the same examples every time, in CI and in a fresh clone alike (a test run must not hang
# on a lucky draw); setting COMPRESSION_PROPERTY_EXAMPLES starts a hunt, where each run explores
DERANDOMIZE = "COMPRESSION_PROPERTY_EXAMPLES" not in os.environ
COMMON = {
    "deadline": None,
    "database": None,
    "derandomize": DERANDOMIZE,
    "suppress_health_check": [HealthCheck.too_slow],
}
SETTINGS = settings(max_examples=EXAMPLES, **COMMON)
PIPELINE_SETTINGS = settings(max_examples=max(EXAMPLES // 2, 10), **COMMON)

IDS = st.sampled_from(["c1", "c2", "c3", "c4", "c5", "c6"])
TEXT = st.one_of(
    st.text(max_size=40),
    st.sampled_from(["先不要修改部署脚本。", "Do not touch infra/terraform.", "好的", "", "path src/app.py failed"]),
    st.builds(lambda n, s: s * n, st.integers(100, 3_000), st.sampled_from(["line of output\n", "中文输出", "x"])),
)
ARGS = st.one_of(
    st.dictionaries(
        st.sampled_from(["path", "cmd", "content", "query"]),
        st.one_of(st.text(max_size=20), st.builds(lambda n: '"quoted" \\ 字\n' * n, st.integers(0, 600))),
        max_size=3,
    ).map(json.dumps),
    st.sampled_from(["{not json", "", "[]"]),
)


def tool_call(cid: str, name: str, args: str) -> dict[str, Any]:
    return {"id": cid, "type": "function", "function": {"name": name, "arguments": args}}


CALL = st.builds(tool_call, IDS, st.sampled_from(["read_file", "terminal", "search_files", "mcp__gh__issue"]), ARGS)
MESSAGE = st.one_of(
    st.builds(lambda t: {"role": "user", "content": t}, TEXT),
    st.builds(lambda t: {"role": "assistant", "content": t}, st.one_of(TEXT, st.none())),
    st.builds(
        lambda cs, t: {"role": "assistant", "content": t, "tool_calls": cs},
        st.lists(CALL, min_size=1, max_size=3),
        st.one_of(st.none(), TEXT),
    ),
    st.builds(lambda cid, t: {"role": "tool", "tool_call_id": cid, "content": t}, IDS, TEXT),
    st.builds(lambda cid, t: {"role": "tool", "tool_call_id": cid, "name": "terminal", "content": t}, IDS, TEXT),
    st.builds(lambda t: {"role": "system", "content": t}, TEXT),
)
HISTORY = st.lists(MESSAGE, max_size=40)

JUNK_VALUE = st.one_of(st.none(), st.integers(), st.text(max_size=5), st.lists(st.integers(), max_size=2))
JUNK_MESSAGE = st.one_of(
    MESSAGE,
    st.fixed_dictionaries(
        {"role": st.one_of(st.sampled_from(["user", "assistant", "tool", "system", "robot"]), JUNK_VALUE)},
        optional={
            "content": st.one_of(JUNK_VALUE, st.lists(st.one_of(JUNK_VALUE, st.just({"type": "text", "text": "t"})))),
            "tool_calls": st.one_of(JUNK_VALUE, st.lists(st.one_of(CALL, JUNK_VALUE, st.just({"id": "c1"})))),
            "tool_call_id": st.one_of(IDS, JUNK_VALUE),
        },
    ),
)


def _is_ours(message: dict[str, Any]) -> bool:
    return is_summary_message(message) or message.get("content") == BRIDGE


def _latest_real_user(messages: list[dict[str, Any]]) -> int | None:
    users = [i for i, m in enumerate(messages) if m["role"] == "user" and not is_summary_message(m)]
    return users[-1] if users else None


def compressor(profile: str = "openai") -> Compressor:
    config = CompressionConfig(context_window_tokens=2_000, protect_head_messages=2)
    return Compressor(config, FakeSummarizer(), profile=profile)  # type: ignore[arg-type]


@SETTINGS
@given(st.lists(JUNK_MESSAGE, max_size=30), st.sampled_from(["openai", "strict"]))
def test_it_repairs_any_list_of_dicts_into_a_valid_history(history: list[Any], profile: Any) -> None:
    fixed, _ = repair_messages(history, profile)
    assert validate_messages(fixed, profile) == []
    again, report = repair_messages(fixed, profile)
    assert again == fixed and not report.changed


@PIPELINE_SETTINGS
@given(HISTORY, st.sampled_from(["openai", "strict"]))
def test_it_always_outputs_a_valid_history_keeping_the_latest_user_message(history: list[Any], profile: str) -> None:
    result = compressor(profile).compress(history)
    assert validate_messages(result.messages, profile) == []  # type: ignore[arg-type]
    latest = latest_user_index(history)
    if latest is not None and isinstance(history[latest]["content"], str):
        assert any(m is history[latest] or m == history[latest] for m in result.messages)
    if result.archive is not None:
        assert result.archive.messages == history[result.archive.start : result.archive.end]
        assert result.archive.verify()


@PIPELINE_SETTINGS
@given(HISTORY)
# summary look-alikes already in the protected head cannot be removed; compressing must not add to them
@example([{"role": "user", "content": SUMMARY_MARKER}, {"role": "user", "content": SUMMARY_MARKER}])
def test_it_compresses_its_own_output_without_breaking_it(history: list[Any]) -> None:
    c = compressor()
    first = c.compress(history)
    second = c.compress(first.messages)
    assert validate_messages(second.messages) == []
    head = 0  # the protected head, up to the first message an earlier compression inserted
    while head < 2 and head < len(first.messages) and not _is_ours(first.messages[head]):
        head += 1
    if count_tokens(first.messages[:head]) <= c.config.effective_head_tokens:  # else it may shrink further
        assert second.messages[:head] == first.messages[:head]
    summaries_before = sum(is_summary_message(m) for m in first.messages)
    assert sum(is_summary_message(m) for m in second.messages) <= max(1, summaries_before)
    if not second.was_compressed:
        assert second.messages == first.messages
    latest = _latest_real_user(first.messages)
    if latest is not None:
        assert first.messages[latest] in second.messages


@PIPELINE_SETTINGS
@given(st.lists(JUNK_MESSAGE, max_size=30))
def test_it_survives_junk_messages(history: list[Any]) -> None:
    result = compressor().compress(history)
    assert validate_messages(result.messages) == []


# --------------------------------------------------------------------------- messy histories, strict profile

GIANT_TEXT = st.builds(
    lambda n, s: s * n, st.integers(300, 3_000), st.sampled_from(["giant output line\n", "巨大输出出", "yy"])
)
GIANT = st.one_of(
    st.builds(lambda cid, t: {"role": "tool", "tool_call_id": cid, "content": t}, IDS, GIANT_TEXT),
    st.builds(lambda t: {"role": "assistant", "content": t}, GIANT_TEXT),
    st.builds(lambda cs, t: {"role": "assistant", "content": t, "tool_calls": cs}, st.lists(CALL, min_size=1), TEXT),
)
#: opening messages as agents write them, giant ones included, then a messy history: ids repeated across
#: messages, orphan and missing results, calls still in flight at the end
MESSY = st.builds(
    lambda system_text, opening, body: [{"role": "system", "content": system_text}, *opening, *body],
    st.sampled_from(["You are a coding agent.", "你是一个助手。"]),
    st.lists(st.one_of(MESSAGE, GIANT), max_size=5),
    st.lists(st.one_of(MESSAGE, GIANT), max_size=30),
)


def strict_compressor() -> Compressor:
    return Compressor(
        CompressionConfig(context_window_tokens=4_000, protect_head_messages=4), FakeSummarizer(), profile="strict"
    )


def must_keep_tokens(history: list[dict[str, Any]]) -> int:
    """What any output holds: the fixed part, the smallest summary message, and the last message with its call
    (and what lies between them: a call is never cut from its results)."""
    from agent_compression.boundaries import SUMMARY_OVERHEAD_TOKENS, fixed_part_tokens
    from agent_compression.messages import call_index
    from agent_compression.pipeline import MIN_SUMMARY_TOKENS
    from agent_compression.tokens import count_tokens

    calls = call_index(history)
    last = len(history) - 1
    while last > 0 and history[last]["role"] == "tool":
        entry = calls.get(history[last]["tool_call_id"])
        last = min(last - 1, entry[0] if entry else last)
    return fixed_part_tokens(history) + count_tokens(history[last:]) + SUMMARY_OVERHEAD_TOKENS + MIN_SUMMARY_TOKENS


@PIPELINE_SETTINGS
@given(MESSY)
@example(
    [
        {"role": "system", "content": "s"},
        {"role": "user", "content": "go"},
        tool_call_message := {"role": "assistant", "content": None, "tool_calls": [tool_call("c1", "terminal", "{}")]},
        {"role": "tool", "tool_call_id": "c1", "content": "x" * 40_000},
        {"role": "user", "content": "again"},
        tool_call_message,
        {"role": "tool", "tool_call_id": "c1", "content": "done"},
    ]
)
def test_any_messy_history_compresses_to_a_strictly_valid_one_that_fits(history: list[dict[str, Any]]) -> None:
    c = strict_compressor()
    result = c.compress(history)
    assert validate_messages(result.messages, "strict") == []
    if result.archive is not None:
        assert result.archive.messages == history[result.archive.start : result.archive.end]
    # a margin for the estimate: repair placeholders, the bridge, a summary's pinned facts
    if must_keep_tokens(history) <= c.config.trigger_tokens - 100 and result.tokens_before > c.config.trigger_tokens:
        assert result.tokens_after <= c.config.trigger_tokens, (result.warning_codes(), result.boundaries)
    elif result.tokens_after > c.config.trigger_tokens:
        assert result.degraded


def _giant_head_before_the_first_request() -> list[dict[str, Any]]:
    # a hunt's counterexample: the head's assistant message is shortened to ~340 tokens, the repair then adds a
    # user placeholder before it, and the output ends 5 tokens over the trigger
    return json.loads((Path(__file__).parent / "data" / "over_trigger_pruned_only.json").read_text())


def test_an_output_over_the_trigger_is_flagged_degraded() -> None:
    result = strict_compressor().compress(_giant_head_before_the_first_request())
    if result.tokens_after > strict_compressor().config.trigger_tokens:
        assert result.degraded and "still_over_threshold" in result.warning_codes()


@pytest.mark.xfail(strict=True, reason="known gap: the pruned-only path does not shrink a head message further")
def test_a_giant_assistant_message_before_the_first_request_still_fits() -> None:
    history = _giant_head_before_the_first_request()
    c = strict_compressor()
    assert must_keep_tokens(history) <= c.config.trigger_tokens - 100
    assert c.compress(history).tokens_after <= c.config.trigger_tokens
