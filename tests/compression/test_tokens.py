from __future__ import annotations

import json

import pytest

from compression import tokens
from compression.tokens import MESSAGE_OVERHEAD, TokenCounter, count_text_tokens, count_tokens, estimate_text_tokens
from tests.compression.builders import call, calls, result, user


@pytest.fixture
def encode_spy(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    seen: list[str] = []
    real = tokens._encode_len

    def spy(enc, text):  # type: ignore[no-untyped-def]
        seen.append(text)
        return real(enc, text)

    monkeypatch.setattr(tokens, "_encode_len", spy)
    return seen


def test_it_counts_content_names_arguments_and_overhead() -> None:
    message = calls(call("c1", "read_file", path="a.py"), text="reading")
    expected = MESSAGE_OVERHEAD + count_text_tokens("reading") + 3
    expected += count_text_tokens("read_file") + count_text_tokens('{"path": "a.py"}')
    assert TokenCounter().message(message) == expected


def test_it_counts_an_empty_history_as_zero() -> None:
    assert count_tokens([]) == 0


def test_it_counts_text_parts_of_list_content() -> None:
    message = {"role": "user", "content": [{"type": "text", "text": "hello world"}, {"type": "image_url"}]}
    assert TokenCounter().message(message) == MESSAGE_OVERHEAD + count_text_tokens("hello world") + 85


def test_it_encodes_each_text_once(encode_spy: list[str]) -> None:
    counter = TokenCounter()
    history = [user("alpha beta"), result("c1", "gamma delta")]
    first = counter.count(history)
    assert counter.count(history) == first
    assert sorted(encode_spy) == ["alpha beta", "gamma delta"]


def test_it_counts_only_the_new_messages_after_an_append(encode_spy: list[str]) -> None:
    counter = TokenCounter()
    history = [user(f"message number {i}") for i in range(200)]
    counter.per_message(history)
    encode_spy.clear()
    history += [user("one more"), user("and another")]
    counter.count(history)
    assert encode_spy == ["one more", "and another"]


def test_it_gives_the_same_counts_per_message_and_one_by_one() -> None:
    history = [user("你好，世界 " * i) for i in range(1, 30)] + [calls(call("x", "terminal", cmd="ls -la"))]
    assert TokenCounter().per_message(history) == [TokenCounter().message(m) for m in history]


def test_it_falls_back_to_a_character_estimate_without_tiktoken(monkeypatch: pytest.MonkeyPatch) -> None:
    counter = TokenCounter()
    with_tiktoken = counter.message(user("x" * 400))
    monkeypatch.setattr(tokens, "_encoding", lambda: None)
    assert counter.message(user("x" * 400)) == MESSAGE_OVERHEAD + 100
    assert with_tiktoken != MESSAGE_OVERHEAD + 100  # the cache did not serve the tiktoken count
    assert count_text_tokens("不要修改部署脚本") == 8


def test_it_estimates_cjk_at_one_token_a_character() -> None:
    assert estimate_text_tokens("abcd") == 1
    assert estimate_text_tokens("先不要修改") == 5
    assert estimate_text_tokens("ab先") == 2


def test_it_ignores_malformed_tool_calls() -> None:
    message = {"role": "assistant", "content": None, "tool_calls": ["junk", {"function": None}]}
    assert TokenCounter().message(message) == MESSAGE_OVERHEAD


def test_it_starts_over_when_the_cache_is_full() -> None:
    counter = TokenCounter(max_entries=3)
    for i in range(10):
        counter.text(f"text {i}")
    assert len(counter._cache) <= 3


def test_dict_valued_tool_arguments_are_counted_like_their_json() -> None:

    args = {"path": "src/billing/invoice_renderer.py", "content": "def render():\n    return 42\n" * 20}
    as_dict = {"role": "assistant", "content": None, "tool_calls": [
        {"id": "c1", "type": "function", "function": {"name": "write_file", "arguments": args}},
    ]}  # fmt: skip
    as_text = {**as_dict, "tool_calls": [{**as_dict["tool_calls"][0], "function": {
        "name": "write_file", "arguments": json.dumps(args, ensure_ascii=False),
    }}]}  # fmt: skip
    counter = TokenCounter()
    assert counter.message(as_dict) == counter.message(as_text) > 100
