from __future__ import annotations

import copy
from typing import Any

import pytest

from agent_compression.validate import LOST_RESULT, NO_REPLY_PLACEHOLDER, repair_messages, validate_messages
from tests.compression.builders import assistant, call, calls, result, system, user


def codes(messages: Any, profile: str = "openai") -> list[str]:
    return [v.code for v in validate_messages(messages, profile)]  # type: ignore[arg-type]


def test_it_accepts_a_well_formed_history() -> None:
    history = [system(), user("hi"), calls(call("a"), call("b")), result("b"), result("a"), assistant("done")]
    assert validate_messages(history) == []
    assert validate_messages(history, "strict") == []


def test_it_rejects_a_leading_tool_result() -> None:
    assert codes([result("a"), user("hi")]) == ["orphan_tool_result"]


def test_it_rejects_a_result_after_a_non_tool_message() -> None:
    history = [user("x"), calls(call("a")), result("a"), user("y"), result("a")]
    assert codes(history) == ["orphan_tool_result"]


def test_it_rejects_a_result_separated_from_its_call_and_reports_the_missing_result() -> None:
    history = [user("x"), calls(call("a")), user("wait"), result("a")]
    assert codes(history) == ["missing_tool_result", "orphan_tool_result"]


def test_it_rejects_duplicate_results() -> None:
    assert codes([user("x"), calls(call("a")), result("a"), result("a")]) == ["duplicate_tool_result"]


def test_it_accepts_in_flight_calls_at_the_very_end() -> None:
    assert validate_messages([user("x"), calls(call("a"), call("b")), result("a")]) == []


def test_it_rejects_unknown_roles_and_bad_content() -> None:
    history: list[Any] = [{"role": "robot", "content": "x"}, {"role": "user", "content": 3}, "junk"]
    assert codes(history) == ["unknown_role", "bad_content", "not_an_object"]


def test_it_rejects_null_content_outside_tool_calls() -> None:
    assert codes([user("x"), assistant(None)]) == ["bad_content"]
    assert codes([user("x"), calls(call("a")), result("a")]) == []


def test_it_rejects_malformed_tool_calls() -> None:
    bad = {"role": "assistant", "content": None, "tool_calls": [{"id": "a", "function": {"name": "x"}}]}
    assert "bad_tool_calls" in codes([user("x"), bad])


def test_it_applies_strict_rules_only_in_the_strict_profile() -> None:
    history = [user("a"), user("b"), assistant("c"), assistant("d"), system("late")]
    assert validate_messages(history) == []
    assert codes(history, "strict") == ["consecutive_same_role", "consecutive_same_role", "system_not_at_start"]
    assert codes([system(), assistant("hi")], "strict") == ["first_not_user"]


def test_it_removes_leading_and_orphan_results() -> None:
    fixed, report = repair_messages([result("zz"), user("x"), result("yy"), assistant("ok")])
    assert fixed == [user("x"), assistant("ok")]
    assert [d["reason"] for d in report.dropped] == ["orphan tool result", "orphan tool result"]


def test_it_moves_a_result_back_next_to_its_call() -> None:
    history = [user("x"), calls(call("a")), user("interjection"), result("a", "42"), assistant("done")]
    fixed, report = repair_messages(history)
    assert fixed == [user("x"), calls(call("a")), result("a", "42"), user("interjection"), assistant("done")]
    assert report.moved == [{"index": 3, "to_follow": 1}]


def test_it_patches_results_that_can_no_longer_arrive() -> None:
    fixed, report = repair_messages([user("x"), calls(call("a"), call("b")), result("b"), user("next")])
    assert fixed[2:4] == [result("b"), {"role": "tool", "tool_call_id": "a", "content": LOST_RESULT}]
    assert report.patched == ["a"]


def test_it_keeps_in_flight_calls_at_the_end_untouched() -> None:
    history = [user("x"), calls(call("a"), call("b")), result("a")]
    fixed, report = repair_messages(history)
    assert fixed == history
    assert not report.changed


def test_it_drops_duplicate_results() -> None:
    fixed, report = repair_messages([user("x"), calls(call("a")), result("a", "1"), result("a", "2")])
    assert fixed == [user("x"), calls(call("a")), result("a", "1")]
    assert report.dropped == [{"index": 3, "reason": "duplicate tool result"}]


def test_it_fixes_content_and_tool_call_shapes() -> None:
    history: list[Any] = [
        {"role": "user", "content": None},
        {"role": "assistant", "content": None, "tool_calls": []},
        {"role": "assistant", "content": None, "tool_calls": [{"id": "a", "function": {"name": "f", "arguments": {}}}]},
        {"role": "tool", "tool_call_id": "a", "content": {"x": 1}},
    ]
    fixed, _ = repair_messages(history)
    assert validate_messages(fixed) == []
    assert fixed[2]["tool_calls"][0]["function"]["arguments"] == "{}"
    assert fixed[3]["content"] == '{"x": 1}'


def test_it_never_mutates_its_input() -> None:
    history: list[Any] = [result("q"), {"role": "user", "content": None}, calls(call("a")), user("y"), "junk"]
    before = copy.deepcopy(history)
    repair_messages(history, "strict")
    assert history == before


def test_it_reuses_unchanged_messages() -> None:
    history = [user("x"), assistant("y")]
    fixed, _ = repair_messages(history)
    assert fixed[0] is history[0] and fixed[1] is history[1]


def test_it_merges_same_role_neighbours_in_the_strict_profile() -> None:
    history = [system(), assistant("hello"), assistant("again"), user("a"), user("b"), system("late"), user("c")]
    fixed, report = repair_messages(history, "strict")
    assert validate_messages(fixed, "strict") == []
    assert fixed[1]["role"] == "user"  # a placeholder opens the conversation
    assert fixed[2] == assistant("hello\n\nagain")
    assert fixed[-1] == user("c")  # the latest user message stays verbatim
    assert fixed[-2] == assistant(NO_REPLY_PLACEHOLDER)
    assert report.merged


@pytest.mark.parametrize("profile", ["openai", "strict"])
def test_it_is_idempotent(profile: str) -> None:
    history: list[Any] = [result("o"), user("x"), user("y"), calls(call("a"), call("b")), user("z"), result("a")]
    once, _ = repair_messages(history, profile)  # type: ignore[arg-type]
    twice, report = repair_messages(once, profile)  # type: ignore[arg-type]
    assert twice == once
    assert not report.changed


def test_it_rejects_an_unknown_profile() -> None:
    with pytest.raises(ValueError):
        validate_messages([], "anthropic")  # type: ignore[arg-type]


class TestToolCallIdsRepeatedAcrossMessages:
    """Old OpenAI logs (tau-bench's gpt-4o runs) reuse ids across turns; strict providers reject it."""

    def history(self) -> list[dict]:
        return [
            user("book it"),
            calls(call("call_1", "search")),
            result("call_1", "3 flights"),
            assistant("Found three."),
            user("the first one"),
            calls(call("call_1", "book")),
            result("call_1", "booked"),
            assistant("Booked."),
            user("and a seat"),
            calls(call("call_1", "seat")),  # in flight: its result will come with this id
        ]

    def test_the_strict_profile_reports_them(self) -> None:
        violations = validate_messages(self.history(), "strict")
        assert [(v.index, v.code) for v in violations] == [(5, "duplicate_tool_call_id"), (9, "duplicate_tool_call_id")]
        assert validate_messages(self.history()) == []  # the openai profile accepts them

    def test_repair_renames_a_call_and_its_result_together_and_keeps_the_last_id(self) -> None:
        fixed, report = repair_messages(self.history(), "strict")
        assert validate_messages(fixed, "strict") == []
        ids = [(m["role"], m.get("tool_call_id") or m["tool_calls"][0]["id"]) for m in fixed if m["role"] != "user"
               and (m.get("tool_calls") or m["role"] == "tool")]  # fmt: skip
        assert ids == [
            ("assistant", "call_1_2"),
            ("tool", "call_1_2"),
            ("assistant", "call_1_3"),
            ("tool", "call_1_3"),
            ("assistant", "call_1"),
        ]
        assert [m["content"] for m in fixed if m["role"] == "tool"] == ["3 flights", "booked"]
        assert any("renamed" in " ".join(f["changes"]) for f in report.fixed)
        again, second = repair_messages(fixed, "strict")
        assert again == fixed and not second.changed

    def test_a_fresh_id_never_collides_with_one_in_use(self) -> None:
        history = [user("go"), calls(call("a")), result("a"), calls(call("a_2")), result("a_2")]
        history += [user("again"), calls(call("a")), result("a")]
        fixed, _ = repair_messages(history, "strict")
        assert validate_messages(fixed, "strict") == []
        assert [m["tool_call_id"] for m in fixed if m["role"] == "tool"] == ["a_3", "a_2", "a"]
