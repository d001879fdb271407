from __future__ import annotations

from agent_compression.messages import (
    canonical_json,
    copy_json,
    latest_user_index,
    message_sha256,
    messages_sha256,
    tool_call_ids,
)
from tests.compression.builders import assistant, call, calls, result, user


def test_it_writes_canonical_json_sorted_compact_and_unescaped() -> None:
    assert canonical_json({"b": 1, "a": "不要"}) == '{"a":"不要","b":1}'


def test_it_hashes_equal_messages_equally_whatever_the_key_order() -> None:
    assert message_sha256({"role": "user", "content": "x"}) == message_sha256({"content": "x", "role": "user"})
    assert len(messages_sha256([user("x")])) == 64


def test_it_hashes_order_into_a_list_digest() -> None:
    assert messages_sha256([user("a"), user("b")]) != messages_sha256([user("b"), user("a")])


def test_it_finds_the_latest_user_message() -> None:
    assert latest_user_index([user("a"), assistant(), user("b"), assistant()]) == 2
    assert latest_user_index([assistant(), "junk"]) is None


def test_it_lists_tool_call_ids_in_order() -> None:
    message = calls(call("c1"), call("c2"))
    assert tool_call_ids(message) == ["c1", "c2"]
    assert tool_call_ids(result("c1")) == []


def test_it_deep_copies_json_data() -> None:
    original = [{"role": "user", "content": [{"type": "text", "text": "x"}]}]
    copied = copy_json(original)
    copied[0]["content"][0]["text"] = "changed"
    assert original[0]["content"][0]["text"] == "x"
