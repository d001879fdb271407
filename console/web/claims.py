"""The drift check's line-by-line reading of a summary, as the summary and drift case pages show it.

Each line of the summary with the claims the check found on it: the verdict (supported, contradicted, no
support found, cannot tell), what kind of claim it is, why, and links to the messages the verdict rests on.
Texts are masked unless the request reveals; labels are translated by code.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from agent_compression.drift import REASONS

from ..display import mask_unless_revealed
from ..models import Summary
from . import labels
from .presenters import source_link

#: the order verdicts are counted and listed in: what needs a reviewer first
VERDICT_ORDER = ("contradicted", "unsupported", "cannot_tell", "supported")


@dataclass
class ClaimRow:
    verdict: str
    verdict_label: Any
    type_label: Any
    certainty_label: Any
    reason_label: Any
    note: str
    #: (history index, link or None) of each message the verdict rests on
    sources: list[tuple[int, str | None]]


@dataclass
class LineRow:
    number: int  # 1-based, as a reader counts lines
    text: str
    claims: list[ClaimRow] = field(default_factory=list)

    @property
    def verdict(self) -> str:
        """The line's worst verdict ("" for a line with no claim)."""
        found = {c.verdict for c in self.claims}
        return next((v for v in VERDICT_ORDER if v in found), "")


def _claim_row(claim: dict[str, Any], summary: Summary) -> ClaimRow:
    verdict = str(claim.get("verdict") or "cannot_tell")
    reason = str(claim.get("reason") or "")
    indexes = [i for i in claim.get("messages") or () if isinstance(i, int)]
    return ClaimRow(
        verdict=verdict,
        verdict_label=labels.label(labels.VERDICTS, verdict),
        type_label=labels.label(labels.CLAIM_TYPES, claim.get("claim_type") or "other"),
        certainty_label=labels.CERTAINTIES.get(str(claim.get("certainty") or ""), ""),
        reason_label=labels.label(labels.DETAILS, reason, REASONS.get(reason, "")) if reason else "",
        note=mask_unless_revealed(str(claim.get("note") or "")),
        sources=[(i, source_link(summary.archive, i)) for i in indexes],
    )


def claim_lines(summary: Summary, *, only: Iterable[int] | None = None) -> list[LineRow]:
    """The summary's lines that carry claims, in order (``only``: those line numbers, 0-based)."""
    claims = (summary.drift_assessment or {}).get("claims") or []
    if not claims:
        return []
    wanted = set(only) if only is not None else None
    lines = summary.text.splitlines()
    rows: dict[int, LineRow] = {}
    for claim in claims:
        line = claim.get("line")
        if not isinstance(line, int) or not 0 <= line < len(lines) or (wanted is not None and line not in wanted):
            continue
        row = rows.get(line) or rows.setdefault(line, LineRow(line + 1, mask_unless_revealed(lines[line].strip())))
        row.claims.append(_claim_row(claim, summary))
    return [rows[k] for k in sorted(rows)]


def verdict_counts(rows: list[LineRow]) -> list[tuple[str, Any, int]]:
    """(verdict, label, claims) for each verdict present, in ``VERDICT_ORDER``."""
    counts = Counter(c.verdict for row in rows for c in row.claims)
    return [(v, labels.label(labels.VERDICTS, v), counts[v]) for v in VERDICT_ORDER if counts[v]]


def case_lines(summary: Summary, findings: list[dict[str, Any]]) -> list[LineRow]:
    """The lines a drift case is about: those whose text holds a quote of one of its findings."""
    quotes = [str((f.get("evidence") or {}).get("summary") or "").strip() for f in findings]
    quotes = [q for q in quotes if q]
    if not quotes:
        return []
    lines = summary.text.splitlines()
    about = {i for i, text in enumerate(lines) if any(q in text or text.strip() in q for q in quotes if text.strip())}
    return claim_lines(summary, only=about)
