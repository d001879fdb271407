"""Drift checks: did a summary change what happened? Claims of the summary checked against evidence.

One job per module: :mod:`.evidence` (what the originals say, built once per archive), :mod:`.claims` (each
summary line as typed claims with their certainty), :mod:`.comparators` (one per claim type: a verdict and the
messages it rests on), :mod:`.policy` (which verdicts become findings, at which severity), :mod:`.judge` (who
decides what the rules cannot), :mod:`.text` (cue words, read from data files, and the terms texts are compared by).
"""

from __future__ import annotations

from ..types import DRIFT_KINDS, ClaimType, Severity, Verdict
from .assess import assess_summary, check_drift
from .judge import Judge, ModelJudge, RuleJudge
from .types import REASONS, Assessment, ClaimVerdict, DriftFinding

__all__ = [
    "DRIFT_KINDS",
    "REASONS",
    "Assessment",
    "ClaimType",
    "ClaimVerdict",
    "DriftFinding",
    "Judge",
    "ModelJudge",
    "RuleJudge",
    "Severity",
    "Verdict",
    "assess_summary",
    "check_drift",
]
