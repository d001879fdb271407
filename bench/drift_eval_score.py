"""Matching and scoring for ``bench/drift_eval.py``: which finding (or claim verdict) is about which labelled item.

Pure logic over plain data, with no file access and no detector import, so the unit test drives it with a tiny
inline fixture. The matching rule (documented in ``bench/data/drift_eval/README.md``):

1. **Items quoted from the summary** (every kind except ``constraint_dropped`` and ``identifier_missing``) sit on
   one summary line (``item["line"]``, 0-based in ``text.splitlines()``). A finding is placed on the summary
   lines its ``evidence["summary"]`` text holds or is held by (whitespace and case folded). On a line with one
   item, a placed finding points at that item; on a line with several, it points at the items whose quote
   overlaps its summary evidence (one holds the other, or most key terms shared), or at all of them when none
   does. A finding whose summary evidence names no line also points at an item when both quote the same
   passage (overlap as above) or name the same archived message (``source_index``, segment scope).
2. **Items quoted from the original** (``constraint_dropped``, ``identifier_missing``) point only at findings
   whose ``evidence["original"]`` holds the quote or is held by it, or that name the same archived message with
   an empty summary side.
3. A **claim verdict** (the drift package's ``ClaimVerdict``) carries its line: it points at the items on that
   line, refined by overlap with its ``text`` as in 1.

An error item is **caught** when a finding of an equivalent kind (:data:`EQUIVALENT`) points at it, and
**flagged** when any finding does. A faithful item is **alarmed** when a medium or high finding points at it,
and **case-opening** when a high one does. Low findings are notes: they may catch an error, never alarm.
"""

from __future__ import annotations

import re
from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from agent_compression.types import DRIFT_KINDS

#: the kinds of error a label may name: the drift kinds a finding reports
ERROR_KINDS = DRIFT_KINDS
LABEL_KINDS = (*ERROR_KINDS, "faithful")
#: kinds whose quote comes from the original messages, not from the summary
ORIGINAL_SIDE = frozenset({"constraint_dropped", "identifier_missing"})
ALARM = frozenset({"high", "medium"})
#: verdicts that say a claim is wrong or has no support
NEGATIVE_VERDICTS = frozenset({"contradicted", "unsupported"})

#: which finding kinds catch an error of each kind (the same pairs as ``bench/drift_real.py``): a forbidden
#: action said to be done is both an inversion and a fabricated progress claim; an error put on an identifier
#: that never had it is both a wrong attribution and a fabricated identifier
EQUIVALENT: dict[str, frozenset[str]] = {kind: frozenset({kind}) for kind in ERROR_KINDS}
EQUIVALENT["constraint_inverted"] = frozenset({"constraint_inverted", "progress_fabricated"})
EQUIVALENT["progress_fabricated"] = frozenset({"progress_fabricated", "constraint_inverted"})
EQUIVALENT["wrong_attribution"] = frozenset({"wrong_attribution", "identifier_fabricated"})
EQUIVALENT["identifier_fabricated"] = frozenset({"identifier_fabricated", "wrong_attribution"})

#: share of the smaller side's key terms the other side must hold for two quotes to overlap
OVERLAP = 0.6

_WORD = re.compile(r"[A-Za-z_][A-Za-z0-9_.:/#-]*[A-Za-z0-9_]|[0-9][0-9.,:$%-]*")
_CJK = re.compile(r"[\u4e00-\u9fff]+")
_STOP = frozenset(
    re.split(
        r"\s+",
        "the and for with was were has have had that this then than are not but all its into from after before "
        "now also only one two been being which when what who will would can could should may might",
    )
)


def flat(text: str) -> str:
    """``text`` with whitespace runs folded to one space, stripped and lower-cased."""
    return re.sub(r"\s+", " ", text or "").strip().lower()


def terms(text: str) -> set[str]:
    """Content terms of ``text``: words of three or more characters (not stop words), numbers, and CJK
    character bigrams (single characters for a one-character run)."""
    out = {w.lower().strip(".,:") for w in _WORD.findall(text or "")}
    out = {w for w in out if (len(w) >= 3 or w[:1].isdigit()) and w not in _STOP}
    for run in _CJK.findall(text or ""):
        out.update(run[i : i + 2] for i in range(max(1, len(run) - 1)))
    return out


def overlaps(a: str, b: str) -> bool:
    """Whether two quotes are about the same passage: one holds the other, or they share most key terms."""
    fa, fb = flat(a), flat(b)
    if not fa or not fb:
        return False
    if fa in fb or fb in fa:
        return True
    ta, tb = terms(a), terms(b)
    small, large = (ta, tb) if len(ta) <= len(tb) else (tb, ta)
    return len(small) >= 2 and len(small & large) / len(small) >= OVERLAP


def lines_holding(text: str, evidence: str) -> list[int]:
    """The summary lines that hold ``evidence`` or are held by it (folded), 0-based."""
    ev = flat(evidence)
    if not ev:
        return []
    out = []
    for i, line in enumerate(text.splitlines()):
        fl = flat(line.lstrip("-*# ").strip())
        if fl and (ev in fl or (len(fl) >= 8 and fl in ev)):
            out.append(i)
    return out


def _on_line(items: Sequence[Mapping[str, Any]], line: int, quote: str) -> list[int]:
    """Indexes of the summary-side items on ``line``; narrowed to those overlapping ``quote`` when several."""
    here = [i for i, item in enumerate(items) if item.get("line") == line and item["kind"] not in ORIGINAL_SIDE]
    if len(here) > 1:
        narrowed = [i for i in here if overlaps(items[i].get("quote", ""), quote)]
        return narrowed or here
    return here


def finding_points(finding: Mapping[str, Any], items: Sequence[Mapping[str, Any]], text: str) -> list[int]:
    """Indexes of the items a finding (a ``DriftFinding.to_dict()``) is about, by the rule in the module doc."""
    evidence = finding.get("evidence") or {}
    summary_side = str(evidence.get("summary") or "")
    original_side = str(evidence.get("original") or "")
    same_message = finding.get("scope", "segment") == "segment" and finding.get("source_index") is not None
    hits: set[int] = set()
    placed = lines_holding(text, summary_side)
    for line in placed:
        hits.update(_on_line(items, line, summary_side))
    for i, item in enumerate(items):
        quote = str(item.get("quote") or "")
        if item["kind"] in ORIGINAL_SIDE:
            fq, fo = flat(quote), flat(original_side)
            quoted = bool(fq and fo and (fq in fo or fo in fq))
            same = not summary_side and same_message and finding.get("source_index") == item.get("source_index")
            if quoted or same:
                hits.add(i)
            continue
        if placed:
            continue
        same = (
            same_message
            and item.get("scope", "segment") == "segment"
            and item.get("source_index") is not None
            and finding.get("source_index") == item.get("source_index")
        )
        if (summary_side and overlaps(quote, summary_side)) or same:
            hits.add(i)
    return sorted(hits)


def claim_points(claim: Mapping[str, Any], items: Sequence[Mapping[str, Any]]) -> list[int]:
    """Indexes of the items a claim verdict (a ``ClaimVerdict.to_dict()``) is about: those on its line."""
    line = claim.get("line")
    if not isinstance(line, int):
        return []
    return _on_line(items, line, str(claim.get("text") or ""))


@dataclass
class Scored:
    """One labelled summary with the detector's output and what matched what."""

    summary_id: str
    run: str
    family: str
    language: str
    split: str
    items: list[dict[str, Any]]
    findings: list[dict[str, Any]]
    claims: list[dict[str, Any]] | None = None
    #: item index -> finding indexes pointing at it
    pointed: dict[int, list[int]] = field(default_factory=dict)
    #: item index -> claim indexes on its line with a negative verdict
    negated: dict[int, list[int]] = field(default_factory=dict)

    def caught(self, i: int, severities: Iterable[str] = ("high", "medium", "low")) -> bool:
        kinds = EQUIVALENT[self.items[i]["kind"]]
        wanted = set(severities)
        return any(
            self.findings[f]["kind"] in kinds and self.findings[f]["severity"] in wanted
            for f in self.pointed.get(i, ())
        )

    def flagged(self, i: int) -> bool:
        return bool(self.pointed.get(i))

    def alarmed(self, i: int, severities: frozenset[str] = ALARM) -> bool:
        return any(self.findings[f]["severity"] in severities for f in self.pointed.get(i, ()))

    def unplaced_alarms(self) -> int:
        """Medium or high findings that point at no labelled item."""
        placed = {f for found in self.pointed.values() for f in found}
        return sum(1 for f, x in enumerate(self.findings) if x["severity"] in ALARM and f not in placed)


def match(scored: Scored, text: str) -> Scored:
    """Fill ``scored.pointed`` (and ``negated`` when there are claims) for the summary ``text``."""
    for f_index, finding in enumerate(scored.findings):
        for i in finding_points(finding, scored.items, text):
            scored.pointed.setdefault(i, []).append(f_index)
    for c_index, claim in enumerate(scored.claims or ()):
        if claim.get("verdict") in NEGATIVE_VERDICTS:
            for i in claim_points(claim, scored.items):
                scored.negated.setdefault(i, []).append(c_index)
    return scored


@dataclass
class Totals:
    summaries: int = 0
    errors: int = 0
    caught: int = 0
    caught_by_alarm: int = 0
    flagged: int = 0
    faithful: int = 0
    alarmed: int = 0
    case_opening: int = 0
    unplaced_alarms: int = 0
    findings: int = 0
    high_findings: int = 0
    #: claim-level (only when the detector returns claims): errors / faithful items on a line with a
    #: contradicted or unsupported verdict
    with_claims: int = 0
    errors_negated: int = 0
    faithful_negated: int = 0
    by_kind: dict[str, list[int]] = field(default_factory=lambda: defaultdict(lambda: [0, 0]))

    def as_dict(self) -> dict[str, Any]:
        out = {k: v for k, v in self.__dict__.items() if k != "by_kind"}
        out["recall"] = ratio(self.caught, self.errors)
        out["false_alarm_rate"] = ratio(self.alarmed, self.faithful)
        out["by_kind"] = {k: {"caught": c, "total": n} for k, (c, n) in sorted(self.by_kind.items())}
        return out


def ratio(num: int, den: int) -> float | None:
    return round(num / den, 4) if den else None


def totals(scored: Iterable[Scored]) -> Totals:
    t = Totals()
    for s in scored:
        t.summaries += 1
        t.findings += len(s.findings)
        t.high_findings += sum(1 for f in s.findings if f["severity"] == "high")
        t.unplaced_alarms += s.unplaced_alarms()
        t.with_claims += int(s.claims is not None)
        for i, item in enumerate(s.items):
            if item["kind"] == "faithful":
                t.faithful += 1
                t.alarmed += int(s.alarmed(i))
                t.case_opening += int(s.alarmed(i, frozenset({"high"})))
                t.faithful_negated += int(i in s.negated)
                continue
            hit = s.caught(i)
            t.errors += 1
            t.caught += int(hit)
            t.caught_by_alarm += int(s.caught(i, ALARM))
            t.flagged += int(s.flagged(i))
            t.errors_negated += int(i in s.negated)
            t.by_kind[item["kind"]][0] += int(hit)
            t.by_kind[item["kind"]][1] += 1
    return t
