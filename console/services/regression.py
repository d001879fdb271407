"""The drift regression set: confirmed and resolved drift cases, exported with their originals, and replayed.

``export_cases`` turns each case into a JSON record (the archived originals and the history around them, the
bad summary, the findings, the corrected summary when there is one); ``manage.py export_drift_cases`` writes
them as JSONL. Secrets in every string of a record are masked unless the caller asks to reveal them.

``replay_cases`` re-summarizes each record's originals with the current pipeline and summarizer and checks the
new summary for drift as the console does (against the originals, and against constraints said in the history
around them); ``manage.py replay_drift_cases`` prints the outcome and fails when a case still drifts.
A case still drifts when the new summary has a finding at or above ``DRIFT_CASE_MIN_SEVERITY``: what would
open a drift case today, whatever its kind (a case's kinds are reported, not required to match, because a
summarizer that fixes one drift by making another has not fixed the case).
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from typing import Any

from django.db.models import QuerySet

from agent_compression import CompressionConfig, Compressor, check_drift

from ..errors import ArchiveCorrupted
from ..masking import mask_value, placeholder_key
from ..models import Archive, DriftCase, Message, Summary
from .drift import serious
from .summarizer_factory import build_summarizer

log = logging.getLogger(__name__)

STILL_DRIFTS = "still drifts"
FIXED = "fixed"
FAILED = "failed"


# --------------------------------------------------------------------------- export


def exportable_cases() -> QuerySet[DriftCase]:
    """The cases the regression set holds: confirmed or resolved, oldest first."""
    return (
        DriftCase.objects.filter(status__in=[DriftCase.Status.CONFIRMED, DriftCase.Status.RESOLVED])
        .select_related("session", "summary__archive__run", "fixed_by")
        .order_by("id")
    )


def _summary(summary: Summary) -> dict[str, Any]:
    return {"summary_id": summary.summary_id, "text": summary.text, "provenance": summary.provenance}


def corrected_summary(case: DriftCase) -> Summary | None:
    """What fixed the case: the promoted summary that resolved it, else the archive's active summary when it is
    another version whose drift check ran and found nothing serious, else None."""
    if case.fixed_by is not None:
        return case.fixed_by
    active = case.summary.archive.summaries.filter(status=Summary.Status.ACTIVE).exclude(pk=case.summary_id).first()
    if active is None or active.drift_checked_at is None or serious(active.drift_findings or []):
        return None
    return active


def context_messages(archive: Archive) -> list[dict[str, Any]]:
    """What stayed verbatim around the archive: its run's input history before ``start`` and from ``end``."""
    keys = archive.run.input_keys or []
    try:
        return Message.load(keys[: archive.start] + keys[archive.end :])
    except LookupError as exc:
        raise ArchiveCorrupted(f"the history around archive {archive.pk} is incomplete: {exc}") from None


def export_case(case: DriftCase, *, reveal: bool = False) -> dict[str, Any]:
    """One case as a JSON-ready record (``ArchiveCorrupted`` when its originals no longer match)."""
    archive = case.summary.archive
    corrected = corrected_summary(case)
    record = {
        "case": case.pk,
        "session": case.session.key,
        "status": case.status,
        "severity": case.severity,
        "kinds": case.kind_list,
        "verdict": case.verdict,
        # sha256 is of the stored originals: a masked export no longer hashes to it
        "archive": {"id": archive.pk, "start": archive.start, "end": archive.end, "sha256": archive.sha256},
        "original_segment": archive.verified_messages(),
        # the drift check the case came from also held the summary to constraints said around the segment
        "context_messages": context_messages(archive),
        "bad_summary": _summary(case.summary),
        "findings": case.findings,
        "corrected_summary": _summary(corrected) if corrected else None,
    }
    return record if reveal else mask_value(record)


def export_cases(
    cases: Iterable[DriftCase], *, reveal: bool = False, on_skip: Callable[[DriftCase, str], None] | None = None
) -> Iterator[dict[str, Any]]:
    """A record per case. A case whose archive is corrupted is skipped (never exported with altered
    originals): ``on_skip(case, reason)`` is told, or a warning is logged."""
    for case in cases:
        try:
            yield export_case(case, reveal=reveal)
        except ArchiveCorrupted as exc:
            if on_skip is None:
                log.warning("drift case %s skipped: %s", case.pk, exc)
            else:
                on_skip(case, str(exc))


# --------------------------------------------------------------------------- replay


class MalformedRecord(ValueError):
    """A line of a regression set that is not a record; ``line`` is 1-based."""

    def __init__(self, line: int, problem: str) -> None:
        super().__init__(f"line {line}: {problem}")
        self.line = line


def _check_record(record: Any) -> str:
    """What is wrong with ``record`` ("" when it can be replayed)."""
    if not isinstance(record, dict):
        return f"expected a JSON object, got {type(record).__name__}"
    if not isinstance(record.get("case"), int):
        return 'no "case" id'
    segment = record.get("original_segment")
    if not isinstance(segment, list) or not segment or not all(isinstance(m, dict) for m in segment):
        return '"original_segment" must be a non-empty list of messages'
    archive = record.get("archive")
    if not isinstance(archive, dict) or not isinstance(archive.get("start"), int):
        return '"archive" must be an object with a whole-number "start"'
    context = record.get("context_messages", [])
    if not isinstance(context, list) or not all(isinstance(m, dict) for m in context):
        return '"context_messages" must be a list of messages'
    if not isinstance(record.get("kinds", []), list):
        return '"kinds" must be a list'
    return ""


def read_records(lines: Iterable[str]) -> list[dict[str, Any]]:
    """The records of a JSONL regression set; blank lines are skipped, anything else malformed raises."""
    records = []
    for number, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        try:
            record = json.loads(line)
        except ValueError as exc:
            raise MalformedRecord(number, f"not JSON ({exc})") from None
        problem = _check_record(record)
        if problem:
            raise MalformedRecord(number, problem)
        records.append(record)
    return records


@dataclass
class ReplayResult:
    case: int
    outcome: str  # STILL_DRIFTS, FIXED or FAILED
    #: the new summary's findings at or above the threshold (what makes it still drift)
    findings: list[dict[str, Any]] = field(default_factory=list)
    #: the case's own kinds among them
    same_kinds: list[str] = field(default_factory=list)
    error: str = ""
    text: str = ""

    def line(self) -> str:
        """One line for the command's report."""
        if self.outcome == FAILED:
            return f"case {self.case}: {FAILED}: {self.error}"
        if self.outcome == FIXED:
            return f"case {self.case}: {FIXED}"
        kinds = ", ".join(f"{f['kind']} ({f['severity']})" for f in self.findings)
        same = f"; again: {', '.join(self.same_kinds)}" if self.same_kinds else "; none of the case's kinds"
        return f"case {self.case}: {STILL_DRIFTS}: {kinds}{same}"


def replay_record(compressor: Compressor, record: dict[str, Any]) -> ReplayResult:
    """Re-summarize one record's originals and check the new summary against them."""
    segment = record["original_segment"]
    try:
        outcome, _ = compressor.resummarize(segment, start_index=record["archive"]["start"], focus_topic=None)
    except Exception as exc:  # the pipeline promises not to raise; one broken case must not stop the others
        return ReplayResult(record["case"], FAILED, error=f"{type(exc).__name__}: {exc}")
    if not outcome.ok:
        return ReplayResult(record["case"], FAILED, error=outcome.error or "the summarizer failed")
    text = outcome.text or ""
    context = record.get("context_messages") or None
    found = serious([f.to_dict() for f in check_drift(segment, text, context_messages=context)])
    if not found:
        return ReplayResult(record["case"], FIXED, text=text)
    kinds = set(record.get("kinds") or ())
    same = list(dict.fromkeys(f["kind"] for f in found if f["kind"] in kinds))
    return ReplayResult(record["case"], STILL_DRIFTS, findings=found, same_kinds=same, text=text)


def replay_cases(
    records: Iterable[dict[str, Any]],
    summarizer_name: str | None = None,
    model: str | None = None,
    prompt_version: str | None = None,
) -> list[ReplayResult]:
    """Replay every record with the summarizer configured like a re-summarize (defaults from settings) and the
    pipeline's default config. An unknown summarizer or prompt version raises ``InvalidInput`` first."""
    config = CompressionConfig(secret_mask_key=placeholder_key())
    compressor = Compressor(config, build_summarizer(summarizer_name, model, prompt_version))
    return [replay_record(compressor, record) for record in records]
