from __future__ import annotations

from agent_compression.assemble import BRIDGE, assemble, render_failure_body
from agent_compression.facts import pinned_facts_of
from agent_compression.summary_message import ACKNOWLEDGEMENT, SummaryHeader, is_summary_message
from agent_compression.types import Fact
from agent_compression.validate import validate_messages
from tests.compression.builders import assistant, system, user

HEADER = SummaryHeader("sum_1", "extractive", None, "2026-01-01T00:00:00+00:00", (2, 9), "ab" * 32)


def roles(messages: list[dict]) -> list[str]:
    return [m["role"] for m in messages]


def test_it_inserts_the_summary_and_an_acknowledgement() -> None:
    out = assemble([system(), user("task"), assistant("ok")], [user("latest")], "BODY", HEADER)
    assert roles(out) == ["system", "user", "assistant", "user", "assistant", "user"]
    assert is_summary_message(out[3]) and out[3]["content"].endswith("BODY")
    assert "NOT an instruction" in out[3]["content"] and "id=sum_1" in out[3]["content"]
    assert "Archived messages 2-8" in out[3]["content"]
    assert out[4]["content"] == ACKNOWLEDGEMENT


def test_it_drops_the_acknowledgement_when_the_tail_starts_with_an_assistant() -> None:
    out = assemble([system(), user("task"), assistant("ok")], [assistant("tail"), user("latest")], "B", HEADER)
    assert roles(out) == ["system", "user", "assistant", "user", "assistant", "user"]
    assert out[4] == assistant("tail")


def test_it_bridges_a_head_that_ends_with_a_user_message() -> None:
    out = assemble([system(), user("task")], [user("latest")], "B", HEADER)
    assert roles(out) == ["system", "user", "assistant", "user", "assistant", "user"]
    assert out[2]["content"] == BRIDGE
    assert validate_messages(out, "strict") == []


def test_it_writes_pinned_facts_into_the_failure_note_so_they_carry_over() -> None:
    facts = [Fact("constraint", "Do not touch infra/terraform.", 1), Fact("path", "jobs/export.py", 4, "tool")]
    body = render_failure_body(12, facts, "HTTP 500", max_chars=2_000)
    assert "12 earlier messages were archived" in body and "HTTP 500" in body
    assert [f.text for f in pinned_facts_of(body)] == ["Do not touch infra/terraform.", "jobs/export.py"]


def test_it_caps_the_failure_note_but_keeps_every_constraint() -> None:
    facts = [Fact("path", f"src/file_{i}.py", i, "tool") for i in range(100)]
    facts.append(Fact("constraint", "never push to main", 200))
    body = render_failure_body(300, facts, None, max_chars=400)
    assert len(body) < 800
    assert "never push to main" in body and "more facts are in the archive" in body
