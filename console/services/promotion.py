"""What a reviewer must see before a summary goes live: its open drift findings.

A finding is *open* when the summary's drift check raised it (or a case opened by hand carries it) and the team
has not dismissed it: a dismissed case says "this is not drift"; a resolved one only says another version fixed it,
so promoting the drifted version again brings the drift back and still counts. Promoting a summary with an open
finding of high severity needs an explicit acknowledgement, which is audited.
"""

from __future__ import annotations

from typing import Any

from ..errors import Conflict
from ..models import DriftCase, Summary

#: the severity that makes promoting ask for an acknowledgement
BLOCKING_SEVERITY = "high"


def finding_key(finding: dict[str, Any]) -> tuple[str, str]:
    """Two versions raise "the same" finding when it is of one kind about one quote (the original's, else theirs)."""
    evidence = finding.get("evidence") or {}
    return str(finding.get("kind") or ""), str(evidence.get("original") or evidence.get("summary") or "")


def open_findings(summary: Summary) -> list[dict[str, Any]]:
    """The summary's findings nobody dismissed, each with ``case`` (the id of a live case holding it, or None)."""
    cases = list(summary.drift_cases.order_by("created_at", "id"))
    dismissed = {finding_key(f) for c in cases if c.status == DriftCase.Status.DISMISSED for f in c.findings}
    live = [c for c in cases if c.status != DriftCase.Status.DISMISSED]
    case_of: dict[tuple[str, str], int] = {}
    for case in live:
        for f in case.findings:
            case_of.setdefault(finding_key(f), case.pk)
    found: dict[tuple[str, str], dict[str, Any]] = {}
    for f in list(summary.drift_findings or []) + [f for c in live for f in c.findings]:
        key = finding_key(f)
        if key in dismissed or key in found:
            continue
        found[key] = dict(f) | {"case": case_of.get(key)}
    return list(found.values())


def blocking(findings: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [f for f in findings if f.get("severity") == BLOCKING_SEVERITY]


def describe(finding: dict[str, Any]) -> str:
    """One finding in a line, for an error or an audit entry: ``high constraint_dropped (case #3): "quote"``."""
    evidence = finding.get("evidence") or {}
    quote = str(evidence.get("original") or evidence.get("summary") or "")[:120]
    case = f" (case #{finding['case']})" if finding.get("case") else ""
    return f"{finding.get('severity', '?')} {finding.get('kind', '?')}{case}: {quote!r}"


class DriftNotAcknowledged(Conflict):
    """Promoting a summary with open high-severity drift findings without saying so."""

    def __init__(self, summary: Summary, findings: list[dict[str, Any]]) -> None:
        named = "; ".join(describe(f) for f in findings)
        super().__init__(
            f"summary {summary.pk} has {len(findings)} open high-severity drift finding(s): {named}. "
            "Nothing was changed; review them, or promote with acknowledge_drift: true"
        )
        self.findings = findings

    @property
    def extra(self) -> dict[str, Any]:
        return {"findings": [acknowledged_row(f) for f in self.findings]}


def acknowledged_row(finding: dict[str, Any]) -> dict[str, Any]:
    """What an error body and the audit log keep of a finding: kind, severity, case and the quoted passages."""
    evidence = finding.get("evidence") or {}
    return {
        "kind": finding.get("kind"),
        "severity": finding.get("severity"),
        "case": finding.get("case"),
        "original": evidence.get("original"),
        "summary": evidence.get("summary"),
    }
