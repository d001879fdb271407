"""The offline summarizer: deterministic, no model, linear in the segment's size.

It fills the same sections a model would, from the pinned facts and the
segment's own statements: every user turn (verbatim while short, head and tail
when long; the ground truth of intent, dropped last), decisions and their
reasons, what happened to each file (edited before read, shell commands
included), errors and whether a later message resolved them, the tool results
that mattered, the last state and next steps, statements about the focus topic
first. An earlier summary's sections are updated, not re-summarized: its lines
are merged in as written (older lines first, so the size cap drops them first).

Every ``#N`` is a history index (:meth:`SummaryRequest.index_of`), the same
numbering as the facts' ``source_index`` and the lines carried from an earlier summary.
"""

from __future__ import annotations

import json
import re
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from .facts import (
    COMPRESSOR_TEXTS,
    PATH_RANKS,
    is_decision,
    is_prohibition,
    split_sentences,
)
from .messages import call_arguments, call_name, content_text, one_line
from .patterns import (
    has_error_hint,
    is_read_tool,
    is_shell_tool,
    is_write_tool,
    number_key,
    shell_written_files,
    windowed,
)
from .secrets import mask_secrets
from .summary_body import FOCUS, finalize_summary, parse_sections, render_sections, session_language
from .summary_message import is_summary_message
from .tokens import count_text_tokens
from .types import Fact, SummaryOutcome, SummaryRequest

EXTRACTIVE_VERSION = "extractive-2026-12-02.1"

#: a user turn up to this many characters is kept verbatim; a longer one as head … tail
USER_TURN_CHARS = 600

# literals only, case-sensitive (with the usual capitalizations): fast on big tool output
_RESOLVED = re.compile(
    r"fixed|Fixed|FIXED|resolved|Resolved|passed|Passed|PASSED|passes|succeeded|Succeeded|successful|Successful"
    r"|SUCCESS|works now|working now|exit code 0|all tests pass"
    r"|已修复|修复了|已解决|解决了|成功|通过了|测试通过|恢复正常"
)


def _says_resolved(text: str) -> bool:
    pos = 0
    while (m := _RESOLVED.search(text, pos)) is not None:
        if text[max(0, m.start() - 2) : m.start()].lower() != "un":  # "unresolved", "unsuccessful"
            return True
        pos = m.end()
    return False


_REASON = re.compile(
    r"\b(?:because|since|due to|so that|caused by|the reason|root cause|likely|probably|suspect\w*|suggest\w*"
    r"|recommend\w*|turns out|found that|conclusion)\b"
    r"|因为|由于|所以|因此|导致|原因|建议|推荐|疑似|怀疑|可能|发现|结论",
)
_NEXT = re.compile(
    r"\b(?:next|then|todo|remaining|still need|will|plan to|going to|after that)\b"
    r"|接下来|下一步|然后|待办|还需|还要|计划",
)
_PREFERENCE = re.compile(r"\b(?:prefer|i like|i want|i'd like|i would like|i'd rather)\b|希望|喜欢|偏好|最好|尽量")
_WORD = re.compile(r"[A-Za-z0-9_./-]{3,}|[\u4e00-\u9fff]{2,}")
_STOP_WORDS = "the and for with that this from have what about into your you are was were will not"
_STOP = frozenset(_STOP_WORDS.split())

# windows for the extractive pass (smaller than facts': statements come from the edges of long messages)
_HEAD, _TAIL = 3_000, 1_500
_MAX_LINE = 240


def _short(text: str, limit: int = _MAX_LINE) -> str:
    return one_line(text, limit)


def _focus_terms(topic: str | None) -> set[str]:
    if not topic:
        return set()
    terms: set[str] = set()
    for word in _WORD.findall(topic.lower()):
        if word.isascii():
            if word not in _STOP:
                terms.add(word)
        else:  # CJK: character bigrams
            terms.update(word[i : i + 2] for i in range(len(word) - 1))
    return terms


@dataclass
class _Scan:
    """Everything the sections need, gathered in one pass over the segment."""

    user_turns: list[tuple[int, str]] = field(default_factory=list)
    preferences: list[tuple[int, str]] = field(default_factory=list)
    reasons: list[tuple[int, str]] = field(default_factory=list)
    next_steps: list[tuple[int, str]] = field(default_factory=list)
    last_assistant: tuple[int, str] | None = None
    resolved_at: list[int] = field(default_factory=list)
    files: dict[str, list[str]] = field(default_factory=dict)
    tool_results: list[tuple[int, str, str, dict[str, Any]]] = field(default_factory=list)  # index, tool, args
    focus: list[tuple[int, int, str]] = field(default_factory=list)  # score, index, sentence


#: the words the extractive summary writes around what it quotes, in the session's language
_WORDS: dict[str, dict[str, str]] = {
    "en": {
        "finding": "Finding",
        "identifiers": "Identifiers",
        "resolved": "resolved later (#{n})",
        "unresolved": "not resolved in this segment",
        "see_pinned": "User constraints and approvals: see Pinned facts (verbatim, negations kept).",
        "preference": "Preference",
        "last_state": "Last assistant state",
        "next": "Next",
        "user": "User request",
        "lines": "({n} lines)",
    },
    "zh": {
        "finding": "发现",
        "identifiers": "标识符",
        "resolved": "已解决 (#{n})",
        "unresolved": "未解决",
        "see_pinned": "约束与批准见 Pinned facts（原文，含否定）。",
        "preference": "偏好",
        "last_state": "最后状态",
        "next": "下一步",
        "user": "用户",
        "lines": "({n} 行)",
    },
}


def _user_turn(text: str) -> str:
    """A user turn on one line: verbatim up to :data:`USER_TURN_CHARS`, else its head and tail."""
    text = " ".join(text.split())
    if len(text) <= USER_TURN_CHARS:
        return text
    head, tail = USER_TURN_CHARS * 2 // 3, USER_TURN_CHARS // 3
    return f"{text[:head].rstrip()} … {text[-tail:].lstrip()}"


def _scan(request: SummaryRequest, focus_terms: set[str], first_error: int) -> _Scan:
    """One pass; success notes are looked for only after ``first_error`` (nothing to resolve before)."""
    scan = _Scan()
    calls: dict[str, tuple[str, str]] = {}
    for position, m in enumerate(request.messages):
        if not isinstance(m, dict) or is_summary_message(m):
            continue
        index = request.index_of(position)
        if index is None:
            continue
        role = m.get("role")
        if role == "tool":
            # errors come from the pinned facts; only the edges are read for a success note
            if index > first_error:
                raw = content_text(m)
                if _says_resolved(raw[:500] + "\n" + raw[-300:]) and not has_error_hint(raw[-300:]):
                    scan.resolved_at.append(index)
            name, args = calls.get(str(m.get("tool_call_id")), (str(m.get("name") or "tool"), ""))
            scan.tool_results.append((index, name, args, m))
            continue
        text = windowed(content_text(m), _HEAD, _TAIL)
        if role == "assistant":
            for call in m.get("tool_calls") or ():
                if not isinstance(call, dict):
                    continue
                name = call_name(call)
                args = _short(call_arguments(call), 100)
                if isinstance(call.get("id"), str):
                    calls[call["id"]] = (name, args)
                _note_files(scan, name, call_arguments(call), index)
        if role not in ("user", "assistant") or not text.strip() or text in COMPRESSOR_TEXTS:
            continue
        sentences = split_sentences(text)
        if role == "user":
            if len(text.strip()) >= 6 or not scan.user_turns:  # skip "ok" / "继续" after the first turn
                scan.user_turns.append((index, content_text(m)))
        else:
            scan.last_assistant = (index, _short(text, 300))
            if index > first_error and _says_resolved(text):
                scan.resolved_at.append(index)
        # the English patterns are lower case and run on lower-cased text (much faster than re.I)
        for sentence in sentences:
            low = sentence.lower()
            if role == "user" and _PREFERENCE.search(low) and not is_prohibition(sentence):
                scan.preferences.append((index, sentence))
            elif role == "assistant" and _REASON.search(low):
                scan.reasons.append((index, sentence))
            elif role == "assistant" and _NEXT.search(low) and not is_decision(sentence):
                scan.next_steps.append((index, sentence))
            if focus_terms:
                score = sum(1 for t in focus_terms if t in low)
                if score:
                    scan.focus.append((score, index, sentence))
    return scan


def _note_file(scan: _Scan, path: str, action: str, index: int) -> None:
    entry = f"{action} (#{index})"
    actions = scan.files.setdefault(path, [])
    if entry not in actions:
        actions.append(entry)


def _note_files(scan: _Scan, tool: str, raw_args: str, index: int) -> None:
    shell = is_shell_tool(tool)
    if '"path"' not in raw_args and '"file' not in raw_args and not shell:
        return
    try:
        args = json.loads(raw_args) if raw_args else {}
    except ValueError:
        return
    if not isinstance(args, dict):
        return
    if shell:  # files a shell command writes: cat > x.py, sed -i … x.py, tee x.py
        command = next((v for k in ("command", "cmd", "script") if isinstance(v := args.get(k), str)), "")
        for path in shell_written_files(command[:4_000]):
            _note_file(scan, path, "edited", index)
    for key in ("path", "file", "file_path", "filepath", "filename"):
        value = args.get(key)
        if isinstance(value, str) and 2 < len(value) < 300:
            action = "edited" if is_write_tool(tool) else "read" if is_read_tool(tool) else tool or "used"
            _note_file(scan, value, action, index)


def _file_rank(actions: list[str]) -> int:
    """What happened to a file, as a :data:`PATH_RANKS` value (its strongest action)."""
    ranks = [PATH_RANKS.get(a.split(" ", 1)[0], PATH_RANKS["used"]) for a in actions]
    return max(ranks, default=0)


def _facts_of(facts: Sequence[Fact], kind: str) -> list[Fact]:
    return [f for f in facts if f.kind == kind]


def _latest_distinct(items: Sequence[tuple[int, str]], limit: int) -> list[tuple[int, str]]:
    """The last ``limit`` items with distinct texts (each at its latest index), in order."""
    latest: dict[str, int] = {}
    for index, text in items:
        latest[text] = index
    return sorted(((i, t) for t, i in latest.items()), key=lambda it: it[0])[-limit:]


def build_sections(request: SummaryRequest) -> dict[str, list[str]]:
    """The extractive summary's sections (without pinned facts), previous summary merged in.

    Pinned facts are not repeated verbatim in the prose (they follow in ``## Pinned facts``,
    which the size cap protects); the prose adds what they lack: status, reasons, context.
    """
    focus_terms = _focus_terms(request.focus_topic)
    facts = request.facts
    error_indexes = [
        f.source_index for f in facts if f.kind == "error" and f.source_index is not None and f.role != "summary"
    ]
    first_error = min(error_indexes) if error_indexes else 1 << 62
    scan = _scan(request, focus_terms, first_error)
    pinned = {f.text for f in facts}
    language = _request_language(request)
    w = _WORDS[language]
    focus_text = (request.focus_topic or "").strip()
    new: dict[str, list[str]] = {}

    candidates = [(score, i, st) for score, i, st in scan.focus if st.strip() != focus_text and len(st) >= 8]
    if candidates:
        best: dict[str, tuple[int, int]] = {}
        for score, i, st in candidates:
            best[st] = max(best.get(st, (0, 0)), (score, i))
        top = sorted(best.items(), key=lambda kv: (-kv[1][0], -kv[1][1]))[:4]
        new[FOCUS] = [f"- (#{i}) {_short(st)}" for st, (_, i) in sorted(top, key=lambda kv: kv[1][1])]

    new["## Decisions"] = [
        f"- {w['finding']} (#{i}): {_short(st)}" for i, st in _latest_distinct(scan.reasons, 6) if st not in pinned
    ]

    # edited files first, then read, then the rest; the most recent within each (listings never evict edits)
    order = {path: n for n, path in enumerate(scan.files)}
    ranked = sorted(scan.files, key=lambda p: (_file_rank(scan.files[p]), order[p]))[-16:]
    files = [f"- {path}: {', '.join(scan.files[path][-4:])}" for path in sorted(ranked, key=order.__getitem__)]
    identifiers = [f.text for f in _facts_of(facts, "identifier")]
    if identifiers:
        files.append(f"- {w['identifiers']}: " + ", ".join(identifiers[-16:]))
    new["## Files and identifiers"] = files

    errors = []
    for fact in _facts_of(facts, "error"):
        if fact.source_index is None or fact.role == "summary":
            continue  # carried errors come back through the previous summary's own lines
        later = [i for i in scan.resolved_at if i > fact.source_index]
        status = w["resolved"].format(n=later[0]) if later else w["unresolved"]
        errors.append(f"- (#{fact.source_index}) {status}: {_short(fact.text, 90)}")
    new["## Errors"] = errors

    constraints = []
    if any(f.kind in ("constraint", "approval") for f in facts):
        constraints.append("- " + w["see_pinned"])
    constraints += [f"- {w['preference']} (#{i}): {_short(st)}" for i, st in _latest_distinct(scan.preferences, 4)]
    new["## Constraints and preferences"] = constraints

    progress = _user_lines(scan.user_turns, pinned, w["user"])
    if scan.last_assistant:
        i, t = scan.last_assistant
        progress.append(f"- {w['last_state']} (#{i}): {t}")
    last = scan.last_assistant[1] if scan.last_assistant else ""
    progress += [
        f"- {w['next']} (#{i}): {_short(st)}" for i, st in _latest_distinct(scan.next_steps, 2) if _short(st) != last
    ]
    new["## Progress and next steps"] = progress

    new["## Key tool results"] = _key_tool_results(scan, facts, w["lines"])[-6:]

    return _merge_previous(request.previous_summary, new)


def _user_lines(turns: Sequence[tuple[int, str]], pinned: set[str], label: str = "User request") -> list[str]:
    """Every distinct user turn, whole, except a turn that is one pinned sentence; the size cap drops
    these after every tool-derived line. Long turns that differ only in numbers (a runtime's templated
    "found 2 actions" prompts) count once, at the latest; short ones are a person's words, kept each."""
    latest: dict[str, tuple[int, str]] = {}
    for index, text in turns:
        if text.strip() in pinned:
            continue  # already verbatim in the pinned facts
        line = _user_turn(text)
        key = number_key(line) if len(line) > 200 else line
        latest.pop(key, None)
        latest[key] = (index, line)
    return [f"- {label} (#{i}): {t}" for i, t in sorted(latest.values())]


def _gist(message: dict[str, Any], error: str | None, lines_word: str = "({n} lines)") -> str:
    text = content_text(message)
    lines = text.count("\n") + 1 if text else 0
    first = error or next((ln for ln in text[:2_000].splitlines() if ln.strip()), "")
    return f"{_short(first, 140)} {lines_word.format(n=lines)}"


def _key_tool_results(scan: _Scan, facts: Sequence[Fact], lines_word: str = "({n} lines)") -> list[str]:
    errors = {f.source_index: f.text for f in facts if f.kind == "error" and f.source_index is not None}
    chosen: dict[int, str] = {}
    last_by_tool: dict[str, int] = {}
    for n, (index, name, args, message) in enumerate(scan.tool_results):
        last_by_tool[name] = n
        if index in errors:
            chosen[index] = f"- (#{index}) {name}({args}): {_gist(message, errors[index], lines_word)}"
    for n in sorted(last_by_tool.values())[-6:]:
        index, name, args, message = scan.tool_results[n]
        chosen.setdefault(index, f"- (#{index}) {name}({args}): {_gist(message, None, lines_word)}")
    return [chosen[i] for i in sorted(chosen)][-8:]


def _merge_previous(previous: str | None, new: dict[str, list[str]]) -> dict[str, list[str]]:
    if not previous:
        return new
    old = parse_sections(previous)
    old.pop("## Pinned facts", None)
    old.pop(FOCUS, None)
    merged: dict[str, list[str]] = {}
    for heading in list(old) + [h for h in new if h not in old]:
        lines: list[str] = []
        seen: set[str] = set()
        for line in old.get(heading, []) + new.get(heading, []):
            if line not in seen:
                seen.add(line)
                lines.append(line)
        merged[heading] = lines
    return merged


def _request_language(request: SummaryRequest) -> str:
    users = [content_text(m) for m in request.messages if isinstance(m, dict) and m.get("role") == "user"]
    return session_language(users or [content_text(m) for m in request.messages[:20] if isinstance(m, dict)])


class ExtractiveSummarizer:
    """Offline, deterministic summarizer; the default when no model endpoint is configured."""

    name = "extractive"

    def summarize(self, request: SummaryRequest) -> SummaryOutcome:
        """Build the structured summary from the segment and its pinned facts. Never raises."""
        started = time.perf_counter()
        try:
            prose = mask_secrets(render_sections(build_sections(request), _request_language(request)))
            text = finalize_summary(prose, request.facts, request.max_tokens)
        except Exception as exc:  # a bug here must degrade the run, not crash it
            return SummaryOutcome(
                text=None,
                generator=self.name,
                prompt_version=EXTRACTIVE_VERSION,
                error=f"extractive summarizer failed: {type(exc).__name__}: {exc}",
                latency_ms=(time.perf_counter() - started) * 1000,
            )
        return SummaryOutcome(
            text=text,
            generator=self.name,
            prompt_version=EXTRACTIVE_VERSION,
            input_tokens=request.segment_tokens or 0,
            output_tokens=count_text_tokens(text),
            latency_ms=(time.perf_counter() - started) * 1000,
        )

    async def asummarize(self, request: SummaryRequest) -> SummaryOutcome:
        """Same as :meth:`summarize` (the work is CPU-bound and quick)."""
        return self.summarize(request)
