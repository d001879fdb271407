from __future__ import annotations

import pytest

from agent_compression.config import CompressionConfig


def test_it_derives_budgets_from_the_window() -> None:
    config = CompressionConfig(context_window_tokens=16_000)
    assert config.trigger_tokens == 11_200
    assert config.effective_tail_tokens == 4_000
    assert config.effective_prune_protect_tokens == 4_800
    assert config.effective_summary_max_tokens == 3_200  # the ceiling: 20% of the window
    assert config.effective_summary_input_tokens == 4_000


def test_it_lets_explicit_budgets_win() -> None:
    config = CompressionConfig(
        tail_tokens=100, prune_protect_tokens=200, summary_max_tokens=300, summary_input_tokens=400
    )
    assert (config.effective_tail_tokens, config.effective_prune_protect_tokens) == (100, 200)
    assert (config.effective_summary_max_tokens, config.effective_summary_input_tokens) == (300, 400)


def test_it_round_trips_through_a_dict() -> None:
    config = CompressionConfig(context_window_tokens=8_000, trigger_ratio=0.6)
    assert CompressionConfig.from_dict(config.to_dict()) == config
    assert CompressionConfig.from_dict({"context_window_tokens": 9_000}).trigger_ratio == 0.7


def test_it_names_unknown_options() -> None:
    with pytest.raises(ValueError, match="unknown config option\\(s\\): tail, window"):
        CompressionConfig.from_dict({"window": 1, "tail": 2})


@pytest.mark.parametrize(
    ("options", "problem"),
    [
        ({"context_window_tokens": 100}, "context_window_tokens"),
        ({"trigger_ratio": 1.5}, "trigger_ratio"),
        ({"protect_head_messages": -1}, "protect_head_messages"),
        ({"max_tool_arg_chars": 10}, "max_tool_arg_chars"),
        ({"trigger_ratio": "0.5"}, "trigger_ratio must be a number"),
        ({"context_window_tokens": 8000.5}, "context_window_tokens must be a whole number"),
        ({"protect_head_messages": True}, "protect_head_messages must be a whole number"),
        ({"tail_tokens": "100"}, "tail_tokens must be a whole number"),
        ({"tail_tokens": -5}, "tail_tokens must not be negative"),
    ],
)
def test_it_rejects_nonsense_values(options: dict, problem: str) -> None:
    with pytest.raises(ValueError, match=problem):
        CompressionConfig(**options)
