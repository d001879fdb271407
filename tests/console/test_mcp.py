"""The MCP server with the official ``mcp`` client: over streamable HTTP (uvicorn, as ``manage.py mcp`` runs it)
and over stdio (``manage.py mcp --stdio`` as a subprocess), against a session whose early rule was archived."""

from __future__ import annotations

import asyncio
import concurrent.futures
import os
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx2
import pytest
import uvicorn
from mcp import Client
from mcp.client.stdio import StdioServerParameters
from mcp.client.streamable_http import streamable_http_client

from console import mcp_server
from console.apikeys import create_api_key
from console.models import Session
from console.services.sessions import ImportedSession, create_session
from tests.console.factories import SECRET, compress_now
from tests.console.workers import worker_database_url
from tests.faults.conftest import free_port

pytestmark = pytest.mark.django_db(transaction=True)

RULE = "Never deploy on Fridays without asking me first."
TOOLS = ("list_summaries", "read_archived_message", "search_archive")


def _session() -> Session:
    messages: list[dict[str, Any]] = [
        {"role": "system", "content": "You are a release agent."},
        {"role": "user", "content": "Prepare the release of the billing service."},
    ]
    for turn in range(14):
        text = RULE if turn == 1 else f"Step {turn}: check module {turn} (token {SECRET})."
        messages += [
            {"role": "user", "content": text},
            {"role": "assistant", "content": f"Checked module {turn}. " + "All tests pass. " * 60},
        ]
    session = create_session(ImportedSession(key="mcp:release", messages=messages, metadata={}))
    run = compress_now(session)
    assert run.applied and run.was_compressed
    return Session.objects.get(pk=session.pk)


@pytest.fixture
def http_server() -> Iterator[str]:
    port = free_port()
    server = uvicorn.Server(uvicorn.Config(mcp_server.http_app(), host="127.0.0.1", port=port, log_level="warning"))
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    deadline = time.monotonic() + 20
    while not server.started:
        assert time.monotonic() < deadline, "the MCP server did not start"
        time.sleep(0.05)
    yield f"http://127.0.0.1:{port}/mcp/"
    server.should_exit = True
    thread.join(10)


def _run(main: Any) -> Any:
    """``asyncio.run(main())`` in a thread of its own: another test in this process (the browser's sync API) may
    have an event loop running in the main thread, where ``asyncio.run`` refuses to start."""
    with concurrent.futures.ThreadPoolExecutor(1) as pool:
        return pool.submit(lambda: asyncio.run(main())).result(timeout=120)


def _over_http(url: str, key: str, work: Any) -> Any:
    async def main() -> Any:
        transport = streamable_http_client(
            url, http_client=httpx2.AsyncClient(headers={"Authorization": f"Bearer {key}"})
        )
        async with Client(transport) as client:
            return await work(client)

    return _run(main)


async def _find_the_rule(client: Client) -> dict[str, Any]:
    tools = sorted(tool.name for tool in (await client.list_tools()).tools)
    found = await client.call_tool("search_archive", {"session": "mcp:release", "query": "deploy on Fridays"})
    hit = found.structured_content["hits"][0]
    original = await client.call_tool(
        "read_archived_message", {"session": "mcp:release", "history_index": hit["history_index"]}
    )
    listed = await client.call_tool("list_summaries", {"session": "mcp:release"})
    secret = await client.call_tool("search_archive", {"session": "mcp:release", "query": "token"})
    return {
        "tools": tools,
        "hit": hit,
        "original": original.structured_content,
        "summaries": listed.structured_content["summaries"],
        "secret": secret.structured_content["hits"],
    }


def test_an_mcp_client_finds_an_archived_constraint_over_http(http_server: str) -> None:
    session = _session()
    key = create_api_key("mcp-agent", "viewer")[1]

    seen = _over_http(http_server, key, _find_the_rule)

    assert seen["tools"] == list(TOOLS)
    assert seen["hit"]["history_index"] == 4  # system, task, step 0 and its answer, then the rule
    assert seen["original"]["content"] == RULE and seen["original"]["role"] == "user"
    summary = seen["summaries"][0]
    assert summary["live"] and summary["history_range"][0] <= 4 <= summary["history_range"][1]
    assert session.archives.get().inserted_id == summary["summary_id"]
    # masked for a key without reveal: the search shows the placeholder, never the secret
    assert seen["secret"] and all(
        SECRET not in hit["snippet"] and "[secret:" in hit["snippet"] for hit in seen["secret"]
    )


def test_the_mcp_server_refuses_a_request_without_a_key(http_server: str) -> None:
    response = httpx2.post(http_server, json={"jsonrpc": "2.0", "id": 1, "method": "tools/list"})
    assert response.status_code == 401


def test_an_mcp_client_over_stdio(settings: Any) -> None:
    _session()
    key = create_api_key("mcp-local", "viewer")[1]
    root = Path(__file__).resolve().parents[2]
    env = {k: v for k, v in os.environ.items() if k not in {"DATABASE_URL", "REDIS_URL"}}
    env |= {"CONSOLE_API_KEY": key, "DATABASE_URL": worker_database_url()}
    params = StdioServerParameters(command=sys.executable, args=[str(root / "manage.py"), "mcp", "--stdio"], env=env)

    async def main() -> Any:
        async with Client(params) as client:
            return await _find_the_rule(client)

    seen = _run(main)
    assert seen["tools"] == list(TOOLS)
    assert seen["original"]["content"] == RULE


def test_with_mcp_enabled_the_summary_tells_the_agent_how_to_read_the_originals(settings: Any) -> None:
    settings.MCP_ENABLED = True
    live = _session().messages()
    summary = next(m for m in live if m["role"] == "user" and "search_archive" in m["content"])
    assert 'session "mcp:release"' in summary["content"] and "read_archived_message" in summary["content"]


def test_without_mcp_the_summary_names_no_tools() -> None:
    assert not any("read_archived_message" in str(m.get("content")) for m in _session().messages())
