"""Proxy mode driven by the official ``openai`` SDK against a live console and a loopback upstream.

The upstream (``tests.fakes.chat_upstream``) is a real HTTP server; the console is pytest-django's live
server. Nothing of the console is mocked.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from typing import Any

import openai
import pytest
from django.db import connection

from agent_compression import validate_messages
from agent_compression.tokens import count_tokens
from console.apikeys import create_api_key
from console.models import CompressionRun, ProxyCall, ProxyConversation, Session
from console.proxy.auth import forget_all
from console.services.proxy import pending_count
from tests.console.factories import superuser_client
from tests.fakes.chat_upstream import MODEL, ChatUpstream

UPSTREAM_KEY = "sk-upstream-test-key-123"
TOOLS = [
    {
        "type": "function",
        "function": {
            "name": "read_file",
            "description": "Read a file of the repository",
            "parameters": {"type": "object", "properties": {"turn": {"type": "integer"}}},
        },
    }
]
RULE = "Never run migrations against the production database; ask me first."


@pytest.fixture
def upstream(settings: Any) -> Iterator[ChatUpstream]:
    with ChatUpstream() as server:
        settings.PROXY_UPSTREAM_BASE_URL = server.url
        settings.PROXY_UPSTREAM_API_KEY = UPSTREAM_KEY
        settings.PROXY_COMPRESS_BUDGET_MS = 20_000  # the test machine is shared: wait for the compression
        forget_all()
        yield server
    forget_all()


@pytest.fixture
def client(live_server: Any, upstream: ChatUpstream) -> openai.OpenAI:
    key = create_api_key("proxy-runtime", "operator")[1]
    return openai.OpenAI(base_url=f"{live_server.url}/proxy/v1", api_key=key, max_retries=0)


def recorded(calls: int, session: str, timeout: float = 60.0) -> Session:
    """The session once ``calls`` calls are recorded (recording happens after the answer went to the runtime)."""
    deadline = time.monotonic() + timeout
    while ProxyCall.objects.filter(session__proxy_conversations__key=session).count() < calls:
        assert time.monotonic() < deadline, f"{session}: fewer than {calls} calls recorded"
        time.sleep(0.02)
    return ProxyConversation.objects.get(key=session).session


def _headers(session: str, window: int | None = None) -> dict[str, str]:
    headers = {"X-Session-Key": session}
    if window:
        headers["X-Context-Window-Tokens"] = str(window)
    return headers


def test_a_plain_call_is_relayed_and_stored(client: openai.OpenAI, upstream: ChatUpstream) -> None:
    messages = [{"role": "system", "content": "You are terse."}, {"role": "user", "content": "Say hello"}]
    raw = client.chat.completions.with_raw_response.create(
        model=MODEL, messages=messages, extra_headers=_headers("rt:plain")
    )
    completion = raw.parse()

    assert completion.choices[0].message.content == "Done: Say hello"
    assert raw.headers["X-Compression-Proxy"] == "forwarded"
    sent = upstream.chat_requests()[0]
    assert sent.headers["authorization"] == f"Bearer {UPSTREAM_KEY}"  # the upstream's key, not the console's
    assert sent.messages == messages
    session = recorded(1, "rt:plain")
    assert session.metadata["proxied"] is True
    assert [m["role"] for m in session.messages()] == ["system", "user", "assistant"]
    call = ProxyCall.objects.get(session=session)
    assert (call.status_code, call.finish_reason, call.usage["total_tokens"]) == (200, "stop", 15)
    assert call.position == 2


def test_models_are_passed_through(client: openai.OpenAI) -> None:
    assert [m.id for m in client.models.list()] == [MODEL]


def test_streaming_is_relayed_chunk_by_chunk_and_the_answer_stored(
    client: openai.OpenAI, upstream: ChatUpstream
) -> None:
    messages = [{"role": "user", "content": "Stream a sentence about compression please"}]
    chunks = list(
        client.chat.completions.create(
            model=MODEL,
            messages=messages,
            stream=True,
            stream_options={"include_usage": True},
            extra_headers=_headers("rt:stream"),
        )
    )

    text = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
    assert text == "Done: Stream a sentence about compression please"
    assert len(chunks) > 5  # relayed as the upstream sent them, not one buffered block
    stored = recorded(1, "rt:stream").messages()
    assert stored[-1] == {"role": "assistant", "content": text}
    call = ProxyCall.objects.get(session__key="rt:stream")
    assert call.stream and call.finish_reason == "stop" and call.usage["completion_tokens"] == 5


def test_streamed_tool_calls_are_assembled_and_stored(client: openai.OpenAI) -> None:
    messages = [{"role": "user", "content": "Read the config"}]
    stream = client.chat.completions.create(
        model=MODEL, messages=messages, tools=TOOLS, stream=True, extra_headers=_headers("rt:tools")
    )
    arguments = "".join(
        c.choices[0].delta.tool_calls[0].function.arguments or ""
        for c in stream
        if c.choices and c.choices[0].delta.tool_calls
    )

    assert json.loads(arguments) == {"turn": 1}
    answer = recorded(1, "rt:tools").messages()[-1]
    assert answer["tool_calls"][0]["function"] == {"name": "read_file", "arguments": arguments}
    assert ProxyCall.objects.get(session__key="rt:tools").finish_reason == "tool_calls"


@pytest.mark.parametrize("status", [429, 500])
def test_upstream_errors_reach_the_runtime_unchanged(
    client: openai.OpenAI, upstream: ChatUpstream, status: int
) -> None:
    upstream.script(("status", status, {"Retry-After": "7"}))
    error_type = openai.RateLimitError if status == 429 else openai.InternalServerError
    with pytest.raises(error_type) as caught:
        client.chat.completions.create(
            model=MODEL, messages=[{"role": "user", "content": "hi"}], extra_headers=_headers(f"rt:err{status}")
        )

    response = caught.value.response
    assert response.status_code == status
    assert response.headers["Retry-After"] == "7"
    assert response.json() == {"error": {"message": f"scripted {status}", "type": caught.value.type}}
    call = ProxyCall.objects.get(session=recorded(1, f"rt:err{status}"))
    assert call.status_code == status and call.position is None  # the user's message stored, no answer


def test_a_bad_key_is_refused_in_the_openai_format(live_server: Any, upstream: ChatUpstream) -> None:
    bad = openai.OpenAI(base_url=f"{live_server.url}/proxy/v1", api_key="ccs_nope_nope", max_retries=0)
    with pytest.raises(openai.AuthenticationError):
        bad.chat.completions.create(model=MODEL, messages=[{"role": "user", "content": "hi"}])
    assert upstream.chat_requests() == []


def test_a_viewer_key_may_not_store_sessions(live_server: Any, upstream: ChatUpstream) -> None:
    key = create_api_key("proxy-viewer", "viewer")[1]
    viewer = openai.OpenAI(base_url=f"{live_server.url}/proxy/v1", api_key=key, max_retries=0)
    with pytest.raises(openai.PermissionDeniedError):
        viewer.chat.completions.create(model=MODEL, messages=[{"role": "user", "content": "hi"}])


def test_a_per_request_upstream_key_is_used_and_never_stored(client: openai.OpenAI, upstream: ChatUpstream) -> None:
    tenant_key = "sk-tenant-secret-987654321"
    client.chat.completions.create(
        model=MODEL,
        messages=[{"role": "user", "content": "hi"}],
        extra_headers=_headers("rt:tenant") | {"X-Upstream-Authorization": f"Bearer {tenant_key}"},
    )
    assert upstream.chat_requests()[-1].headers["authorization"] == f"Bearer {tenant_key}"
    recorded(1, "rt:tenant")
    with connection.cursor() as cursor:
        for table in connection.introspection.table_names(cursor):
            cursor.execute(f'SELECT * FROM "{table}"')  # noqa: S608 - table names from the schema
            assert tenant_key not in repr(cursor.fetchall()), table


def test_a_history_that_diverges_is_recorded_as_a_fork(client: openai.OpenAI) -> None:
    first = [{"role": "user", "content": "Plan the release"}]
    client.chat.completions.create(model=MODEL, messages=first, extra_headers=_headers("rt:fork"))
    recorded(1, "rt:fork")
    edited = [{"role": "user", "content": "Plan the rollback instead"}]
    raw = client.chat.completions.with_raw_response.create(
        model=MODEL, messages=edited, extra_headers=_headers("rt:fork")
    )

    assert raw.headers["X-Compression-Proxy"] == "diverged"
    recorded(1, "rt:fork")
    deadline = time.monotonic() + 60
    while not Session.objects.filter(key="rt:fork~1").exists():
        assert time.monotonic() < deadline
        time.sleep(0.02)
    original = Session.objects.get(key="rt:fork")
    assert [m["content"] for m in original.messages()] == ["Plan the release", "Done: Plan the release"]
    fork = Session.objects.get(key="rt:fork~1")
    assert fork.metadata["forked_from"] == "rt:fork"
    assert fork.messages()[0]["content"] == "Plan the rollback instead"
    assert ProxyConversation.objects.get(key="rt:fork").session == fork


def test_without_a_session_key_one_is_derived_from_the_opening(client: openai.OpenAI) -> None:
    history = [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "First question"}]
    raw = client.chat.completions.with_raw_response.create(model=MODEL, messages=history)
    key = raw.headers["X-Compression-Session"]
    answer = raw.parse().choices[0].message.model_dump(exclude_none=True)
    history += [answer, {"role": "user", "content": "Second question"}]
    again = client.chat.completions.with_raw_response.create(model=MODEL, messages=history)

    assert key.startswith("proxy-") and again.headers["X-Compression-Session"] == key
    assert again.headers["X-Compression-Proxy"] == "forwarded"
    assert len(recorded(2, key).messages()) == 5


def _streamed_message(stream: Any) -> dict[str, Any]:
    """The assistant message a runtime assembles from a stream (content and tool-call deltas)."""
    content, calls = "", {}
    for chunk in stream:
        if not chunk.choices:
            continue
        delta = chunk.choices[0].delta
        content += delta.content or ""
        for call in delta.tool_calls or []:
            slot = calls.setdefault(
                call.index, {"id": "", "type": "function", "function": {"name": "", "arguments": ""}}
            )
            slot["id"] = call.id or slot["id"]
            slot["function"]["name"] += (call.function.name or "") if call.function else ""
            slot["function"]["arguments"] += (call.function.arguments or "") if call.function else ""
    message: dict[str, Any] = {"role": "assistant", "content": content or None}
    if calls:
        message["tool_calls"] = [calls[i] for i in sorted(calls)]
    return message


def _agent_turn(
    client: openai.OpenAI, history: list[dict[str, Any]], user_text: str, stream: bool, lengths: list[int]
) -> list[str]:
    """One user turn of a tool-using agent: the model calls a tool, gets its result, answers. Returns headers."""
    history.append({"role": "user", "content": user_text})
    handled = []
    while True:
        lengths.append(len(history))
        raw = client.chat.completions.with_raw_response.create(
            model=MODEL, messages=history, tools=TOOLS, stream=stream, extra_headers=_headers("rt:agent", 6000)
        )
        handled.append(raw.headers["X-Compression-Proxy"])
        if stream:
            message = _streamed_message(raw.parse())
        else:
            message = raw.parse().choices[0].message.model_dump(exclude_none=True)
        history.append(message)
        if not message.get("tool_calls"):
            return handled
        for call in message["tool_calls"]:
            output = f"contents of module_{len(history)}.py:\n" + "def step():\n    return 'value'\n" * 25
            history.append({"role": "tool", "tool_call_id": call["id"], "content": output})


@pytest.mark.xfail(
    connection.vendor != "sqlite",
    reason="known bug (issue 36 note): on PostgreSQL the live history read for a later call lacks a tool result "
    "(missing_tool_result / orphan_tool_result); the proxy now validates and bypasses such a history, so the "
    "runtime gets its own messages, but the call is not compressed as it should be",
    strict=False,
)
def test_a_24_turn_tool_calling_conversation(client: openai.OpenAI, upstream: ChatUpstream) -> None:
    history: list[dict[str, Any]] = [{"role": "system", "content": "You are a careful coding agent."}]
    handled: list[str] = []
    lengths: list[int] = []
    for turn in range(24):
        text = RULE if turn == 0 else f"Turn {turn}: continue with the refactoring of part {turn}."
        handled += _agent_turn(client, history, text, turn % 3 == 0, lengths)

    session = recorded(48, "rt:agent")
    runs = list(CompressionRun.objects.filter(session=session, trigger="proxy"))
    assert len(runs) == 1 and runs[0].applied and runs[0].was_compressed, [(r.status, r.warnings) for r in runs]
    assert handled.count("compressed") == 1 and "bypass" not in handled, handled
    sent = upstream.chat_requests()
    assert len(sent) == 48 and all(r.headers["authorization"] == f"Bearer {UPSTREAM_KEY}" for r in sent)
    compressed_at = handled.index("compressed")
    for number, (request, length) in enumerate(zip(sent, lengths, strict=True)):
        runtime = history[:length]
        assert validate_messages(request.messages) == [], number
        assert RULE in json.dumps(request.messages, ensure_ascii=False), number  # the early rule reaches upstream
        assert request.messages[-1] == runtime[-1], number  # the latest message goes verbatim
        latest_user = [m for m in runtime if m["role"] == "user"][-1]
        assert latest_user in request.messages, number
        if number >= compressed_at:
            assert count_tokens(request.messages) < count_tokens(runtime), number
            assert len(request.messages) < len(runtime), number
        else:
            assert request.messages == runtime, number
    # all stored: the runtime's history lives in the session, compressed, its middle in the archive
    assert ProxyCall.objects.filter(session=session).count() == 48
    assert ProxyCall.objects.filter(session=session, stream=True).count() == 16
    archive = session.archives.get()
    assert archive.run == runs[0] and len(archive.message_keys) > 10
    assert session.messages()[-1] == history[-1]
    assert session.token_count < count_tokens(history)


@pytest.mark.skipif(
    connection.vendor != "sqlite",
    reason="the outage is simulated by moving the SQLite file; a PostgreSQL live server keeps its own connection "
    "in its thread (an outage of it needs a private server: not written yet)",
)
def test_the_console_database_down_does_not_fail_the_runtime(
    client: openai.OpenAI, upstream: ChatUpstream, settings: Any
) -> None:
    history = [{"role": "user", "content": "Start the task"}]
    first = client.chat.completions.create(model=MODEL, messages=history, extra_headers=_headers("rt:down"))
    history += [first.choices[0].message.model_dump(exclude_none=True), {"role": "user", "content": "Go on"}]
    recorded(1, "rt:down")
    saved = dict(connection.settings_dict)
    connection.close()
    if connection.vendor == "sqlite":
        connection.settings_dict["NAME"] = "/nonexistent-folder/console.sqlite3"
    else:
        connection.settings_dict["PORT"] = "1"
    try:
        raw = client.chat.completions.with_raw_response.create(
            model=MODEL, messages=history, extra_headers=_headers("rt:down")
        )
        assert raw.parse().choices[0].message.content == "Done: Go on"
        assert raw.headers["X-Compression-Proxy"] == "bypass"
        assert "database" in raw.headers["X-Compression-Proxy-Reason"]
        assert upstream.chat_requests()[-1].messages == history
    finally:
        connection.close()
        connection.settings_dict.clear()
        connection.settings_dict.update(saved)
    assert pending_count() == 1
    history += [raw.parse().choices[0].message.model_dump(exclude_none=True), {"role": "user", "content": "Last"}]
    client.chat.completions.create(model=MODEL, messages=history, extra_headers=_headers("rt:down"))

    stored = [m["content"] for m in recorded(3, "rt:down").messages()]
    assert pending_count() == 0
    assert stored == ["Start the task", "Done: Start the task", "Go on", "Done: Go on", "Last", "Done: Last"]


def test_the_session_page_shows_a_proxied_session(client: openai.OpenAI) -> None:
    client.chat.completions.create(
        model=MODEL, messages=[{"role": "user", "content": "hi"}], extra_headers=_headers("rt:page")
    )
    session = recorded(1, "rt:page")
    page = superuser_client().get(f"/sessions/{session.pk}/")
    assert page.status_code == 200
    html = page.content.decode()
    assert "through /proxy/v1" in html and "1 call relayed to the model" in html
