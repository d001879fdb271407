"""The run page's message-by-message alignment of a run's input and output histories
(two key lists), and its grouping for display (changes shown, unchanged stretches collapsed).

The alignment needs only keys and what the run recorded (archive range, pruned
items, validator report); it never loads message data, so it costs the same
whatever the messages hold, and it is linear in the history's length.
"""

from __future__ import annotations

from bisect import bisect_right
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from difflib import SequenceMatcher
from typing import Any

from agent_compression.messages import message_sha256
from agent_compression.summary_message import ACKNOWLEDGEMENT, BRIDGE
from agent_compression.validate import CONTINUED_PLACEHOLDER, LOST_RESULT, NO_REPLY_PLACEHOLDER

# --------------------------------------------------------------------------- alignment of two histories

KEPT = "kept"
PRUNED = "pruned"
TRUNCATED = "truncated"
ARCHIVED = "archived"
INSERTED = "inserted"
PATCHED = "patched"
REMOVED = "removed"
MOVED = "moved"
#: a message that differs for no recorded reason (a runtime's reported run, say)
CHANGED = "changed"
KINDS = (KEPT, PRUNED, TRUNCATED, ARCHIVED, INSERTED, PATCHED, REMOVED, MOVED, CHANGED)

#: keys of the messages the pipeline inserts with fixed content
BRIDGE_KEY = message_sha256({"role": "assistant", "content": BRIDGE})
ACKNOWLEDGEMENT_KEY = message_sha256({"role": "assistant", "content": ACKNOWLEDGEMENT})
_PLACEHOLDER_KEYS = {
    message_sha256({"role": "user", "content": CONTINUED_PLACEHOLDER}): "continued",
    message_sha256({"role": "assistant", "content": NO_REPLY_PLACEHOLDER}): "no_reply",
}
#: blocks of changed messages smaller than this (a side times the other) are aligned exactly
_EXACT_BLOCK = 250_000


def lost_result_key(call_id: str) -> str:
    """The key of the placeholder the validator patches in for a call whose result was lost."""
    return message_sha256({"role": "tool", "tool_call_id": call_id, "content": LOST_RESULT})


@dataclass(slots=True)
class Row:
    """One line of the alignment: an input message, an output message, or both.

    ``note`` says why it changed: the pruned item, the validator's reason, or which
    inserted message it is (``{"inserted": "summary" | "bridge" | "acknowledgement"}``).
    """

    kind: str
    in_index: int | None = None
    out_index: int | None = None
    in_key: str | None = None
    out_key: str | None = None
    note: Mapping[str, Any] | None = None

    @property
    def anchor(self) -> str:
        """The element id deep links use: ``in-<i>``, else ``out-<j>``."""
        return f"in-{self.in_index}" if self.in_index is not None else f"out-{self.out_index}"

    @property
    def keys(self) -> tuple[str, ...]:
        """The keys whose data showing this row needs."""
        return tuple(k for k in dict.fromkeys((self.in_key, self.out_key)) if k)


class _Archived:
    """Stands for the whole archived range in the key list SequenceMatcher sees."""

    def __repr__(self) -> str:
        return "<archived>"


@dataclass
class _Repair:
    """The validator's report, by input index (its own indexes are of the list it was given)."""

    dropped: dict[int, str] = field(default_factory=dict)
    fixed: dict[int, list[str]] = field(default_factory=dict)
    lost: dict[str, str] = field(default_factory=dict)
    #: a tool result moved to follow its call: result's input index -> the call's input index
    moved: dict[int, int] = field(default_factory=dict)


def _read_repair(repair: Mapping[str, Any] | None, n: int, m: int, archive_range: tuple[int, int] | None) -> _Repair:
    out = _Repair()
    if not repair:
        return out
    dropped = [d for d in repair.get("dropped") or () if isinstance(d, dict) and isinstance(d.get("index"), int)]
    fixed = [f for f in repair.get("fixed") or () if isinstance(f, dict) and isinstance(f.get("index"), int)]
    patched = [str(p) for p in repair.get("patched") or ()]
    out.lost = {lost_result_key(cid): cid for cid in patched}
    # the validator saw head + inserted + tail; map its indexes back to the input
    if archive_range is None:

        def to_input(x: int) -> int | None:
            return x if 0 <= x < n else None

    else:
        head, tail = archive_range
        inserted = (
            m
            - head
            - (n - tail)
            + len(dropped)
            - len(patched)
            - len(repair.get("inserted") or ())
            + len(repair.get("merged") or ())
        )
        if not 1 <= inserted <= 3:
            return out  # not a pipeline assembly we can map: leave the changes unexplained

        def to_input(x: int) -> int | None:
            if x < head:
                return x
            if x < head + inserted:
                return None
            i = x - head - inserted + tail
            return i if i < n else None

    for d in dropped:
        i = to_input(d["index"])
        if i is not None:
            out.dropped[i] = str(d.get("reason") or "")
    for f in fixed:
        i = to_input(f["index"])
        if i is not None:
            out.fixed[i] = [str(c) for c in f.get("changes") or ()]
    for mv in repair.get("moved") or ():
        if isinstance(mv, dict) and isinstance(mv.get("index"), int) and isinstance(mv.get("to_follow"), int):
            i, c = to_input(mv["index"]), to_input(mv["to_follow"])
            if i is not None and c is not None:
                out.moved[i] = c
    return out


Opcode = tuple[str, int, int, int, int]


def _greedy(a: Sequence[Any], b: Sequence[str]) -> list[Opcode]:
    """Match equal keys in order, each to its next occurrence close ahead; linear. The last resort."""
    where: dict[str, list[int]] = {}
    for j, key in enumerate(b):
        where.setdefault(key, []).append(j)
    ops: list[Opcode] = []
    i0 = j0 = 0
    for i, key in enumerate(a):
        spots = where.get(key) if isinstance(key, str) else None
        if not spots:
            continue
        k = bisect_right(spots, j0 - 1)
        if k == len(spots) or spots[k] - j0 > 64:  # too far ahead: more likely a different copy
            continue
        j = spots[k]
        if i > i0 or j > j0:
            ops.append(("replace", i0, i, j0, j))
        ops.append(("equal", i, i + 1, j, j + 1))
        i0, j0 = i + 1, j + 1
    if i0 < len(a) or j0 < len(b):
        ops.append(("replace", i0, len(a), j0, len(b)))
    return ops


def _longest_chain(pairs: list[tuple[int, int]]) -> list[tuple[int, int]]:
    """The longest subsequence of ``pairs`` (sorted by first) increasing in second: patience sorting."""
    tops: list[int] = []  # smallest second value ending a chain of each length
    ends: list[int] = []  # index in pairs of that chain's end
    back: list[int] = []
    for k, (_, j) in enumerate(pairs):
        n = bisect_right(tops, j - 1)  # strictly increasing
        if n == len(tops):
            tops.append(j)
            ends.append(k)
        else:
            tops[n] = j
            ends[n] = k
        back.append(ends[n - 1] if n else -1)
    chain: list[tuple[int, int]] = []
    k = ends[-1] if ends else -1
    while k >= 0:
        chain.append(pairs[k])
        k = back[k]
    return chain[::-1]


def _opcodes(a: Sequence[Any], b: Sequence[str], depth: int = 0) -> list[Opcode]:
    """Which elements of ``a`` and ``b`` match, as difflib-style opcodes (only "equal" is meaningful).

    Patience diff: keys found exactly once on each side anchor the alignment (their longest
    increasing chain), and each gap between anchors is aligned the same way, with its own
    unique keys (a "继续" repeated all over a history is unique in a small gap). Small gaps go to
    difflib, exact. O(n log n), where difflib alone degrades with many scattered changes.
    """
    if not a or not b:
        return [("replace", 0, len(a), 0, len(b))] if a or b else []
    if len(a) * len(b) <= _EXACT_BLOCK:
        if len(a) + len(b) < 64 and set(a).isdisjoint(b):  # the usual gap: a pruned result and its stand-in
            return [("replace", 0, len(a), 0, len(b))]
        return [
            (op, i1, i2, j1, j2) for op, i1, i2, j1, j2 in SequenceMatcher(None, a, b, autojunk=False).get_opcodes()
        ]
    if depth > 4:
        return _greedy(a, b)
    count_a: dict[Any, int] = {}
    for key in a:
        count_a[key] = count_a.get(key, 0) + 1
    once_b: dict[str, int] = {}
    seen_b: set[str] = set()
    for j, key in enumerate(b):
        if key in seen_b:
            once_b.pop(key, None)
        else:
            seen_b.add(key)
            once_b[key] = j
    pairs = [(i, once_b[key]) for i, key in enumerate(a) if count_a[key] == 1 and key in once_b]
    chain = _longest_chain(pairs)
    if not chain:
        return _greedy(a, b)
    ops: list[Opcode] = []
    i0 = j0 = 0
    for i, j in [*chain, (len(a), len(b))]:
        if i > i0 or j > j0:
            for op, i1, i2, j1, j2 in _opcodes(a[i0:i], b[j0:j], depth + 1):
                ops.append((op, i0 + i1, i0 + i2, j0 + j1, j0 + j2))
        if i < len(a):
            ops.append(("equal", i, i + 1, j, j + 1))
        i0, j0 = i + 1, j + 1
    return ops


def align(
    input_keys: Sequence[str],
    output_keys: Sequence[str],
    *,
    archive_range: tuple[int, int] | None = None,
    pruned: Iterable[Mapping[str, Any]] = (),
    repair: Mapping[str, Any] | None = None,
) -> list[Row]:
    """Align a run's input and output histories message by message.

    ``archive_range`` is ``(start, end)`` of the archived middle in the input (the
    summary replaced it); ``pruned`` the run's pruned items (input indexes; kinds
    pruned, deduplicated, args_truncated); ``repair`` the validator's report
    (``RepairReport.to_dict()``). Every input index and every output index appears
    in exactly one row, both in increasing order. O(n log n) in the histories' length
    (a patience diff of the keys, which are near-unique hashes; see :func:`_opcodes`).
    """
    n, m = len(input_keys), len(output_keys)
    if archive_range is not None:
        start, end = max(0, min(archive_range[0], n)), max(0, min(archive_range[1], n))
        archive_range = (start, end) if start < end else None
    pruned_at = {p["index"]: p for p in pruned if isinstance(p, Mapping) and isinstance(p.get("index"), int)}
    fix = _read_repair(repair, n, m, archive_range)

    # what SequenceMatcher sees: the archived range as one element, changed messages as unmatchable ones
    archived = _Archived()
    a: list[Any] = []
    a_index: list[int] = []
    i = 0
    while i < n:
        if archive_range is not None and i == archive_range[0]:
            a.append(archived)
            a_index.append(i)
            i = archive_range[1]
            continue
        a.append(("pruned", i) if i in pruned_at else input_keys[i])
        a_index.append(i)
        i += 1

    # consecutive unmatched stretches are one block (a pruned result next to a patched one, say)
    ops: list[Opcode] = []
    for code in _opcodes(a, output_keys):
        if code[0] != "equal" and ops and ops[-1][0] != "equal":
            ops[-1] = ("replace", ops[-1][1], code[2], ops[-1][3], code[4])
        else:
            ops.append(code)

    # a key both dropped in one place and added in another was moved (the validator puts results after calls)
    gone: set[str] = set()
    added: set[str] = set()
    for op, i1, i2, j1, j2 in ops:
        if op != "equal":
            gone.update(k for k in a[i1:i2] if isinstance(k, str))
            added.update(output_keys[j1:j2])
    moved = gone & added

    builder = _Builder(input_keys, output_keys, archive_range, pruned_at, fix, moved)
    for op, i1, i2, j1, j2 in ops:
        if op == "equal":
            for k in range(i2 - i1):
                builder.kept(a_index[i1 + k], j1 + k)
        else:
            builder.block([a_index[k] for k in range(i1, i2)], list(range(j1, j2)), archived in a[i1:i2])
    return builder.rows


class _Builder:
    """Turns each unmatched block (input positions, output positions) into rows, in order."""

    def __init__(
        self,
        input_keys: Sequence[str],
        output_keys: Sequence[str],
        archive_range: tuple[int, int] | None,
        pruned_at: dict[int, Mapping[str, Any]],
        fix: _Repair,
        moved: set[str],
    ) -> None:
        self.input_keys, self.output_keys = input_keys, output_keys
        self.archive_range = archive_range
        self.pruned_at, self.fix, self.moved = pruned_at, fix, moved
        self.rows: list[Row] = []
        # results the validator moved after their call that were changed too (pruned): their new copy has a
        # new key, so it is found by place: the first unexplained output message after the call
        self.moved_changed = {i: c for i, c in fix.moved.items() if i in pruned_at or i in fix.fixed}
        self.awaiting: dict[int, list[int]] = {}
        for i, c in sorted(self.moved_changed.items()):
            self.awaiting.setdefault(c, []).append(i)
        self.anchor: int | None = None  # input index of the latest row present on both sides

    def kept(self, i: int, j: int) -> None:
        self.add(Row(KEPT, i, j, self.output_keys[j], self.output_keys[j]))

    def add(self, row: Row) -> None:
        if row.in_index is not None and row.out_index is not None:
            self.anchor = row.in_index
        self.rows.append(row)

    def _in_row(self, i: int) -> Row | None:
        """The row for an input-only message, or None when it may pair with an output message."""
        key = self.input_keys[i]
        if i in self.fix.dropped:
            return Row(REMOVED, i, None, key, None, {"reason": self.fix.dropped[i]})
        if i in self.moved_changed:
            return Row(MOVED, i, None, key, None, {"moved": "from", **(self.pruned_at.get(i) or {})})
        if key in self.moved and i not in self.pruned_at:
            return Row(MOVED, i, None, key, None, {"moved": "from"})
        return None

    def _out_row(self, j: int) -> Row | None:
        """The row for an output-only message, or None when it may pair with an input message."""
        key = self.output_keys[j]
        if key in self.fix.lost:
            return Row(PATCHED, None, j, None, key, {"lost_result": self.fix.lost[key]})
        if key in _PLACEHOLDER_KEYS:
            return Row(PATCHED, None, j, None, key, {"placeholder": _PLACEHOLDER_KEYS[key]})
        if key == BRIDGE_KEY:
            return Row(INSERTED, None, j, None, key, {"inserted": "bridge"})
        if key == ACKNOWLEDGEMENT_KEY:
            return Row(INSERTED, None, j, None, key, {"inserted": "acknowledgement"})
        if key in self.moved:
            return Row(MOVED, None, j, None, key, {"moved": "to"})
        return None

    def _pair(self, i: int, j: int) -> Row:
        in_key, out_key = self.input_keys[i], self.output_keys[j]
        item = self.pruned_at.get(i)
        if item is not None:
            kind = TRUNCATED if item.get("kind") == "args_truncated" else PRUNED
            return Row(kind, i, j, in_key, out_key, dict(item))
        if i in self.fix.fixed:
            return Row(PATCHED, i, j, in_key, out_key, {"changes": self.fix.fixed[i]})
        return Row(CHANGED, i, j, in_key, out_key)

    def _lone_in(self, i: int) -> Row:
        return self._in_row(i) or Row(REMOVED, i, None, self.input_keys[i], None, {"reason": ""})

    def _lone_out(self, j: int) -> Row:
        explained = self._out_row(j)
        if explained is not None:
            return explained
        waiting = self.awaiting.get(self.anchor) if self.anchor is not None else None
        if waiting:
            return Row(MOVED, None, j, None, self.output_keys[j], {"moved": "to", "from": waiting.pop(0)})
        return Row(INSERTED, None, j, None, self.output_keys[j])

    def _waiting_here(self) -> int:
        return len(self.awaiting.get(self.anchor, ())) if self.anchor is not None else 0

    def _emit(self, ins: list[int], outs: list[int]) -> None:
        """Rows for a stretch without the archive: explained messages alone, the rest paired in order."""
        one = len(ins) == 1 and len(outs) == 1 and not self._waiting_here()
        if one and self._in_row(ins[0]) is None and self._out_row(outs[0]) is None:
            self.add(self._pair(ins[0], outs[0]))  # the usual case, quickly
            return
        free_in = [i for i in ins if self._in_row(i) is None]
        free_out = [j for j in outs if self._out_row(j) is None]
        # messages moved after the call just before this stretch come first on the output side
        free_out = free_out[min(self._waiting_here(), len(free_out)) :]
        pairs = list(zip(free_in, free_out, strict=False))
        paired_in = {i for i, _ in pairs}
        paired_out = {j for _, j in pairs}
        pending_in = [i for i in ins if i not in paired_in]
        pending_out = [j for j in outs if j not in paired_out]
        pi = po = 0
        for i, j in pairs:
            while pi < len(pending_in) and pending_in[pi] < i:
                self.add(self._lone_in(pending_in[pi]))
                pi += 1
            while po < len(pending_out) and pending_out[po] < j:
                self.add(self._lone_out(pending_out[po]))
                po += 1
            self.add(self._pair(i, j))
        for i in pending_in[pi:]:
            self.add(self._lone_in(i))
        for j in pending_out[po:]:
            self.add(self._lone_out(j))

    def _archived(self, start: int, end: int) -> None:
        for i in range(start, end):
            self.add(Row(ARCHIVED, i, None, self.input_keys[i], None))

    def block(self, ins: list[int], outs: list[int], has_archive: bool) -> None:
        if not has_archive or self.archive_range is None:
            self._emit(ins, outs)
            return
        start, end = self.archive_range
        before = [i for i in ins if i < start]
        after = [i for i in ins if i >= end]
        # the summary: the new output message next to the bridge or the acknowledgement ...
        candidates = [j for j in outs if self._out_row(j) is None]
        summary = None
        for j in candidates:
            prev_key = self.output_keys[j - 1] if j > 0 else None
            next_key = self.output_keys[j + 1] if j + 1 < len(self.output_keys) else None
            if prev_key == BRIDGE_KEY or next_key == ACKNOWLEDGEMENT_KEY:
                summary = j
                break
        if summary is None and candidates:
            # ... else the first one after those that pair with the head or were moved after a call in it
            ahead = sum(1 for i in before if self._in_row(i) is None) + self._waiting_here()
            summary = candidates[min(ahead, len(candidates) - 1)]
        if summary is None:
            self._emit(before, [])
            self._archived(start, end)
            self._emit(after, outs)
            return
        core_start = core_end = summary
        if summary - 1 in outs and self.output_keys[summary - 1] == BRIDGE_KEY:
            core_start = summary - 1
        if summary + 1 in outs and self.output_keys[summary + 1] == ACKNOWLEDGEMENT_KEY:
            core_end = summary + 1
        self._emit(before, [j for j in outs if j < core_start])
        if core_start != summary:
            self.add(self._lone_out(core_start))
        self._archived(start, end)
        self.add(Row(INSERTED, None, summary, None, self.output_keys[summary], {"inserted": "summary"}))
        if core_end != summary:
            self.add(self._lone_out(core_end))
        self._emit(after, [j for j in outs if j > core_end])


# --------------------------------------------------------------------------- grouping for display

#: unchanged stretches this short are shown, as context around changes
CONTEXT_ROWS = 3
#: at most this many rows are rendered by one request; the rest stay behind "show more"
MAX_SHOWN_ROWS = 80
#: an expanded stretch of unchanged messages shows this many per request
EXPAND_PAGE = 100


@dataclass
class Block:
    """A stretch of rows ``[start, end)`` as shown: ``rows`` (shown one by one), ``same`` (unchanged,
    collapsed), ``archive`` (archived messages, collapsed, beside what was inserted for them) or
    ``more`` (not rendered yet: loads on demand)."""

    kind: str
    start: int
    end: int
    rows: list[Row] = field(default_factory=list)

    @property
    def size(self) -> int:
        return self.end - self.start

    @property
    def archived(self) -> list[Row]:
        return [r for r in self.rows if r.kind == ARCHIVED]

    @property
    def inserted(self) -> list[Row]:
        return [r for r in self.rows if r.kind != ARCHIVED]

    @property
    def shown_rows(self) -> list[Row]:
        """Rows whose messages are rendered."""
        if self.kind == "rows":
            return self.rows
        if self.kind == "archive":
            return self.inserted
        return []


def find_row(rows: Sequence[Row], at: str) -> int | None:
    """The position of the row a deep link (``in-<i>`` or ``out-<j>``) names, or None."""
    side, _, number = at.partition("-")
    if side not in ("in", "out") or not number.isdigit():
        return None
    index = int(number)
    attr = "in_index" if side == "in" else "out_index"
    for position, row in enumerate(rows):
        if getattr(row, attr) == index:
            return position
    return None


def group_rows(
    rows: Sequence[Row],
    start: int = 0,
    end: int | None = None,
    *,
    focus: int | None = None,
    context: int = CONTEXT_ROWS,
    budget: int = MAX_SHOWN_ROWS,
    page: int = EXPAND_PAGE,
) -> list[Block]:
    """Group ``rows[start:end]`` for display: changes shown, long unchanged stretches collapsed,
    the archived range as one block, and past ``budget`` shown rows the rest left for later.

    ``focus`` (a row position) is shown whatever the budget: the collapsed stretch holding it
    is opened around it (a deep link).
    """
    end = len(rows) if end is None else min(end, len(rows))
    blocks: list[Block] = []

    def show(first: int, last: int) -> None:
        if blocks and blocks[-1].kind == "rows" and blocks[-1].end == first:
            blocks[-1].rows.extend(rows[first:last])
            blocks[-1].end = last
        else:
            blocks.append(Block("rows", first, last, list(rows[first:last])))

    shown = 0
    r = start
    while r < end:
        if shown >= budget:
            if focus is None or not r <= focus < end:
                blocks.append(Block("more", r, end))
                break
            cut = max(r, focus - context)
            if cut > r:
                blocks.append(Block("more", r, cut))
            r, shown, focus = cut, 0, None if rows[focus].kind != KEPT else focus
            continue
        kind = rows[r].kind
        if kind == KEPT:
            e = r
            while e < end and rows[e].kind == KEPT:
                e += 1
            if e - r <= context:
                show(r, e)
                shown += e - r
            elif focus is not None and r <= focus < e:
                first = max(r, focus - context)
                last = min(e, first + page)
                if first > r:
                    blocks.append(Block("same", r, first))
                show(first, last)
                shown += last - first
                if last < e:
                    blocks.append(Block("same", last, e))
            else:
                # the message just before a change stays in view (the call whose result was pruned, say)
                lead = 1 if e < end and rows[e].kind not in (ARCHIVED, INSERTED) else 0
                blocks.append(Block("same", r, e - lead))
                if lead:
                    show(e - 1, e)
                    shown += 1
            r = e
        elif kind == ARCHIVED or (kind == INSERTED and r + 1 < end and rows[r + 1].kind == ARCHIVED):
            e = r
            while e < end and rows[e].kind in (ARCHIVED, INSERTED):
                e += 1
            block = Block("archive", r, e, list(rows[r:e]))
            blocks.append(block)
            shown += len(block.inserted)
            r = e
        else:
            show(r, r + 1)
            shown += 1
            r += 1
    return blocks


def expand_rows(rows: Sequence[Row], start: int, end: int, *, page: int = EXPAND_PAGE) -> list[Block]:
    """What "show" on a collapsed stretch renders: an unchanged stretch page by page, anything else grouped."""
    end = min(end, len(rows))
    start = max(0, min(start, end))
    if all(row.kind == KEPT for row in rows[start:end]):
        last = min(end, start + page)
        blocks = [Block("rows", start, last, list(rows[start:last]))]
        if last < end:
            blocks.append(Block("same", last, end))
        return blocks
    return group_rows(rows, start, end)


def count_kinds(rows: Iterable[Row]) -> dict[str, int]:
    counts = dict.fromkeys(KINDS, 0)
    for row in rows:
        counts[row.kind] += 1
    return counts
