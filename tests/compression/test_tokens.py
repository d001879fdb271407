from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from agent_compression import tokens
from agent_compression.tokens import (
    MESSAGE_OVERHEAD,
    HistoryTally,
    TokenCounter,
    check_token_counts,
    count_text_tokens,
    count_tokens,
    estimate_text_tokens,
)
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


@pytest.fixture
def message_spy(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """How many messages a counter looked at (a cache hit costs a look, too)."""
    looked: list[int] = []
    real = TokenCounter._message

    def spy(self: TokenCounter, message: dict[str, Any]) -> int:
        looked.append(1)
        return real(self, message)

    monkeypatch.setattr(TokenCounter, "_message", spy)
    return looked


def grown_history(n: int) -> list[dict[str, Any]]:
    return [user(f"message number {i}") if i % 2 else result(f"c{i}", f"output {i} " * 20) for i in range(n)]


def test_a_tally_looks_only_at_the_appended_messages(message_spy: list[int]) -> None:
    tally = HistoryTally(TokenCounter())
    history = grown_history(2_000)
    tally.total(history)
    grown = history + [user(f"appended {i}") for i in range(10)]  # a new list, as a runtime may build it
    expected = TokenCounter().count(grown)
    message_spy.clear()
    assert tally.total(grown) == expected
    assert len(message_spy) <= 10 + HistoryTally.RECHECK


def test_a_tally_sees_the_newest_messages_edited_in_place() -> None:
    tally = HistoryTally(TokenCounter())
    history = grown_history(200)
    tally.total(history)
    history[-1]["content"] = "streamed in later " * 50  # runtimes fill in the newest message in place
    assert tally.total(history) == TokenCounter().count(history)


def test_a_tally_counts_a_replaced_or_shortened_history_afresh() -> None:
    tally = HistoryTally(TokenCounter())
    history = grown_history(300)
    tally.total(history)
    compressed = history[:3] + [user("summary of what happened")] + history[-40:]
    assert tally.total(compressed) == TokenCounter().count(compressed)
    shortened = history[:100]
    assert tally.total(shortened) == TokenCounter().count(shortened)
    copied = [dict(m) for m in history]  # equal messages, other objects: the counts still hold
    copied[150]["content"] = "changed in the copy"
    assert tally.total(copied) == TokenCounter().count(copied)


def test_a_tally_remembers_several_histories(message_spy: list[int]) -> None:
    tally = HistoryTally(TokenCounter())
    a, b = grown_history(500), [user(f"other session {i}") for i in range(500)]
    tally.total(a)
    tally.total(b)
    message_spy.clear()
    tally.total([*a, user("a again")])
    tally.total([*b, user("b again")])
    assert len(message_spy) <= 2 * (1 + HistoryTally.RECHECK)


def test_a_tally_does_not_reuse_counts_of_another_tokenizer(monkeypatch: pytest.MonkeyPatch) -> None:
    tally = HistoryTally(TokenCounter())
    history = [user("x" * 400)] * 100
    tally.total(history)
    monkeypatch.setattr(tokens, "_encoding", lambda: None)
    assert tally.total([*history, user("y")]) == 100 * (MESSAGE_OVERHEAD + 100) + MESSAGE_OVERHEAD + 1


def test_counts_the_caller_gives_are_checked() -> None:
    history = [user("a"), user("b")]
    assert check_token_counts(history, (5, 6)) == [5, 6]
    for bad in ([5], [5, 6, 7], [5, -1], [5, 1.5], [5, True], [5, "6"]):
        with pytest.raises(ValueError, match="token_counts"):
            check_token_counts(history, bad)  # type: ignore[arg-type]


def test_count_reusing_counts_only_messages_not_known(encode_spy: list[str]) -> None:
    counter = TokenCounter()
    old, new = user("counted before"), user("written by the pipeline")
    expected = 1_000 + TokenCounter().message(new)
    encode_spy.clear()
    assert counter.count_reusing([old, new], {id(old): 1_000}) == expected
    assert encode_spy == ["written by the pipeline"]


def test_a_large_batch_is_encoded_on_threads_with_the_same_counts(
    monkeypatch: pytest.MonkeyPatch, encode_spy: list[str]
) -> None:
    monkeypatch.setattr(tokens, "PARALLEL_MIN_CHARS", 1_000)
    monkeypatch.setattr(tokens, "_fast_count", lambda enc: None)  # tiktoken alone (no bpe-openai wheel)
    history = [calls(call(f"c{i}", "terminal", cmd=f"make test {i}")) for i in range(50)]
    history += [result(f"c{i}", f"line {i} 第{i}条 " * (i + 1)) for i in range(50)]
    serial = TokenCounter(threads=1).per_message(history)
    encode_spy.clear()
    threaded = TokenCounter(threads=3)
    assert threaded.per_message(history) == serial
    assert encode_spy == []  # encoded in the pool, not one by one
    assert threaded.per_message(history) == serial  # and cached


def tiktoken_count(text: str) -> int:
    enc = tokens._encoding()
    assert enc is not None
    return len(enc.encode_ordinary(text))


needs_fast = pytest.mark.skipif(
    tokens._encoding() is None or tokens._fast_count(tokens._encoding()) is None, reason="bpe-openai not installed"
)


PIECES = [*"ab AZ09 \n\t\r.,'\"-_/(){}<>|é😀", "'s", "'ll", "  ", "\n\n", "你好", "<|endoftext|>"]


@needs_fast
@settings(max_examples=400, deadline=None)
@given(st.lists(st.sampled_from(PIECES), max_size=80).map("".join) | st.text())
def test_the_fast_counter_counts_as_tiktoken_does(text: str) -> None:
    assert tokens._encode_len(tokens._encoding(), text) == tiktoken_count(text)


@needs_fast
def test_the_fast_counter_counts_lone_surrogates_as_tiktoken_does() -> None:
    assert count_text_tokens("broken \ud800 surrogate") == tiktoken_count("broken \ud800 surrogate")


def test_a_fast_counter_that_disagrees_with_tiktoken_is_not_used(monkeypatch: pytest.MonkeyPatch) -> None:
    import sys
    import types

    enc = tokens._encoding()
    if enc is None:
        pytest.skip("no tiktoken")
    wrong = types.SimpleNamespace(tokenizer_for_encoding=lambda name: types.SimpleNamespace(count=len))
    monkeypatch.setitem(sys.modules, "bpe_openai._bindings", wrong)
    tokens._fast_count.cache_clear()
    try:
        assert tokens._fast_count(enc) is None
        assert count_text_tokens("hello world") == tiktoken_count("hello world")
    finally:
        tokens._fast_count.cache_clear()


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
