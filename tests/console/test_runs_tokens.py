"""A compression run in the console takes the token counts stored with each message: it never
tokenizes a stored message again (they were counted once, when stored)."""

from __future__ import annotations

import json
from typing import Any

import pytest

from agent_compression import tokens
from console.models import CompressionRun, Message
from console.services.sessions import ImportedSession, create_session
from tests.console.factories import SMALL_WINDOW, compress_now

pytestmark = pytest.mark.django_db


def history() -> list[dict[str, Any]]:
    messages: list[dict[str, Any]] = [
        {"role": "system", "content": "You are a coding agent."},
        {"role": "user", "content": "Find out why the nightly export fails. Do not touch infra/."},
    ]
    for i in range(30):
        args = json.dumps({"cmd": f"cat logs/export_{i}.log"})
        messages += [
            {"role": "user", "content": f"now look at batch {i}"},
            {
                "role": "assistant",
                "content": None,
                "tool_calls": [
                    {"id": f"c{i}", "type": "function", "function": {"name": "terminal", "arguments": args}}
                ],
            },
            {
                "role": "tool",
                "tool_call_id": f"c{i}",
                "name": "terminal",
                "content": "".join(f"10:{n:02d} wrote {n * i} rows of batch {i}\n" for n in range(40)),
            },
            {"role": "assistant", "content": f"Batch {i} was written."},
        ]
    messages.append({"role": "user", "content": "Summarize what you found."})
    return messages


def stored_texts(messages: list[dict[str, Any]]) -> set[str]:
    """The contents and tool-call arguments of ``messages``: what counting them would encode
    (tool names are left out: a pruned result keeps its name, and names are a word or two)."""
    out = {m["content"] for m in messages if isinstance(m.get("content"), str)}
    out |= {c["function"]["arguments"] for m in messages for c in m.get("tool_calls") or ()}
    return out


def test_a_run_does_not_tokenize_the_stored_messages_again(monkeypatch: pytest.MonkeyPatch) -> None:
    session = create_session(ImportedSession(key="tokens:counted-once", messages=history(), metadata={}))
    stored = Message.load(session.keys())
    tokens.default_counter.clear()  # as in a fresh worker process: nothing cached from storing them
    encoded: list[str] = []
    real = tokens._encode_len

    def spy(enc: Any, text: str) -> int:
        encoded.append(text)
        return real(enc, text)

    monkeypatch.setattr(tokens, "_encode_len", spy)

    run = compress_now(session, config=SMALL_WINDOW)

    assert run.status == CompressionRun.Status.SUCCEEDED and run.was_compressed
    assert run.tokens_before == Message.token_total(run.input_keys)
    assert encoded, "the run wrote messages (summary, pruned results) and counted those"
    again = stored_texts(stored) & set(encoded)
    assert not again, f"{len(again)} stored texts were tokenized again, e.g. {sorted(again)[0][:60]!r}"
    session.refresh_from_db()
    assert session.token_count == Message.token_total(session.keys())
