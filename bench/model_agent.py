"""A multi-turn agent loop through the proxy against the local model (``make bench-model ARGS="--agent-loop"``).

A coding-agent conversation (the user's rule first, then a failing test, an edit, and long file reads that
push it over a small window) is played through ``/proxy/v1`` with the model answering every user turn, the
tool calls and results scripted so both runs see the same conversation. Then three probes about the early
turns are asked (the user's rule, the first error, the edited file), chained, twice: through the proxy, which
sends the compressed history, and directly to the model with the full history. A probe passes when the answer
names what it asks for. Prints both columns and the prompt tokens each side sent; saves the answers under
``bench/data/model_runs/agent_loop/``.
"""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import httpx

SYSTEM = "You are a coding agent working on a billing service. Answer briefly and follow the user's rules."
RULE = "Never edit anything under migrations/ without asking me first."
FIRST_ERROR = "FAILED tests/test_invoice.py::test_rounding - AssertionError: assert Decimal('10.00') == Decimal('10.1')"
EDITED = "billing/rounding.py"
PROBES = (
    ("rule", "What did I tell you at the very start about which files you must not edit? One sentence.", "migrations"),
    ("first_error", "Which test failed first in this session? Name the test function only.", "test_rounding"),
    ("edited_file", "Which file did you edit to fix the rounding? Give its path only.", "rounding.py"),
)
TOOLS = [
    {
        "type": "function",
        "function": {
            "name": name,
            "description": description,
            "parameters": {"type": "object", "properties": {"path": {"type": "string"}}},
        },
    }
    for name, description in (
        ("run_tests", "Run the test suite"),
        ("read_file", "Read a file"),
        ("edit_file", "Edit a file"),
    )
]


def _code(module: str, lines: int) -> str:
    body = "\n".join(f"    total += item.amount * Decimal('{i}.{i % 7}')  # line {i} of {module}" for i in range(lines))
    head = f"from decimal import Decimal\n\n\ndef {module}_total(items):\n    total = Decimal(0)\n"
    return f"{head}{body}\n    return total\n"


class Conversation:
    """The runtime side: a history, scripted tool exchanges, and model turns sent to one endpoint."""

    def __init__(self, base: str, key: str, model: str, session: str | None, window: int) -> None:
        self.client = httpx.Client(base_url=base, timeout=900)
        self.headers = {"Authorization": f"Bearer {key}"}
        if session:
            self.headers |= {"X-Session-Key": session, "X-Context-Window-Tokens": str(window)}
        self.model = model
        self.history: list[dict[str, Any]] = [{"role": "system", "content": SYSTEM}]
        self.handled: list[str] = []
        self.prompt_tokens: list[int] = []
        self.calls = 0

    def tool(self, name: str, arguments: dict[str, str], result: str) -> None:
        self.calls += 1
        call_id = f"call_{self.calls}"
        call = {"id": call_id, "type": "function", "function": {"name": name, "arguments": json.dumps(arguments)}}
        self.history.append({"role": "assistant", "content": None, "tool_calls": [call]})
        self.history.append({"role": "tool", "tool_call_id": call_id, "content": result})

    def ask(self, text: str) -> str:
        self.history.append({"role": "user", "content": text})
        body = {"model": self.model, "messages": self.history, "tools": TOOLS, "tool_choice": "none"}
        body |= {"temperature": 0, "max_tokens": 160}
        response = self.client.post("/chat/completions", json=body, headers=self.headers)
        response.raise_for_status()
        self.handled.append(response.headers.get("X-Compression-Proxy", "direct"))
        data = response.json()
        self.prompt_tokens.append(int((data.get("usage") or {}).get("prompt_tokens") or 0))
        answer = data["choices"][0]["message"].get("content") or ""
        self.history.append({"role": "assistant", "content": answer})
        return answer


def play(conversation: Conversation, filler_turns: int = 8) -> None:
    """The conversation both runs see: rule, failing test, diagnosis, edit, passing test, then long reads."""
    conversation.ask(f"We are fixing the rounding of invoice totals. {RULE}")
    pytest_output = "\n".join(f"tests/test_invoice.py::test_case_{i} PASSED" for i in range(40))
    conversation.tool("run_tests", {}, f"{pytest_output}\n{FIRST_ERROR}\n1 failed, 40 passed")
    conversation.ask("Look at the failure and tell me the likely cause in two sentences.")
    conversation.tool("read_file", {"path": EDITED}, _code("rounding", 20))
    conversation.tool("edit_file", {"path": EDITED}, f"edited {EDITED}: quantize with ROUND_HALF_UP")
    conversation.tool("run_tests", {}, "41 passed")
    conversation.ask("Good. Summarise the fix in one sentence.")
    for turn in range(filler_turns):
        module = f"module_{turn}"
        conversation.tool("read_file", {"path": f"billing/{module}.py"}, _code(module, 45))
        conversation.ask(f"Does billing/{module}.py round anywhere? Answer yes or no and why, briefly.")


def probe(conversation: Conversation) -> list[dict[str, Any]]:
    out = []
    for name, question, expected in PROBES:
        answer = conversation.ask(question)
        out.append({"probe": name, "answer": answer, "passed": expected.lower() in answer.lower()})
    return out


def agent_loop(proxy_base: str, key: str, model_url: str, model: str, window: int = 6000) -> dict[str, Any]:
    """Play the conversation through the proxy and directly; the probes' answers and what each side sent."""
    session = f"bench-agent-{model}-{time.time_ns()}"
    through = Conversation(f"{proxy_base}/proxy/v1", key, model, session, window)
    direct = Conversation(model_url, "not-needed", model, None, window)
    started = time.monotonic()
    for side in (through, direct):
        play(side)
    result = {
        "model": model,
        "window": window,
        "session": session,
        "handled": through.handled,
        "compressed": {"probes": probe(through), "prompt_tokens": through.prompt_tokens},
        "full": {"probes": probe(direct), "prompt_tokens": direct.prompt_tokens},
        "seconds": round(time.monotonic() - started, 1),
    }
    return result


def print_result(result: dict[str, Any]) -> None:
    print(f"\nagent loop, {result['model']}, {result['window']}-token window ({result['seconds']} s)")
    print(f"  proxy handling per call: {', '.join(result['handled'])}")
    full, compressed = result["full"], result["compressed"]
    tokens = full["prompt_tokens"][-1], compressed["prompt_tokens"][-1]
    print(f"  prompt tokens of the last probe: full {tokens[0]}, compressed {tokens[1]}")
    print(f"  {'probe':<12} {'full':<6} {'compressed':<10}")
    for f, c in zip(full["probes"], compressed["probes"], strict=True):
        print(f"  {f['probe']:<12} {'yes' if f['passed'] else 'no':<6} {'yes' if c['passed'] else 'no':<10}")
    passed = sum(p["passed"] for p in compressed["probes"]), sum(p["passed"] for p in full["probes"])
    print(f"  compressed answers {passed[0]} of {len(PROBES)} probes; full answers {passed[1]}")


def save(result: dict[str, Any], folder: Path) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"{result['model']}-{result['window']}.json"
    path.write_text(json.dumps(result, ensure_ascii=False, indent=2) + "\n", encoding="utf-8")
    return path
