"""Pinned facts: what must survive compression verbatim, extracted by code (never by a model).

Kinds, in priority order: ``constraint`` (a user's prohibition or requirement,
kept as the whole sentence so the negation cannot get lost), ``approval``,
``error``, ``path``, ``decision``, ``command``, ``identifier``. Constraints and
approvals are always kept; the other kinds are capped so that the summary
stays small however long the segment is.

Constraints include what users ask for standing: a command to run after every
change, limits ("keep every function under 40 lines", "不超过 40 行"), "from now
on" / "以后都…" instructions, prohibitions with their negation.

Errors come from the whole of each tool output (up to a bound per message) in
linear time: a literal pre-filter finds candidate lines, exception and
``FAILED …`` lines outrank counters such as ``1 failed, 530 passed``, and lines
that differ only in numbers count once (the latest wins).

Paths are ranked by what happened to the file (see :data:`PATH_RANKS`):
created or edited > named by the user > read > mentioned > listed in tool
output, including bare file names in shell commands (``cat > x.py``,
``sed -i … x.py``, ``tee x.py``, ``> x.py``), so listings never evict edits.

Numbering: every fact's ``source_index`` is a *history index*, the message's
position in the session's full, never-compressed history (see
:func:`history_indexes`); for a first compression it is the index in the
input. Facts carried from an earlier summary keep the index written there.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from .cues import cue_pattern
from .messages import call_arguments, call_name, content_text

# SERVER_ERROR and has_error_hint: re-exported for the drift checks, which import them from here
from .patterns import (  # noqa: F401
    SERVER_ERROR,
    find_error_lines,
    find_file_names,
    find_identifiers,
    find_paths,
    has_error_hint,
    is_shell_tool,
    is_write_tool,
    number_key,
    salient_error_lines,
    shell_words,
    shell_written_files,
    windowed,
)
from .secrets import mask_secrets
from .summary_message import (
    ACKNOWLEDGEMENT,
    BRIDGE,
    is_summary_message,
    parse_summary_message,
    summary_history_range,
)
from .types import SUMMARY_MARKER, Fact

#: kinds in priority order (the order of the ``## Pinned facts`` section)
FACT_KINDS: tuple[str, ...] = ("constraint", "approval", "error", "path", "decision", "command", "identifier")

#: texts the compressor itself writes around a summary (never facts)
COMPRESSOR_TEXTS = frozenset({ACKNOWLEDGEMENT, BRIDGE})

#: heading of the section, written by code, that carries facts across compressions
PINNED_HEADING = "## Pinned facts"


@dataclass(frozen=True)
class FactLimits:
    """How many facts of each kind are kept (the highest ranked, then the most recent, win)."""

    constraint: int = 40
    approval: int = 20
    error: int = 12
    path: int = 24
    decision: int = 12
    command: int = 10
    identifier: int = 20
    #: longest fact text kept (longer texts are cut with an ellipsis)
    max_chars: int = 400

    def cap(self, kind: str) -> int:
        return int(getattr(self, kind, 10))


DEFAULT_LIMITS = FactLimits()

# Windows: how much of each message is scanned (head, tail), by role. Tool output is scanned for
# errors up to this bound (a 3,000-line test run is ~150 KB); paths only in its opening.
_WINDOWS = {"user": (16_000, 8_000), "assistant": (6_000, 4_000), "tool": (300_000, 100_000)}

#: what happened to a file, best first: the rank a path fact is kept by (higher wins the cap)
PATH_RANKS = {"edited": 5, "user": 4, "read": 3, "summary": 3, "used": 2, "mentioned": 1, "listed": 0}

# ---------------------------------------------------------------- patterns

# a period ends a sentence only after a word ("done. Next"), not in "./..." or "ruff check . && mypy"
_SENTENCE_SPLIT = re.compile(r"(?<=[。！？!?])|(?<=[^\s./]\.)(?=\s)|\n+")

# prohibitions, requirements, limits, standing instructions, conditions and exceptions: data files per
# language (agent_compression/data/cues/constraint_*.txt), checked before approvals ("don't proceed" is a rule)
_CONSTRAINT_EN = cue_pattern("constraint_en")
_CONSTRAINT_ZH = cue_pattern("constraint_zh")
_APPROVAL_EN = re.compile(
    r"\b(?:approved?|approving|go\s+ahead|lgtm|ship\s+it|green\s+light|signed?\s+off|you\s+may|you\s+can\s+proceed"
    r"|proceed|permission\s+granted|ok(?:ay)?\s+to|allowed\s+to|confirmed?|sounds\s+good|do\s+it|please\s+book)\b"
    # a yes that grants something ("yes, please cancel it", "sure, do it"), not "sure, it's sofia_kim_7287"
    r"|^(?:yes|yep|yeah|sure)\b[,.!]?\s*(?:please\b|do\b|book\b|go\b|proceed\b|you\s+can\b|that'?s\s+(?:fine|ok)|$)",
)
_APPROVAL_ZH = re.compile(
    r"批准|同意|可以执行|可以开始|可以继续|确认执行|准了|放行|可以上线|可以部署|可以合并|可以删除|可以发布|执行吧|开始吧|就这么办"
    # a reply that opens with a yes: "可以，就改订单 X 吧", "行，…", "好的，…", "确认，…"
    r"|^(?:可以|行|没问题|确认|确定|是的)[，,。！!]|就按|照做|去做吧|改吧|订吧|删吧|上线吧"
)
_DECISION_EN = re.compile(
    r"\b(?:we\s+will|we'll|we\s+decided|decided|decision|let'?s|let\s+us|going\s+with|go\s+with|switch(?:ed)?\s+to"
    r"|instead\s+of|the\s+plan\s+is|plan:|the\s+fix\s+is|root\s+cause|we\s+chose|opted\s+to)\b",
)
_DECISION_ZH = re.compile(r"决定|改为|改成|改用|换成|就用|采用|方案是|我们将|那就|确定用|根因|原因是|结论")

_COMMAND_KEYS = ("command", "cmd", "script", "commands", "code", "input", "args")
_PATH_KEYS = ("path", "file", "file_path", "filepath", "filename", "target", "dir", "directory", "cwd")
_PATH_NEEDLES = ('path"', 'file"', '"filename"', '"target"', '"dir', '"cwd"')

# error lines, by how much they say: exception / FAILED lines > other error lines > counters and exit codes
# tool-call argument keys whose values identify what the task is about
_ID_KEY = re.compile(
    r"(?:^|_)(?:id|ids|number|no|code|ref|reference|sku|order|reservation|ticket|issue|pr|branch)$", re.I
)
# a JSON key ending: the raw arguments are parsed only when a key ends like an id key (a literal-led
# pattern: an alternation of the endings, case-insensitive, was the slowest check on large arguments)
_KEY_END = re.compile(r'"\s*:')
_ID_KEY_ENDINGS = ("id", "number", "code", "ref", "order", "reservation", "ticket", "issue", "branch")

_PINNED_LINE = re.compile(r"^- \[(?P<kind>[a-z_]+)\](?: \(#(?P<index>\d+)\))? (?P<text>.+)$")


# ---------------------------------------------------------------- helpers


def split_sentences(text: str) -> list[str]:
    """Sentences (stripped, non-empty) of ``text``, keeping their closing punctuation (。！？.!?)."""
    return [s.strip() for s in _SENTENCE_SPLIT.split(text) if s and s.strip()]


# The English patterns are written in lower case and run on lower-cased text: a case-insensitive
# regex is several times slower, and these run on every sentence of the segment.


def is_prohibition(sentence: str) -> bool:
    """Whether ``sentence`` states a constraint: a prohibition or a hard requirement (en/zh)."""
    return bool(_CONSTRAINT_EN.search(sentence.lower()) or _CONSTRAINT_ZH.search(sentence))


def is_approval(sentence: str) -> bool:
    """Whether ``sentence`` grants an approval (en/zh); check :func:`is_prohibition` first."""
    return bool(_APPROVAL_EN.search(sentence.lower()) or _APPROVAL_ZH.search(sentence))


def is_decision(sentence: str) -> bool:
    """Whether ``sentence`` states a decision or its reason ("we decided", "let's", "决定", "改为" ...)."""
    return bool(_DECISION_EN.search(sentence.lower()) or _DECISION_ZH.search(sentence))


def _clip(text: str, limit: int) -> str:
    text = text[: limit * 2].strip()
    if "\n" in text:
        text = text.replace("\r\n", "\n").replace("\n", " ⏎ ")
    return text if len(text) <= limit else text[: limit - 1].rstrip() + "…"


def _arguments(call: dict[str, Any]) -> tuple[dict[str, Any] | None, str]:
    raw = call_arguments(call)
    try:
        parsed = json.loads(raw) if raw else None
    except ValueError:
        parsed = None
    return (parsed if isinstance(parsed, dict) else None), raw


def _command_of(name: str, args: dict[str, Any] | None, raw: str) -> str | None:
    if args is None:
        return raw or None
    for key in _COMMAND_KEYS:
        value = args.get(key)
        if isinstance(value, str) and value.strip():
            return value
        if isinstance(value, list) and value and all(isinstance(v, str) for v in value):
            return " ".join(value)
    return None


def _ids_of(args: dict[str, Any] | None) -> list[str]:
    """Short id-like argument values (keys such as ``reservation_id``, ``order``, ``ticket``)."""
    if args is None:
        return []
    return [
        value
        for key, value in args.items()
        if isinstance(key, str) and _ID_KEY.search(key) and isinstance(value, str) and 2 < len(value) <= 64
        if " " not in value.strip()
    ]


def _names_an_id(raw: str) -> bool:
    """Whether raw JSON arguments hold a key that ends like an id key (``order_id``, ``"Ticket":``)."""
    return any(
        raw[max(0, m.start() - 11) : m.start()].lower().endswith(_ID_KEY_ENDINGS) for m in _KEY_END.finditer(raw)
    )


def _paths_of(args: dict[str, Any] | None) -> list[str]:
    if args is None:
        return []
    out = []
    for key in _PATH_KEYS:
        value = args.get(key)
        if isinstance(value, str) and 2 < len(value) < 300 and "\n" not in value:
            out.append(value)
        elif isinstance(value, list):
            out.extend(v for v in value if isinstance(v, str) and 2 < len(v) < 300 and "\n" not in v)
    return out


# ---------------------------------------------------------------- extraction


#: kinds where texts differing only in numbers are one fact and the latest wins ("1 failed, 30 passed" /
#: "2 failed, 29 passed", "sed -n '10,70p' x.py" / "sed -n '80,140p' x.py"); not constraints: "do not
#: touch module_1" and "module_2" are two
_LATEST_WINS = frozenset({"error", "command"})


class _Collector:
    """Keeps facts deduplicated by (kind, text), remembering the first place each appeared.

    Errors that differ only in numbers are one fact (the latest wins); a path seen again with a
    stronger action (edited after read) takes that action's rank and index.
    """

    def __init__(self, limits: FactLimits) -> None:
        self.limits = limits
        self.facts: dict[tuple[str, str], Fact] = {}

    def add(self, kind: str, text: str, index: int | None, role: str, rank: int = 0) -> None:
        text = _clip(text, self.limits.max_chars)
        if len(text) < 2:
            return
        if "sk-" in text or "=" in text or ":" in text or "Bearer" in text or "-----" in text:
            text = mask_secrets(text)
        latest_wins = kind in _LATEST_WINS
        key = (kind, number_key(text) if latest_wins else text)
        old = self.facts.get(key)
        if old is None or (latest_wins and old.role != "summary"):
            self.facts[key] = Fact(kind=kind, text=text, source_index=index, role=role, rank=rank)
        elif rank > old.rank:
            self.facts[key] = Fact(kind=kind, text=old.text, source_index=index, role=old.role, rank=rank)


#: a user message with more lines than this may hold pasted output (logs, lint, a diff, code): its
#: body is scanned for errors like a tool's output, and its machine-looking lines are no statements
PASTED_LINES = 30
# indented code, diff lines, file:line (lint, grep), log timestamps, pytest "E   ", prompts, rulers,
# exception lines, single tokens: output, not what the person asked for
_MACHINE_LINE = re.compile(
    r"^(?:\s|[+-](?! \S)|@@|[\w./\\-]+:\d+|\d{4}-\d\d-\d\d[T ]\d|E\s{2,}|>>>|\$ |[=_*~#-]{3,}"
    r"|Traceback|[\w.]*(?:Error|Exception|Warning)\b)|^\S*$"
)


def is_pasted(text: str) -> bool:
    """Whether a user message is mostly pasted output (more than :data:`PASTED_LINES` lines)."""
    return text.count("\n", 0, 200_000) > PASTED_LINES


def user_statement_text(text: str) -> str:
    """The part of a user message its statements (constraints, approvals) are read from: all of it
    within 16 KB + 8 KB, but in a long message only its prose lines (a person's words, not the lint
    output, diff or log pasted with them). Shared with the drift checks."""
    text = windowed(text, 16_000, 8_000)
    if not is_pasted(text):
        return text
    return "\n".join(line for line in text.splitlines() if not _MACHINE_LINE.match(line))


def _scan_user(text: str, index: int, out: _Collector) -> None:
    pasted = is_pasted(text)
    if pasted:
        for line in salient_error_lines(text, 3):
            out.add("error", line, index, "user")
    text = user_statement_text(text)
    for sentence in split_sentences(text):
        if is_prohibition(sentence):
            out.add("constraint", sentence, index, "user")
        elif is_approval(sentence):
            out.add("approval", sentence, index, "user")
        elif is_decision(sentence):
            out.add("decision", sentence, index, "user")
    for line in () if pasted else find_error_lines(text):
        out.add("error", line, index, "user")
    for path in find_file_names(text):
        out.add("path", path, index, "user", PATH_RANKS["user"])
    for ident in find_identifiers(text):
        out.add("identifier", ident, index, "user")


def _scan_assistant(message: dict[str, Any], text: str, index: int, out: _Collector) -> None:
    if text and text not in COMPRESSOR_TEXTS:
        for sentence in split_sentences(text):
            if is_decision(sentence):
                out.add("decision", sentence, index, "assistant")
        for path in find_paths(text):
            out.add("path", path, index, "assistant", PATH_RANKS["mentioned"])
        for ident in find_identifiers(text):
            out.add("identifier", ident, index, "assistant")
    for call in message.get("tool_calls") or ():
        if not isinstance(call, dict):
            continue
        name = call_name(call)
        is_command = is_shell_tool(name)
        raw = call_arguments(call)
        if not is_command and not any(needle in raw for needle in _PATH_NEEDLES) and not _names_an_id(raw):
            continue  # nothing to pin: skip parsing the arguments
        args, raw = _arguments(call)
        for value in _ids_of(args):  # reservation_id, order_id, ticket ...: what the task is about
            out.add("identifier", value, index, "assistant", 1)
        command = _command_of(name, args, raw) if is_command else None
        if command:
            out.add("command", command, index, "assistant")
            head = command[:4_000]
            for path in shell_written_files(head):
                out.add("path", path, index, "assistant", PATH_RANKS["edited"])
            for path in find_file_names(shell_words(head)):
                out.add("path", path, index, "assistant", PATH_RANKS["used"])
        action = "edited" if is_write_tool(name) else "read"
        for path in _paths_of(args):
            out.add("path", path, index, "assistant", PATH_RANKS[action])


def _scan_tool(text: str, index: int, out: _Collector) -> None:
    errors = salient_error_lines(text, 3)
    for line in errors:
        out.add("error", line, index, "tool")
    # paths: the opening of the output (search results, listings) and the error lines
    head = text[:300]
    if len(text) > 300 and not text[300].isspace() and not head[-1].isspace():
        head = head[: len(head) - len(head.rsplit(None, 1)[-1])]  # a path cut in two ("tests/x.p") is no path
    for path in find_paths(head)[:3] if "/" in head else ():
        out.add("path", path, index, "tool", PATH_RANKS["listed"])
    for line in errors:
        for path in find_paths(line)[:2]:
            out.add("path", path, index, "tool", PATH_RANKS["mentioned"])


def pinned_facts_of(body: str) -> list[Fact]:
    """Facts listed in the ``## Pinned facts`` section of a summary body, with the ``(#N)`` written there
    (a history index, so it stays valid across compressions), ``role="summary"``."""
    start = body.find(PINNED_HEADING)
    if start < 0:
        return []
    facts = []
    for line in body[start + len(PINNED_HEADING) :].splitlines():
        if line.startswith("## "):
            break
        m = _PINNED_LINE.match(line.strip())
        if m and m.group("kind") in FACT_KINDS:
            index = int(m.group("index")) if m.group("index") else None
            rank = PATH_RANKS["summary"] if m.group("kind") == "path" else 0
            facts.append(
                Fact(kind=m.group("kind"), text=m.group("text").strip(), source_index=index, role="summary", rank=rank)
            )
    return facts


def summary_body(message: dict[str, Any]) -> str | None:
    """Body of an earlier summary message, or ``None`` when ``message`` is not one."""
    parsed = parse_summary_message(message)
    return parsed[1] if parsed else None


def find_previous_summary(messages: Sequence[dict[str, Any]]) -> str | None:
    """Body text of the latest earlier summary message in ``messages``, or ``None``."""
    for message in reversed(messages):
        if isinstance(message, dict) and is_summary_message(message):
            return summary_body(message)
    return None


def history_indexes(messages: Sequence[Any], start: int = 0) -> list[int | None]:
    """The history index of each message: its position in the session's full history as if it had
    never been compressed. This is the one numbering of every ``#N`` in a summary and every fact's
    ``source_index``.

    Messages count up from ``start``; an earlier summary message stands for the range its header
    names (``history=A-B``, or, for summaries written before that field, its ``Archived messages A-B``
    line), so the next message continues after it; the summary itself and the texts the compressor
    inserts around it (bridge, acknowledgement) get ``None``.
    """
    out: list[int | None] = []
    next_index = start
    for message in messages:
        content = message.get("content") if isinstance(message, dict) else None
        if isinstance(content, str) and content.startswith(SUMMARY_MARKER):
            span = summary_history_range(message)
            if span is not None:
                next_index = max(next_index, span[1] + 1)
            out.append(None)
        elif isinstance(content, str) and content in COMPRESSOR_TEXTS:
            out.append(None)
        else:
            out.append(next_index)
            next_index += 1
    return out


def history_position(messages: Sequence[Any], history_index: int, start: int = 0) -> int | None:
    """Where history index ``history_index`` is in ``messages`` (an archive, a run's input): the
    position of that message, or of the earlier summary standing for it; ``None`` when outside.
    ``start`` is the history index of ``messages[0]``'s numbering, as for :func:`history_indexes`
    (for an archive, its ``start``). What a console needs to link a ``#N``."""
    for position, (index, message) in enumerate(zip(history_indexes(messages, start), messages, strict=True)):
        if index == history_index:
            return position
        span = summary_history_range(message) if index is None and isinstance(message, dict) else None
        if span is not None and span[0] <= history_index <= span[1]:
            return position
    return None


def segment_history_range(indexes: Sequence[int | None], messages: Sequence[Any]) -> tuple[int, int] | None:
    """First and last history index (inclusive) that a segment stands for, earlier summaries included."""
    low: int | None = None
    high: int | None = None
    for index, message in zip(indexes, messages, strict=False):
        span = summary_history_range(message) if isinstance(message, dict) and index is None else None
        for value in span or ((index, index) if index is not None else ()):
            low = value if low is None else min(low, value)
            high = value if high is None else max(high, value)
    return None if low is None or high is None else (low, high)


def extract_facts(
    messages: Sequence[dict[str, Any]],
    start_index: int = 0,
    limits: FactLimits = DEFAULT_LIMITS,
    *,
    indexes: Sequence[int | None] | None = None,
) -> list[Fact]:
    """Pinned facts of ``messages`` (a segment starting at absolute index ``start_index``).

    ``indexes``, when given, is the history index of each message (see :func:`history_indexes`)
    and becomes each fact's ``source_index``; otherwise message ``i`` is ``start_index + i``.

    Constraints and approvals come from user messages only, as whole verbatim
    sentences. Errors, paths, decisions, commands and identifiers come from
    every role, each capped by ``limits`` (the most recent win; paths by rank
    first). Facts pinned in an earlier summary message are carried over with
    the index written there. The result is deduplicated by (kind, text) and
    ordered by kind priority, then by source index.
    """
    out = _Collector(limits)
    carried = _Collector(limits)
    for position, message in enumerate(messages):
        if not isinstance(message, dict):
            continue
        index = indexes[position] if indexes is not None and position < len(indexes) else start_index + position
        if is_summary_message(message):
            for fact in pinned_facts_of(summary_body(message) or ""):
                carried.add(fact.kind, fact.text, fact.source_index, fact.role, fact.rank)
            continue
        if index is None:
            continue
        role = message.get("role")
        head, tail = _WINDOWS.get(role if isinstance(role, str) else "", (4_000, 2_000))
        text = windowed(content_text(message), head, tail)
        if role == "user":
            _scan_user(text, index, out)
        elif role == "assistant":
            _scan_assistant(message, text, index, out)
        elif role == "tool":
            _scan_tool(text, index, out)
    merged: dict[tuple[str, str], Fact] = dict(carried.facts)
    for key, fact in out.facts.items():
        merged.setdefault(key, fact)
    return select_facts(merged.values(), limits)


def select_facts(facts: Iterable[Fact], limits: FactLimits = DEFAULT_LIMITS) -> list[Fact]:
    """Deduplicate, cap each kind and order them by kind priority, then source index.

    Within a kind, facts from users and earlier summaries are kept first, then the most recent others.
    """
    by_kind: dict[str, dict[str, Fact]] = {kind: {} for kind in FACT_KINDS}
    for fact in facts:
        bucket = by_kind.setdefault(fact.kind, {})
        bucket.setdefault(fact.text, fact)
    selected: list[Fact] = []
    for kind in list(by_kind):
        cap = limits.cap(kind)
        # rank first (paths: edited > named by the user > read > listed); then what a user said (or an
        # earlier summary pinned) outranks what tools printed; then the most recent
        # (errors: the latest state matters most, whoever printed it)
        ranked = sorted(
            by_kind[kind].values(),
            key=lambda f: (f.rank, kind != "error" and f.role in ("user", "summary"), _order_key(f)),
        )
        kept = ranked[-cap:] if cap > 0 else []
        selected.extend(sorted(kept, key=_order_key))
    return selected


def _order_key(fact: Fact) -> int:
    return -1 if fact.source_index is None else fact.source_index


def render_fact(fact: Fact) -> str:
    """One line of the ``## Pinned facts`` section: ``- [constraint] (#12) 先不要修改部署脚本``."""
    where = f" (#{fact.source_index})" if fact.source_index is not None else ""
    return f"- [{fact.kind}]{where} {fact.text}"


def render_pinned_facts(facts: Sequence[Fact]) -> str:
    """The ``## Pinned facts`` section (heading included); parse it back with :func:`pinned_facts_of`."""
    lines = [PINNED_HEADING]
    lines.extend(render_fact(f) for f in facts)
    if not facts:
        lines.append("- (none)")
    return "\n".join(lines)
