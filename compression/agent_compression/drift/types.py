"""The drift package's values: findings (stored by the console), claim verdicts and an assessment.

The enums and :data:`DRIFT_KINDS` live in :mod:`agent_compression.types` (the console reads them from there)
and are re-exported here.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from ..types import DRIFT_KINDS, ClaimType, Severity, Verdict

__all__ = ["DRIFT_KINDS", "REASONS", "Assessment", "ClaimType", "ClaimVerdict", "DriftFinding", "Severity", "Verdict"]

_LEGACY = {
    "negation_missing": "the summary states the constrained action without its negation",
    "requirement_negated": "the summary negates a requirement",
    "approval_refused": "an approval became a refusal",
    "not_restated": "no restatement found",
    "restriction_dropped": "the summary names the scope but drops the restriction to it (only, 只)",
    "approval_lost": "approval lost",
    "constraint_unsourced": "a prohibition or approval no user gave",
    "pinned_unsourced": "a pinned constraint or approval that is not in the originals",
    "user_identifier_missing": "an identifier the user gave is not in the summary",
    "assistant_identifier_missing": "an identifier the assistant reported is not in the summary",
    "tool_identifier_missing": "a digest or commit a short tool result returned is not in the summary",
    "identifier_unsourced": "an identifier that appears nowhere in the originals",
    "number_unsourced": "a number that appears nowhere in the originals",
    "limit_number_unsourced": "a number in a limit that appears nowhere in the originals",
    "hedge_dropped": "an uncertain statement became a certain one",
    "limit_exceeded": "the summary reports a number past the limit",
    "window_violated": "the summary reports the action in the window",
    "soft_inversion": "a prohibition became a plan for later (when ready, later, if needed)",
    "command_dropped": "a command the user asked to run is not in the summary",
    "request_dropped": "a request the user made is not in the summary",
    "limit_breach_missing": "what a tool showed over the user's limit is not in the summary",
    "tool_error_missing": "an error that appears only in tool output is not in the summary",
    "wrong_speaker": "the summary puts a statement in the wrong mouth (user / assistant)",
    "error_misplaced": "the summary places an error where it did not happen",
    "user_did_not": "the summary says the user did what the agent did",
    "log_line_spliced": "a log line quoted in the summary that no log holds (parts of two lines)",
    "instruction_copied": "the summary copies the summarizer's own rules as if they were the session's",
    "identifier_mistyped": "the summary calls an identifier something it is not (an order for a user id)",
    "value_misplaced": "the summary gives a name the number a tool's table shows for another name",
    "protected_changed": "the summary tells to change what the user said not to touch",
    "change_misplaced": "the summary puts a change made in another file on what the user said not to touch",
    "cause_unsupported": "the summary gives a cause that no message gives for it",
    "wish_unsourced": "the summary gives the user a wish or belief no user voiced",
    "ids_mismatched": "the summary pairs two things the originals never pair (an item on another order)",
    "limit_dropped": "a limit the user set is not in the summary with its number",
    "tests_not_passed": "the summary says the tests passed; the last test run failed",
    "tests_never_run": "the summary says the tests passed; no test run is in the originals",
    "errors_denied": "the summary says nothing failed, but a tool reported an error",
    "progress_contradicted": "the summary claims as done what the originals say was not done",
    "progress_unsupported": "the summary claims as done what no tool result or message shows",
}


#: what each finding's or verdict's ``code`` / ``reason`` means, in English; the console translates by code
REASONS: dict[str, str] = dict(_LEGACY)


@dataclass(frozen=True)
class DriftFinding:
    """One suspected drift, with quotes from both sides.

    ``code`` says why (a key of :data:`REASONS`); ``detail`` is its English sentence.
    """

    kind: str
    severity: str  # high | medium | low
    evidence: dict[str, str]  # {"original": ..., "summary": ...}
    source_index: int | None = None
    code: str = ""
    #: where ``source_index`` points: "segment" (``original_messages``) or "context" (``context_messages``)
    scope: str = "segment"

    @property
    def detail(self) -> str:
        return REASONS.get(self.code, self.code)

    def to_dict(self) -> dict[str, Any]:
        return {
            "kind": self.kind,
            "severity": self.severity,
            "evidence": dict(self.evidence),
            "source_index": self.source_index,
            "code": self.code,
            "detail": self.detail,
            "scope": self.scope,
        }


@dataclass(frozen=True)
class ClaimVerdict:
    """What the evidence says about one claim of one summary line."""

    #: 0-based index of the line in ``summary_text.splitlines()`` the claim comes from
    line: int
    #: the claim's text as it appears in the summary line
    text: str
    claim_type: str  # a ClaimType
    certainty: str  # "certain" | "hedged"
    verdict: str  # a Verdict
    #: indexes of the messages it rests on (``scope`` says into which list)
    evidence: tuple[int, ...] = ()
    scope: str = "segment"
    #: a key of :data:`REASONS`
    reason: str = ""
    #: a short quote from the evidence ("FAILED test_x (2 failed)")
    note: str = ""

    def to_dict(self) -> dict[str, Any]:
        return {
            "line": self.line,
            "text": self.text,
            "claim_type": self.claim_type,
            "certainty": self.certainty,
            "verdict": self.verdict,
            "evidence": list(self.evidence),
            "scope": self.scope,
            "reason": self.reason,
            "detail": REASONS.get(self.reason, self.reason),
            "note": self.note,
        }


@dataclass(frozen=True)
class Assessment:
    """Every claim of a summary with its verdict, and the findings the policy drew from them."""

    claims: tuple[ClaimVerdict, ...]
    findings: tuple[DriftFinding, ...]
    judge: str = "rules"

    def to_dict(self) -> dict[str, Any]:
        return {
            "claims": [c.to_dict() for c in self.claims],
            "findings": [f.to_dict() for f in self.findings],
            "judge": self.judge,
        }
