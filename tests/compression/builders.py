"""Small message builders and a local fake summarizer for the compression tests."""

from __future__ import annotations

import json
from typing import Any

from agent_compression.types import SummaryOutcome, SummaryRequest


def system(text: str = "You are a helpful agent.") -> dict[str, Any]:
    return {"role": "system", "content": text}


def user(text: str) -> dict[str, Any]:
    return {"role": "user", "content": text}


def assistant(text: str | None = "ok") -> dict[str, Any]:
    return {"role": "assistant", "content": text}


def call(call_id: str, name: str = "read_file", **arguments: Any) -> dict[str, Any]:
    return {"id": call_id, "type": "function", "function": {"name": name, "arguments": json.dumps(arguments)}}


def calls(*tool_calls: dict[str, Any], text: str | None = None) -> dict[str, Any]:
    return {"role": "assistant", "content": text, "tool_calls": list(tool_calls)}


def result(call_id: str, content: str = "done", name: str | None = None) -> dict[str, Any]:
    message: dict[str, Any] = {"role": "tool", "tool_call_id": call_id, "content": content}
    if name is not None:
        message["name"] = name
    return message


def session(turns: int, output_chars: int = 2_000) -> list[dict[str, Any]]:
    """A well-formed coding session: each turn is user, a tool call, its result, an answer."""
    messages = [system(), user("Fix the export job. Do not touch infra/terraform.")]
    for t in range(turns):
        messages += [
            user(f"step {t}: look at module_{t}.py"),
            calls(call(f"c{t}", "read_file", path=f"src/module_{t}.py")),
            result(f"c{t}", "\n".join(f"line {i} of module {t}" for i in range(output_chars // 20)), "read_file"),
            assistant(f"module_{t}.py looks fine"),
        ]
    messages.append(user("now run the tests"))
    return messages


class FakeSummarizer:
    """Implements the Summarizer protocol; records requests; can be told to fail or raise."""

    name = "fake"

    def __init__(self, text: str = "SUMMARY BODY", *, fail: bool = False, raises: bool = False) -> None:
        self.text = text
        self.fail = fail
        self.raises = raises
        self.requests: list[SummaryRequest] = []

    def summarize(self, request: SummaryRequest) -> SummaryOutcome:
        self.requests.append(request)
        if self.raises:
            raise RuntimeError("boom")
        if self.fail:
            return SummaryOutcome(text=None, generator=self.name, error="HTTP 500")
        return SummaryOutcome(text=self.text, generator=self.name, model="fake-1")

    async def asummarize(self, request: SummaryRequest) -> SummaryOutcome:
        return self.summarize(request)


def run_async(coro: Any) -> Any:
    """``asyncio.run`` in a fresh thread: works even when this thread already runs an event loop
    (Playwright's sync API keeps one running for the whole session once a browser test ran)."""
    import asyncio
    from concurrent.futures import ThreadPoolExecutor

    with ThreadPoolExecutor(max_workers=1) as pool:
        return pool.submit(asyncio.run, coro).result()
