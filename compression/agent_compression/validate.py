"""Stage 5b: structural validation and repair of a chat-format message list.

Two profiles:

- ``openai``: the tool-call protocol. A ``tool`` message answers a call of the
  nearest preceding assistant ``tool_calls`` message, with only tool messages
  in between; every call gets exactly one result before the next non-tool
  message. Calls at the very end of the history whose results have not
  arrived yet are *in flight* and valid.
- ``strict``: adds what the pickiest providers require: system messages only
  at the start, the first other message is from the user, never two user
  or two assistant messages in a row, and no tool-call id used by two messages
  (old OpenAI logs reuse ids across turns; strict providers reject it).

``repair_messages`` never mutates its input and its output always validates
under the profile it was asked for.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field
from typing import Any, Literal

from .messages import ROLES, tool_call_ids
from .summary_message import is_summary_message

Profile = Literal["openai", "strict"]

LOST_RESULT = "[result lost during context compression]"
#: inserted (strict profile) when the first non-system message is not from the user
CONTINUED_PLACEHOLDER = "(Conversation continued from earlier turns.)"
#: inserted (strict profile) between two user messages when the second must stay verbatim
NO_REPLY_PLACEHOLDER = "(No reply.)"

_SYSTEM_ROLES = ("system", "developer")


@dataclass(frozen=True)
class Violation:
    """One rule a message list breaks. ``index`` is the offending message's position."""

    index: int
    code: str
    message: str

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


@dataclass
class RepairReport:
    """What :func:`repair_messages` changed, by input index where one applies."""

    dropped: list[dict[str, Any]] = field(default_factory=list)
    fixed: list[dict[str, Any]] = field(default_factory=list)
    moved: list[dict[str, Any]] = field(default_factory=list)
    patched: list[str] = field(default_factory=list)
    merged: list[int] = field(default_factory=list)
    inserted: list[str] = field(default_factory=list)

    @property
    def changed(self) -> bool:
        return bool(self.dropped or self.fixed or self.moved or self.patched or self.merged or self.inserted)

    def to_dict(self) -> dict[str, Any]:
        return {
            "dropped": self.dropped,
            "fixed": self.fixed,
            "moved": self.moved,
            "patched": self.patched,
            "merged": self.merged,
            "inserted": self.inserted,
        }


# --------------------------------------------------------------------------- validation


def _content_problem(role: str, message: dict[str, Any]) -> str | None:
    content = message.get("content")
    if content is None:
        if role == "assistant" and message.get("tool_calls"):
            return None
        return "content is missing" if "content" not in message else "content is null"
    if isinstance(content, str):
        return None
    if isinstance(content, list):
        for part in content:
            if not isinstance(part, dict) or not isinstance(part.get("type"), str):
                return "content part is not an object with a string 'type'"
            if part["type"] == "text" and not isinstance(part.get("text"), str):
                return "text content part has no string 'text'"
        return None
    return f"content must be a string, a list of parts or null, not {type(content).__name__}"


def _tool_calls_problem(calls: Any) -> str | None:
    if not isinstance(calls, list) or not calls:
        return "tool_calls must be a non-empty list"
    seen: set[str] = set()
    for call in calls:
        if not isinstance(call, dict):
            return "a tool call is not an object"
        cid = call.get("id")
        if not isinstance(cid, str) or not cid:
            return "a tool call has no string id"
        if cid in seen:
            return f"tool call id {cid!r} repeats in one message"
        seen.add(cid)
        if call.get("type", "function") != "function":
            return f"tool call {cid!r} has type {call.get('type')!r}, expected 'function'"
        fn = call.get("function")
        if not isinstance(fn, dict) or not isinstance(fn.get("name"), str) or not fn.get("name"):
            return f"tool call {cid!r} has no function name"
        if not isinstance(fn.get("arguments"), str):
            return f"tool call {cid!r} has non-string arguments"
    return None


def validate_messages(messages: Any, profile: Profile = "openai") -> list[Violation]:
    """Check a message list against ``profile``; an empty list means valid."""
    if profile not in ("openai", "strict"):
        raise ValueError(f"unknown profile {profile!r}")
    if not isinstance(messages, list):
        return [Violation(-1, "not_a_list", "messages must be a list")]
    out: list[Violation] = []
    pending: dict[str, bool] | None = None  # call id -> answered, for the open tool_calls message
    pending_index = -1

    def close() -> None:
        nonlocal pending
        if pending:
            for cid, answered in pending.items():
                if not answered:
                    out.append(Violation(pending_index, "missing_tool_result", f"tool call {cid!r} has no result"))
        pending = None

    for i, m in enumerate(messages):
        if not isinstance(m, dict):
            close()
            out.append(Violation(i, "not_an_object", "message is not an object"))
            continue
        role = m.get("role")
        if not isinstance(role, str) or role not in ROLES:
            close()
            out.append(Violation(i, "unknown_role", f"unknown role {role!r}"))
            continue
        problem = _content_problem(role, m)
        if problem:
            out.append(Violation(i, "bad_content", problem))
        if role != "assistant" and "tool_calls" in m:
            out.append(Violation(i, "unexpected_tool_calls", f"a {role} message cannot carry tool_calls"))
        if role == "tool":
            cid = m.get("tool_call_id")
            if not isinstance(cid, str) or not cid:
                out.append(Violation(i, "missing_tool_call_id", "tool message has no tool_call_id"))
            elif pending is None or cid not in pending:
                out.append(Violation(i, "orphan_tool_result", f"tool result {cid!r} answers no preceding call"))
            elif pending[cid]:
                out.append(Violation(i, "duplicate_tool_result", f"tool call {cid!r} already has a result"))
            else:
                pending[cid] = True
            continue
        close()
        if role == "assistant" and "tool_calls" in m:
            problem = _tool_calls_problem(m["tool_calls"])
            if problem:
                out.append(Violation(i, "bad_tool_calls", problem))
            else:
                pending = {c["id"]: False for c in m["tool_calls"]}
                pending_index = i
    # calls still open here are in flight: their results may still arrive

    if profile == "strict":
        out.extend(_strict_violations(messages))
    out.sort(key=lambda v: v.index)
    return out


def _strict_violations(messages: list[Any]) -> list[Violation]:
    out: list[Violation] = []
    seen_other = False
    previous: str | None = None
    ids: set[str] = set()  # tool-call ids of earlier messages
    for i, m in enumerate(messages):
        role = m.get("role") if isinstance(m, dict) else None
        if not isinstance(role, str) or role not in ROLES:
            previous = None
            continue
        mine = set(tool_call_ids(m))
        for cid in sorted(mine & ids):
            out.append(Violation(i, "duplicate_tool_call_id", f"tool call id {cid!r} is used by an earlier message"))
        ids |= mine
        if role in _SYSTEM_ROLES:
            if seen_other:
                out.append(Violation(i, "system_not_at_start", "system message after the conversation started"))
        else:
            if not seen_other and role != "user":
                out.append(Violation(i, "first_not_user", f"first non-system message is {role}, not user"))
            seen_other = True
            if role == previous and role in ("user", "assistant"):
                out.append(Violation(i, "consecutive_same_role", f"two {role} messages in a row"))
        previous = role
    return out


# --------------------------------------------------------------------------- repair


def _fix_parts(parts: list[Any]) -> list[dict[str, Any]]:
    fixed = []
    for part in parts:
        if not isinstance(part, dict) or not isinstance(part.get("type"), str):
            continue
        if part["type"] == "text" and not isinstance(part.get("text"), str):
            continue
        fixed.append(part)
    return fixed


def _as_text(value: Any) -> str:
    try:
        return json.dumps(value, ensure_ascii=False)
    except (TypeError, ValueError):
        return str(value)


def _fix_calls(calls: Any) -> list[dict[str, Any]]:
    if not isinstance(calls, list):
        return []
    fixed: list[dict[str, Any]] = []
    seen: set[str] = set()
    for call in calls:
        if not isinstance(call, dict):
            continue
        cid = call.get("id")
        fn = call.get("function")
        if not isinstance(cid, str) or not cid or cid in seen:
            continue
        if not isinstance(fn, dict) or not isinstance(fn.get("name"), str) or not fn.get("name"):
            continue
        seen.add(cid)
        args = fn.get("arguments")
        if isinstance(args, str) and call.get("type", "function") == "function":
            fixed.append(call)
            continue
        new_fn = dict(fn)
        if not isinstance(args, str):
            new_fn["arguments"] = "{}" if args is None else _as_text(args)
        fixed.append({**call, "type": "function", "function": new_fn})
    return fixed


def _normalize(m: dict[str, Any], role: str) -> tuple[dict[str, Any], list[str]]:
    """Fix one message's own fields (content type, tool_calls shape); copy on write."""
    notes: list[str] = []
    new = m
    if role != "assistant" and "tool_calls" in m:
        new = {k: v for k, v in m.items() if k != "tool_calls"}
        notes.append("removed tool_calls")
    if role == "assistant" and "tool_calls" in m:
        original = m["tool_calls"]
        calls = _fix_calls(original)
        if not calls:
            new = {k: v for k, v in m.items() if k != "tool_calls"}
            notes.append("removed empty or malformed tool_calls")
        elif calls != original:
            new = {**new, "tool_calls": calls}
            notes.append("fixed malformed tool calls")
    content = new.get("content")
    if content is None:
        if not (role == "assistant" and new.get("tool_calls")):
            new = {**new, "content": ""}
            notes.append("null content set to empty string")
    elif isinstance(content, list):
        parts = _fix_parts(content)
        if len(parts) != len(content):
            new = {**new, "content": parts if parts else ""}
            notes.append("removed malformed content parts")
    elif not isinstance(content, str):
        new = {**new, "content": _as_text(content)}
        notes.append("content converted to text")
    return new, notes


def repair_messages(messages: Any, profile: Profile = "openai") -> tuple[list[dict[str, Any]], RepairReport]:
    """Return a copy of ``messages`` that validates under ``profile``, and what was changed.

    Drops non-objects, unknown roles, leading, orphan and duplicate tool
    results; moves results separated from their call back next to it; patches
    calls whose results can no longer arrive with ``LOST_RESULT``; keeps the
    in-flight calls at the very end as they are. The strict profile also turns
    late system messages into user messages and merges or separates same-role
    neighbours. Input dicts are never mutated; unchanged messages are reused.
    """
    if profile not in ("openai", "strict"):
        raise ValueError(f"unknown profile {profile!r}")
    report = RepairReport()
    if not isinstance(messages, list):
        messages = list(messages) if isinstance(messages, tuple) else []

    # pass 1: per-message fixes; drop what cannot be a message
    items: list[tuple[int, dict[str, Any]]] = []
    for i, m in enumerate(messages):
        role = m.get("role") if isinstance(m, dict) else None
        if not isinstance(m, dict):
            report.dropped.append({"index": i, "reason": "not an object"})
            continue
        if not isinstance(role, str) or role not in ROLES:
            report.dropped.append({"index": i, "reason": f"unknown role {role!r}"})
            continue
        if role == "tool":
            cid = m.get("tool_call_id")
            if not isinstance(cid, str) or not cid:
                report.dropped.append({"index": i, "reason": "tool result without tool_call_id"})
                continue
        new, notes = _normalize(m, role)
        if notes:
            report.fixed.append({"index": i, "changes": notes})
        items.append((i, new))

    # pass 2: assign each result to the latest earlier call with its id still unanswered
    results: dict[int, list[tuple[int, dict[str, Any]]]] = {}  # position of call message -> results
    open_calls: dict[str, list[int]] = {}  # call id -> positions (in items) of messages with it unanswered
    answered_ids: set[str] = set()
    for pos, (i, m) in enumerate(items):
        role = m["role"]
        if role == "assistant" and m.get("tool_calls"):
            for call in m["tool_calls"]:
                open_calls.setdefault(call["id"], []).append(pos)
        elif role == "tool":
            cid = m["tool_call_id"]
            owners = open_calls.get(cid)
            if not owners:
                reason = "duplicate tool result" if cid in answered_ids else "orphan tool result"
                report.dropped.append({"index": i, "reason": reason})
                continue
            owner = owners.pop()
            answered_ids.add(cid)
            results.setdefault(owner, []).append((i, m))

    last_non_tool = max((pos for pos, (_, m) in enumerate(items) if m["role"] != "tool"), default=-1)
    position = {i: pos for pos, (i, _) in enumerate(items)}
    renamer = _Renamer(items) if profile == "strict" else None

    # pass 3: emit every call followed by its results; patch what can no longer arrive
    out: list[dict[str, Any]] = []
    for pos, (i, m) in enumerate(items):
        if m["role"] == "tool":
            continue
        out.append(m)
        if m["role"] != "assistant" or not m.get("tool_calls"):
            continue
        got = results.get(pos, [])
        if renamer is not None:
            out[-1], got = renamer.unique(pos, i, m, got, report)
            m = out[-1]
        for k, (ri, r) in enumerate(got):
            out.append(r)
            if position[ri] != pos + 1 + k:
                report.moved.append({"index": ri, "to_follow": i})
        answered = {r["tool_call_id"] for _, r in got}
        in_flight = pos == last_non_tool
        for call in m["tool_calls"]:
            if call["id"] not in answered and not in_flight:
                out.append({"role": "tool", "tool_call_id": call["id"], "content": LOST_RESULT})
                report.patched.append(call["id"])

    if profile == "strict":
        out = _repair_strict(out, report)
    return out, report


class _Renamer:
    """Gives every tool-call id one message (strict profile): an id an assistant message shares with a later
    one is renamed there, in the call and its results together. The last use keeps its id, so results of a
    call still in flight, which will carry it, still match."""

    def __init__(self, items: list[tuple[int, dict[str, Any]]]) -> None:
        self.last: dict[str, int] = {}  # id -> position of the last message calling it
        for pos, (_, m) in enumerate(items):
            if m["role"] == "assistant":
                for call in m.get("tool_calls") or ():
                    self.last[call["id"]] = pos
        self.taken = set(self.last)

    def _fresh(self, cid: str) -> str:
        n = 2
        while f"{cid}_{n}" in self.taken:
            n += 1
        self.taken.add(f"{cid}_{n}")
        return f"{cid}_{n}"

    def unique(
        self,
        pos: int,
        index: int,
        message: dict[str, Any],
        results: list[tuple[int, dict[str, Any]]],
        report: RepairReport,
    ) -> tuple[dict[str, Any], list[tuple[int, dict[str, Any]]]]:
        renames = {c["id"]: self._fresh(c["id"]) for c in message["tool_calls"] if self.last[c["id"]] != pos}
        if not renames:
            return message, results
        calls = [{**c, "id": renames[c["id"]]} if c["id"] in renames else c for c in message["tool_calls"]]
        report.fixed.append(
            {"index": index, "changes": [f"tool call id {old!r} renamed {new!r}" for old, new in renames.items()]}
        )
        renamed = []
        for ri, r in results:
            new = renames.get(r["tool_call_id"])
            if new is not None:
                r = {**r, "tool_call_id": new}
                report.fixed.append({"index": ri, "changes": [f"tool_call_id renamed {new!r} with its call"]})
            renamed.append((ri, r))
        return {**message, "tool_calls": calls}, renamed


def _merge_content(a: Any, b: Any) -> Any:
    a = "" if a is None else a
    b = "" if b is None else b
    if isinstance(a, str) and isinstance(b, str):
        if not a:
            return b
        if not b:
            return a
        return a + "\n\n" + b
    parts_a = a if isinstance(a, list) else ([{"type": "text", "text": a}] if a else [])
    parts_b = b if isinstance(b, list) else ([{"type": "text", "text": b}] if b else [])
    return parts_a + parts_b


def _repair_strict(messages: list[dict[str, Any]], report: RepairReport) -> list[dict[str, Any]]:
    # the latest message the user wrote (an inserted summary is user-role, but not the user's)
    users = [m for m in messages if m["role"] == "user" and not is_summary_message(m)]
    latest = users[-1] if users else None
    out: list[dict[str, Any]] = []
    seen_other = False
    for k, m in enumerate(messages):
        role = m["role"]
        if role in _SYSTEM_ROLES:
            if not seen_other:
                out.append(m)
                continue
            # a late system note becomes user-visible text, not a second system prompt
            m = {**m, "role": "user", "content": _merge_content("[system note]", m.get("content") or "")}
            role = "user"
            report.fixed.append({"index": k, "changes": ["late system message turned into a user message"]})
        if not seen_other:
            seen_other = True
            if role != "user":
                out.append({"role": "user", "content": CONTINUED_PLACEHOLDER})
                report.inserted.append("user placeholder before the first assistant message")
        prev = out[-1] if out else None
        if prev is not None and prev["role"] == role and role in ("user", "assistant"):
            if role == "user" and (m is latest or prev is latest):
                # keep the latest user message verbatim: separate instead of merging
                out.append({"role": "assistant", "content": NO_REPLY_PLACEHOLDER})
                report.inserted.append("assistant placeholder between two user messages")
            else:
                # prev never has tool_calls here: pass 3 puts results after every call but the last
                out[-1] = {**m, "content": _merge_content(prev.get("content"), m.get("content"))}
                report.merged.append(k)
                continue
        out.append(m)
    return out
