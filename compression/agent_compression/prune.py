"""Stage 1: tool-output pruning. No model call.

Outside a protected recent tail (by tokens), old tool results become one-line
descriptions of what the tool did and how big its output was; earlier copies
of identical results become a pointer to the latest one; long tool-call
argument strings are shortened inside the parsed JSON so ``arguments`` stays
a valid JSON object.
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

from .config import CompressionConfig
from .messages import call_index, content_text, role_of
from .tokens import TokenCounter, default_counter

DUPLICATE_NOTE = "(duplicate result, see latest)"
PRUNED_PREFIX = "[pruned]"
#: tool output shorter than this many characters stays: a description would not save much
MIN_PRUNE_CHARS = 240
#: how much of a key argument (path, command, query) a description quotes
KEY_ARG_CHARS = 80

_KEY_ARGS = (
    "path",
    "file_path",
    "filepath",
    "filename",
    "file",
    "target_file",
    "command",
    "cmd",
    "query",
    "pattern",
    "regex",
    "q",
    "url",
    "uri",
    "name",
    "id",
)
_EXIT_CODE = re.compile(r"(?:exit[ _-]?code|exit status|return[ _]?code)[\"']?\s*[:=]?\s*(-?\d+)", re.IGNORECASE)
_WS = re.compile(r"\s+")


@dataclass(frozen=True)
class PrunedItem:
    """One message stage 1 changed. kind: pruned | deduplicated | args_truncated."""

    index: int
    kind: str
    tool: str
    tokens_before: int
    tokens_after: int

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


@dataclass
class PruneResult:
    """Pruned messages (a new list; unchanged messages are the input's own dicts) and what changed."""

    messages: list[dict[str, Any]]
    items: list[PrunedItem] = field(default_factory=list)
    #: index where the protected tail starts; nothing at or after it was touched
    protect_start: int = 0
    #: per-message token counts of ``messages``
    token_counts: list[int] = field(default_factory=list)
    #: messages before this index were not looked at (``stop_after_tokens``)
    start: int = 0

    @property
    def tokens_saved(self) -> int:
        return sum(i.tokens_before - i.tokens_after for i in self.items)

    def counts(self) -> dict[str, int]:
        out = {"pruned": 0, "deduplicated": 0, "args_truncated": 0}
        for item in self.items:
            out[item.kind] += 1
        out["tokens_saved"] = self.tokens_saved
        return out


def protected_tail_start(token_counts: Sequence[int], budget: int) -> int:
    """First index of the longest suffix whose tokens fit ``budget``."""
    total = 0
    start = len(token_counts)
    for i in range(len(token_counts) - 1, -1, -1):
        total += token_counts[i]
        if total > budget:
            break
        start = i
    return start


def _shorten(text: str, limit: int = KEY_ARG_CHARS) -> str:
    text = _WS.sub(" ", text).strip()
    if len(text) <= limit:
        return text
    keep = limit - 3
    return text[: keep * 2 // 3] + "..." + text[-(keep - keep * 2 // 3) :]


def _parse_args(arguments: str) -> dict[str, Any]:
    if not arguments or len(arguments) > 200_000:
        return {}
    try:
        parsed = json.loads(arguments)
    except ValueError:
        return {}
    return parsed if isinstance(parsed, dict) else {}


def _key_arg(args: dict[str, Any]) -> str:
    for key in _KEY_ARGS:
        value = args.get(key)
        if isinstance(value, str) and value.strip():
            return _shorten(value)
        if isinstance(value, list) and value and all(isinstance(v, str) for v in value):
            return _shorten(" ".join(value))
    return ""


def _line_count(text: str) -> int:
    return text.count("\n") + 1 if text else 0


def _exit_code(text: str) -> str | None:
    window = text if len(text) <= 4_000 else text[:1_000] + "\n" + text[-3_000:]
    found = _EXIT_CODE.findall(window)
    return found[-1] if found else None


def _match_count(text: str) -> int:
    if text[:1] in "{[" and len(text) < 1_000_000:
        try:
            data = json.loads(text)
        except ValueError:
            data = None
        if isinstance(data, list):
            return len(data)
        if isinstance(data, dict):
            for key in ("total_count", "total", "count", "matches", "results", "items"):
                value = data.get(key)
                if isinstance(value, int) and not isinstance(value, bool):
                    return value
                if isinstance(value, list):
                    return len(value)
    return sum(1 for line in text.splitlines() if line.strip())


def _kind_of(tool: str) -> str:
    name = tool.lower()
    if name.startswith("mcp__"):
        return "mcp"
    if any(w in name for w in ("web", "browse", "fetch", "http", "url")):
        return "web"
    if any(w in name for w in ("terminal", "shell", "bash", "exec", "command", "run_cmd", "powershell")) or name in (
        "run",
        "sh",
        "cmd",
    ):
        return "terminal"
    if any(w in name for w in ("search", "grep", "find", "glob", "ripgrep")):
        return "search"
    if any(w in name for w in ("write", "edit", "patch", "replace", "create_file", "apply", "insert")):
        return "write"
    if any(w in name for w in ("read", "view", "open_file", "get_file", "cat")):
        return "read"
    return "other"


def describe_tool_result(tool: str, arguments: str, content: str) -> str:
    """One line saying what the tool did and how big its output was.

    e.g. ``[pruned] terminal: ran command `make test` - 3 lines output, exit code 1``.
    """
    args = _parse_args(arguments)
    key = _key_arg(args)
    quoted = f" `{key}`" if key else ""
    chars, lines = len(content), _line_count(content)
    kind = _kind_of(tool)
    if kind == "terminal":
        code = _exit_code(content)
        tail = f", exit code {code}" if code is not None else ""
        return f"{PRUNED_PREFIX} {tool}: ran command{quoted} - {lines} lines output{tail}"
    if kind == "read":
        return f"{PRUNED_PREFIX} {tool}: read file{quoted} ({chars} chars, {lines} lines)"
    if kind == "search":
        return f"{PRUNED_PREFIX} {tool}: search{quoted} - {_match_count(content)} matches"
    if kind == "web":
        verb = "searched" if "search" in tool.lower() else "fetched"
        return f"{PRUNED_PREFIX} {tool}: {verb}{quoted} ({chars} chars)"
    if kind == "write":
        first = _shorten(content.splitlines()[0], 60) if content.strip() else "no output"
        return f"{PRUNED_PREFIX} {tool}: wrote{quoted} - result: {first}"
    if kind == "mcp":
        parts = [p for p in tool.split("__")[1:] if p]
        label = "/".join(parts) if parts else tool
        called = f" called with{quoted}" if key else " called"
        return f"{PRUNED_PREFIX} mcp {label}:{called} - {chars} chars, {lines} lines output{_first_line(content)}"
    called = f" called with{quoted}" if key else " called"
    # nothing is known about what an unknown tool prints: its first line often says how it went
    return f"{PRUNED_PREFIX} {tool}:{called} - {chars} chars, {lines} lines output{_first_line(content)}"


#: how much of an unknown tool's first output line a description quotes
FIRST_LINE_CHARS = 100


def _first_line(content: str) -> str:
    """``: <first non-blank line>`` of ``content``, cut to :data:`FIRST_LINE_CHARS`; ``""`` when blank."""
    line = next((ln.strip() for ln in content[: FIRST_LINE_CHARS * 8].splitlines() if ln.strip()), "")
    if not line:
        return ""
    if len(line) > FIRST_LINE_CHARS:
        line = line[: FIRST_LINE_CHARS - 3].rstrip() + "..."
    return f": {line}"


def _truncate_value(value: Any, limit: int) -> tuple[Any, bool]:
    if isinstance(value, str):
        if len(value) <= limit:
            return value, False
        head = limit * 2 // 3
        tail = limit // 6
        omitted = len(value) - head - tail
        return f"{value[:head]}...[{omitted} chars omitted]...{value[-tail:] if tail else ''}", True
    if isinstance(value, dict):
        changed = False
        out: dict[str, Any] = {}
        for k, v in value.items():
            out[k], c = _truncate_value(v, limit)
            changed = changed or c
        return (out, True) if changed else (value, False)
    if isinstance(value, list):
        changed = False
        items = []
        for v in value:
            nv, c = _truncate_value(v, limit)
            items.append(nv)
            changed = changed or c
        return (items, True) if changed else (value, False)
    return value, False


def truncate_arguments(arguments: str, limit: int) -> str | None:
    """``arguments`` with every string value longer than ``limit`` shortened, still valid JSON.

    ``None`` when nothing needs shortening or the arguments are not JSON
    (those are left alone rather than cut into invalid JSON).
    """
    if len(arguments) <= limit:
        return None
    try:
        parsed = json.loads(arguments)
    except ValueError:
        return None
    shortened, changed = _truncate_value(parsed, limit)
    if not changed:
        return None
    return json.dumps(shortened, ensure_ascii=False)


def _tool_identity(message: dict[str, Any], calls: dict[str, tuple[int, dict[str, Any]]]) -> tuple[str, str]:
    """(tool name, call arguments) of a tool result: its own ``name``, else its call's."""
    cid = message.get("tool_call_id")
    entry = calls.get(cid) if isinstance(cid, str) else None
    fn = entry[1].get("function") if entry else None
    if not isinstance(fn, dict):
        fn = {}
    name = message.get("name")
    if not isinstance(name, str) or not name:
        name = fn.get("name")
    arguments = fn.get("arguments")
    return (name if isinstance(name, str) and name else "tool"), (arguments if isinstance(arguments, str) else "")


def prune_tool_outputs(
    messages: Sequence[dict[str, Any]],
    config: CompressionConfig,
    counter: TokenCounter | None = None,
    *,
    token_counts: Sequence[int] | None = None,
    min_chars: int = MIN_PRUNE_CHARS,
    stop_after_tokens: int | None = None,
    keep_from: int | None = None,
) -> PruneResult:
    """Stage 1: prune old tool output outside the protected tail. Never mutates ``messages``.

    ``token_counts`` (per message) may be passed when the caller has them already.
    ``stop_after_tokens``: the pipeline passes its tail budget. Pruning walks
    from the newest message back and stops once the pruned messages behind it
    exceed that budget (at a call boundary, and not before ``keep_from``, the
    latest user message): what lies further back is archived and summarized
    anyway, so pruning it would be wasted work on long histories.
    """
    counter = counter or default_counter
    counts = list(token_counts) if token_counts is not None else counter.per_message(messages)
    protect = protected_tail_start(counts, config.effective_prune_protect_tokens)
    calls = call_index(messages)
    out = list(messages)
    items: list[PrunedItem] = []
    limit = config.max_tool_arg_chars

    # newest first, so the latest copy of a result is the one that stays
    seen_content: set[tuple[str, str]] = set()
    seen_args: set[tuple[str, str]] = set()
    behind = 0  # tokens of the (pruned) messages after i
    start = 0
    for i in range(len(messages) - 1, -1, -1):
        m = messages[i]
        if not isinstance(m, dict):
            continue
        role = m.get("role")
        if (
            stop_after_tokens is not None
            and behind > stop_after_tokens
            and (keep_from is None or i < keep_from)
            and role_of(out[i + 1]) != "tool"
        ):
            start = i + 1
            break
        if role == "tool":
            new = _prune_result(m, i < protect, calls, seen_content, seen_args, min_chars)
        elif role == "assistant" and i < protect and isinstance(m.get("tool_calls"), list):
            new = _truncate_calls(m, limit)
        else:
            new = None
        if new is not None:
            message, kind, tool = new
            out[i] = message
            after = counter.message(message)
            items.append(PrunedItem(i, kind, tool, counts[i], after))
            counts[i] = after
        behind += counts[i]

    items.sort(key=lambda item: item.index)
    return PruneResult(messages=out, items=items, protect_start=protect, token_counts=counts, start=start)


def _prune_result(
    m: dict[str, Any],
    prunable: bool,
    calls: dict[str, tuple[int, dict[str, Any]]],
    seen_content: set[tuple[str, str]],
    seen_args: set[tuple[str, str]],
    min_chars: int,
) -> tuple[dict[str, Any], str, str] | None:
    """The replacement for one tool result, or ``None``; records it as seen either way."""
    if not isinstance(m.get("content"), str | list):
        return None
    text = content_text(m)
    name, arguments = _tool_identity(m, calls)
    content_key = (name, text)
    # a command run twice can print different things: only read-like tools dedupe on arguments
    args_key = (name, arguments) if arguments and _kind_of(name) not in ("terminal", "write") else None
    replacement: str | None = None
    kind = ""
    if prunable and len(text) >= len(DUPLICATE_NOTE) * 3:
        if content_key in seen_content:
            replacement, kind = DUPLICATE_NOTE, "deduplicated"
        elif args_key is not None and args_key in seen_args:
            described = describe_tool_result(name, arguments, text)[len(PRUNED_PREFIX) + 1 :]
            replacement, kind = f"{DUPLICATE_NOTE} {described}", "deduplicated"
        elif len(text) >= min_chars:
            replacement, kind = describe_tool_result(name, arguments, text), "pruned"
    seen_content.add(content_key)
    if args_key is not None:
        seen_args.add(args_key)
    if replacement is None or len(replacement) >= len(text):
        return None
    return {**m, "content": replacement}, kind, name


def _truncate_calls(m: dict[str, Any], limit: int) -> tuple[dict[str, Any], str, str] | None:
    """The assistant message with long argument strings shortened, or ``None``."""
    new_calls = []
    changed = False
    for call in m["tool_calls"]:
        fn = call.get("function") if isinstance(call, dict) else None
        args = fn.get("arguments") if isinstance(fn, dict) else None
        short = truncate_arguments(args, limit) if isinstance(args, str) else None
        if short is not None and isinstance(fn, dict) and isinstance(call, dict):
            call = {**call, "function": {**fn, "arguments": short}}
            changed = True
        new_calls.append(call)
    if not changed:
        return None
    return {**m, "tool_calls": new_calls}, "args_truncated", "assistant"
