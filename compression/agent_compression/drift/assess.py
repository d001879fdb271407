"""``assess_summary``: every claim of a summary with its verdict, and the findings the policy draws from them."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from ..types import ClaimType, Verdict
from . import legacy
from .judge import Judge, RuleJudge
from .types import Assessment, ClaimVerdict, DriftFinding

_TYPE_OF_KIND = {
    "constraint_dropped": ClaimType.REQUIREMENT,
    "constraint_inverted": ClaimType.REQUIREMENT,
    "constraint_fabricated": ClaimType.REQUIREMENT,
    "identifier_missing": ClaimType.IDENTIFIER,
    "identifier_fabricated": ClaimType.IDENTIFIER,
    "hedge_lost": ClaimType.CAUSE,
    "progress_fabricated": ClaimType.STATE,
    "wrong_attribution": ClaimType.CAUSE,
}


def assess_summary(
    original_messages: Sequence[dict[str, Any]],
    summary_text: str,
    *,
    context_messages: Sequence[dict[str, Any]] | None = None,
    judge: Judge | None = None,
) -> Assessment:
    """Check ``summary_text`` against the messages it replaced (and ``context_messages``, the rest of the
    history, whose constraints it must not invert)."""
    judge = judge or RuleJudge()
    findings = legacy.check_drift(original_messages, summary_text, context_messages=context_messages)
    lines = summary_text.splitlines() if summary_text else []
    claims = []
    for number, line in enumerate(lines):
        text = line.strip()
        if not text or text.startswith("#"):
            continue
        hits = [f for f in findings if f.evidence.get("summary") and f.evidence["summary"].strip() in text]
        if hits:
            f = hits[0]
            claims.append(
                ClaimVerdict(
                    line=number,
                    text=text,
                    claim_type=_TYPE_OF_KIND.get(f.kind, ClaimType.OTHER).value,
                    certainty="certain",
                    verdict=Verdict.CONTRADICTED.value if f.severity == "high" else Verdict.UNSUPPORTED.value,
                    evidence=(f.source_index,) if f.source_index is not None else (),
                    scope=f.scope,
                    reason=f.code,
                    note=f.evidence.get("original", "")[:160],
                )
            )
        else:
            claims.append(ClaimVerdict(number, text, ClaimType.OTHER.value, "certain", Verdict.CANNOT_TELL.value))
    return Assessment(tuple(claims), tuple(findings), judge.name)


def check_drift(
    original_messages: Sequence[dict[str, Any]],
    summary_text: str,
    *,
    context_messages: Sequence[dict[str, Any]] | None = None,
) -> list[DriftFinding]:
    """The findings of :func:`assess_summary` (high first, then by source index)."""
    return list(assess_summary(original_messages, summary_text, context_messages=context_messages).findings)
