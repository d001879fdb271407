"""Drift review: checks after every summary, cases opened by them or by hand, and the team's review of a case.

A case moves open -> confirmed | dismissed -> resolved (and can be reopened); confirming or dismissing needs a
verdict saying why. Promoting a summary whose drift check came back clean resolves the confirmed cases of the
versions it replaces. Every change writes an audit event; the case page reads its history from them.
"""

from __future__ import annotations

import re
from typing import Any

from django.conf import settings
from django.contrib.auth import get_user_model
from django.db import transaction
from django.db.models import F
from django.utils import timezone

from agent_compression.drift import assess_summary
from agent_compression.types import DRIFT_KINDS

from ..audit import audit
from ..errors import Conflict, InvalidInput, NotFound, ServiceError
from ..models import DriftCase, DriftComment, Message, PairwiseReview, Summary
from ..roles import reviewers
from . import notifications, queue

SEVERITY_RANK = {"low": 0, "medium": 1, "high": 2}
#: kinds an operator may pick when opening a case by hand (the detector's, plus anything else)
MANUAL_KINDS = (*DRIFT_KINDS, "other")
#: ``@name`` in a comment; a trailing dot or comma is punctuation, not part of the name
MENTION = re.compile(r"(?<![\w@])@([\w.@+-]*[\w+-])")


def serious(findings: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The findings at or above ``DRIFT_CASE_MIN_SEVERITY``: those that open a case by themselves."""
    threshold = SEVERITY_RANK[settings.DRIFT_CASE_MIN_SEVERITY]
    return [f for f in findings if SEVERITY_RANK.get(f.get("severity", ""), 0) >= threshold]


def worst(findings: list[dict[str, Any]]) -> str:
    return max((f.get("severity", "low") for f in findings), key=lambda s: SEVERITY_RANK.get(s, 0), default="low")


def _name(user: Any) -> str | None:
    return user.get_username() if user is not None else None


# --------------------------------------------------------------------------- detection


def check_summary_drift(summary_id: int, *, once: bool = False) -> list[dict[str, Any]]:
    """Compare a summary with its archived originals; open a case for findings at or over the threshold.

    ``once`` (the task): a summary already checked is left alone, so a second delivery (the recovery sweep
    re-sends lost ones) does nothing.
    """
    summary = Summary.objects.select_related("archive__run").get(pk=summary_id)
    if not summary.text:
        return []
    if once and summary.drift_checked_at is not None:
        return summary.drift_findings
    if once and summary.drift_attempts >= settings.DRIFT_CHECK_MAX_ATTEMPTS:
        return []  # failed: only an operator's retry (retry_drift_check) sends it again
    # counted before the check, so a check that kills its worker counts too
    Summary.objects.filter(pk=summary.pk).update(drift_attempts=F("drift_attempts") + 1, updated_at=timezone.now())
    try:
        findings, assessment = _assess(summary)
    except Exception as exc:
        error = f"{type(exc).__name__}: {exc}"[:_ERROR_CHARS]
        Summary.objects.filter(pk=summary.pk).update(drift_error=error, updated_at=timezone.now())
        raise
    with transaction.atomic():
        checked = Summary.objects.select_for_update().filter(pk=summary.pk).values_list("drift_checked_at", flat=True)
        if once and checked.first() is not None:  # a concurrent delivery finished first
            return Summary.objects.get(pk=summary.pk).drift_findings
        summary.drift_findings, summary.drift_assessment = findings, assessment
        summary.drift_checked_at, summary.drift_error = timezone.now(), ""
        summary.save(
            update_fields=["drift_findings", "drift_assessment", "drift_checked_at", "drift_error", "updated_at"]
        )
        opening = serious(findings)
        if opening and not summary.drift_cases.filter(opened_by=None).exists():
            case = DriftCase.objects.create(
                summary=summary, session_id=summary.archive.session_id, findings=opening, severity=worst(opening)
            )
            audit(None, "drift_case.open", case, after={"summary": summary.summary_id, "findings": len(opening)})
            notifications.drift_case_opened(case)
        elif summary.status == Summary.Status.ACTIVE:
            resolve_fixed_cases(summary, None)  # promoted before its check finished
    return findings


#: the most of an exception's text kept as a failed check's reason
_ERROR_CHARS = 500


def _history_index(archive: Any, index: Any, scope: str) -> int | None:
    """An index the detector gave (into the archived segment, or into the run's whole input) as a history index."""
    if not isinstance(index, int):
        return None
    return index + archive.start if scope == "segment" else index


def _assess(summary: Summary) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    """The drift check itself: findings (with ``message_index``) and the claim-by-claim assessment."""
    archive = summary.archive
    # the history the run compressed: constraints in its head and tail stayed verbatim, but a summary
    # must not contradict them either (indexes into it are the history's own)
    context = Message.load(archive.run.input_keys) if archive.run and archive.run.input_keys else None
    assessment = assess_summary(archive.verified_messages(), summary.text, context_messages=context)
    findings = []
    for finding in assessment.findings:
        data = finding.to_dict()
        data["message_index"] = _history_index(archive, finding.source_index, finding.scope)
        findings.append(data)
    stored = assessment.to_dict()
    for claim in stored.get("claims", []):
        scope = claim.get("scope", "segment")
        claim["messages"] = [
            i for i in (_history_index(archive, e, scope) for e in claim.get("evidence", ())) if i is not None
        ]
    return findings, stored


def drift_check_failed(summary: Summary) -> bool:
    """The check gave up: every allowed attempt raised or lost its worker, and none finished."""
    return summary.drift_checked_at is None and summary.drift_attempts >= settings.DRIFT_CHECK_MAX_ATTEMPTS


def retry_drift_check(summary_id: int, user: Any) -> Summary:
    """Send a summary's drift check again with fresh attempts: a failed one, or one still waiting for a worker."""
    with transaction.atomic():
        summary = Summary.objects.select_for_update().filter(pk=summary_id).first()
        if summary is None:
            raise NotFound(f"no summary {summary_id}")
        if not summary.text:
            raise InvalidInput(f"summary {summary.summary_id} has no text to check")
        if summary.drift_checked_at is not None:
            raise Conflict(f"summary {summary.summary_id} was checked already; its findings stand")
        before = {"attempts": summary.drift_attempts, "error": summary.drift_error or None}
        Summary.objects.filter(pk=summary.pk).update(
            drift_attempts=0, drift_error="", sends=0, sent_at=None, updated_at=timezone.now()
        )
        audit(user, "summary.drift_retry", summary, before=before, after={"attempts": 0})
        queue.send_on_commit(queue.CHECK_DRIFT, summary.pk)
    summary.refresh_from_db()
    return summary


def open_case(summary_id: int, *, quote: str, kind: str, severity: str, note: str, user: Any) -> DriftCase:
    """A case opened by hand about a passage of a summary (``quote``, as selected on the page)."""
    quote, note = quote.strip(), note.strip()
    if kind not in MANUAL_KINDS:
        raise InvalidInput(f"unknown kind {kind!r}; one of: {', '.join(MANUAL_KINDS)}")
    if severity not in SEVERITY_RANK:
        raise InvalidInput(f"unknown severity {severity!r}; one of: low, medium, high")
    if not quote:
        raise InvalidInput("select (or paste) the passage of the summary the case is about")
    with transaction.atomic():
        summary = Summary.objects.filter(pk=summary_id).first()
        if summary is None:
            raise NotFound(f"no summary {summary_id}")
        if _plain(quote) not in _plain(summary.text):
            raise InvalidInput(f"the quoted passage is not in summary {summary.summary_id}; quote it as it is shown")
        finding = {
            "kind": kind,
            "severity": severity,
            "evidence": {"original": "", "summary": quote},
            "source_index": None,
            "message_index": None,
            "detail": note,
            "scope": "segment",
            "manual": True,
        }
        case = DriftCase.objects.create(
            summary=summary,
            session_id=summary.archive.session_id,
            findings=[finding],
            severity=severity,
            opened_by=user,
        )
        audit(user, "drift_case.open", case, after={"summary": summary.summary_id, "kind": kind, "quote": quote})
        notifications.drift_case_opened(case, user)
    return case


def _plain(text: str) -> str:
    """Text as a reader sees it: no Markdown markers, whitespace collapsed (a selection loses both)."""
    text = re.sub(r"[*_`#>|]+|^\s*(?:[-+]|\d+[.)])\s+", " ", text, flags=re.M)
    return " ".join(text.split())


# --------------------------------------------------------------------------- review


def _state(case: DriftCase) -> dict[str, Any]:
    return {"status": case.status, "assignee": _name(case.assignee), "verdict": case.verdict}


def _reviewer(name: str) -> Any:
    if not get_user_model().objects.filter(username=name, is_active=True).exists():
        raise InvalidInput(f"no active user {name!r} to assign")
    if get_user_model().objects.filter(username=name, api_key__isnull=False).exists():
        raise InvalidInput(f"{name} is an API key, not a person: cases are assigned to people")
    user = reviewers().filter(username=name).first()
    if user is None:
        raise InvalidInput(f"{name} cannot review drift cases (needs the reviewer role)")
    return user


def update_drift_case(case_id: int, changes: dict[str, Any], user: Any) -> DriftCase:
    """Change a case's status, assignee or verdict, claim it, or add a comment; every change is audited.

    ``changes``: ``status``, ``verdict``, ``assignee`` (a username; None or "" unassigns), ``claim`` (true: assign to
    ``user``, refused while someone else holds the case), ``comment`` with an optional ``quote``.
    """
    with transaction.atomic():
        case = DriftCase.objects.select_for_update().filter(pk=case_id).first()
        if case is None:
            raise NotFound(f"no drift case {case_id}")
        before = _state(case)
        if changes.get("claim"):
            if case.assignee_id not in (None, user.pk):
                raise Conflict(f"{case.assignee} holds this case; ask them, or assign it to yourself explicitly")
            case.assignee = user
        name = changes.get("assignee")
        if "assignee" in changes and name != _name(case.assignee):  # None or "" unassigns
            case.assignee = _reviewer(name) if name else None
        if changes.get("verdict") is not None:
            case.verdict = changes["verdict"].strip()
        new = changes.get("status")
        if new and new != case.status:
            if new not in DriftCase.Status.values:
                raise InvalidInput(f"unknown status {new!r}; one of: {', '.join(DriftCase.Status.values)}")
            if new not in DriftCase.TRANSITIONS[case.status]:
                allowed = ", ".join(sorted(DriftCase.TRANSITIONS[case.status]))
                raise Conflict(f"a {case.status} case cannot become {new}; it can become: {allowed}")
            case.status = new
            if new == DriftCase.Status.OPEN:  # a fresh review: the old verdict stays in the history
                case.verdict, case.fixed_by = "", None
        if case.status in (DriftCase.Status.CONFIRMED, DriftCase.Status.DISMISSED) and not case.verdict:
            raise InvalidInput(f"a {case.status} case needs a verdict saying why")
        case.save()
        after = _state(case)
        if after != before:
            audit(user, "drift_case.update", case, before=before, after=after)
        if after["assignee"] != before["assignee"]:
            notifications.assigned(case, user)
        if changes.get("comment"):
            add_comment(case, changes["comment"], changes.get("quote") or "", user)
    return case


@transaction.atomic  # the comment, its mentions and its audit event, or none of them
def add_comment(case: DriftCase, body: str, quote: str, user: Any) -> DriftComment:
    """A comment, anchored to a quoted passage when given; ``@name`` mentions active teammates."""
    body = body.strip()
    if not body:
        raise InvalidInput("a comment needs some text")
    mentioned = mentioned_people(body)
    comment = DriftComment.objects.create(case=case, author=user, body=body, quote=quote.strip())
    comment.mentions.set(mentioned)
    notifications.mentioned(comment, mentioned)
    audit(user, "drift_case.comment", case, after={"comment": comment.pk, "mentions": sorted(map(_name, mentioned))})
    return comment


def mentioned_people(body: str) -> list[Any]:
    """The active people ``@name`` in ``body`` names; an unknown name is refused (nothing is written), since a
    mention that reaches no one is a question nobody will answer."""
    names = set(MENTION.findall(body))
    if not names:
        return []
    people = get_user_model().objects.filter(username__in=names, is_active=True, api_key__isnull=True)
    found = list(people.order_by("username"))
    unknown = sorted(names - {u.get_username() for u in found})
    if unknown:
        listed = ", ".join(f"@{n}" for n in unknown)
        raise InvalidInput(f"no teammate called {listed}: mention someone by their username, or remove the @")
    return found


def resolve_fixed_cases(summary: Summary, user: Any) -> list[DriftCase]:
    """Resolve the confirmed cases of ``summary``'s archive once a clean version of it is live.

    Clean: checked, with nothing at or over the case threshold. Runs when a summary is promoted, and when the
    drift check of an already active summary finishes.
    """
    if summary.drift_checked_at is None or serious(summary.drift_findings or []):
        return []
    cases = list(
        DriftCase.objects.select_for_update()
        .filter(summary__archive_id=summary.archive_id, status=DriftCase.Status.CONFIRMED)
        .exclude(summary=summary)
    )
    for case in cases:
        case.status, case.fixed_by = DriftCase.Status.RESOLVED, summary
        case.save(update_fields=["status", "fixed_by", "updated_at"])
        audit(
            user,
            "drift_case.resolve",
            case,
            before={"status": DriftCase.Status.CONFIRMED},
            after={"status": case.status, "fixed_by": summary.summary_id},
        )
    return cases


# --------------------------------------------------------------------------- bulk review and pairwise verdicts

BULK_ACTIONS = ("claim", "assign", "dismiss")
#: the most cases one bulk change touches (a queue page holds 50)
BULK_MAX = 200


def bulk_update(
    case_ids: list[int], action: str, user: Any, *, assignee: str = "", verdict: str = ""
) -> list[DriftCase]:
    """Claim, assign or dismiss several cases at once: all of them or none (one transaction).

    Each case goes through ``update_drift_case``, so each one changed writes its own audit event (and an
    assignment notifies its new holder once); a case already in the wanted state is left alone. A case
    that cannot change (held by someone else, a status it cannot leave) refuses the whole batch, by number.
    """
    ids = sorted(set(case_ids))
    if not ids:
        raise InvalidInput("select at least one case")
    if len(ids) > BULK_MAX:
        raise InvalidInput(f"at most {BULK_MAX} cases at once; {len(ids)} were selected")
    verdict = verdict.strip()
    if action == "claim":
        changes: dict[str, Any] = {"claim": True}
    elif action == "assign":
        changes = {"assignee": assignee.strip() or None}
    elif action == "dismiss":
        if not verdict:
            raise InvalidInput("dismissing needs a verdict saying why")
        changes = {"status": DriftCase.Status.DISMISSED, "verdict": verdict}
    else:
        raise InvalidInput(f"unknown action {action!r}; one of: {', '.join(BULK_ACTIONS)}")
    with transaction.atomic():
        cases = {
            c.pk: c
            for c in DriftCase.objects.select_for_update(of=("self",)).filter(pk__in=ids).select_related("assignee")
        }
        missing = [pk for pk in ids if pk not in cases]
        if missing:
            raise NotFound(f"no drift case {', '.join(f'#{pk}' for pk in missing)}")
        changed = []
        for pk in ids:
            case = cases[pk]
            if action == "claim" and case.assignee_id == user.pk:
                continue
            if action == "assign" and _name(case.assignee) == changes["assignee"]:
                continue
            if action == "dismiss" and case.status == DriftCase.Status.DISMISSED:
                continue
            try:
                changed.append(update_drift_case(pk, changes, user))
            except ServiceError as exc:
                raise type(exc)(f"case #{pk}: {exc}") from exc
    return changed


def next_open_case(case: DriftCase, candidates: Any) -> DriftCase | None:
    """The open case after ``case`` in ``candidates`` (a queue's filter, newest first), wrapping to the top."""
    others = candidates.filter(status=DriftCase.Status.OPEN).exclude(pk=case.pk).order_by("-created_at", "-id")
    after = others.filter(created_at__lt=case.created_at) | others.filter(created_at=case.created_at, pk__lt=case.pk)
    return after.order_by("-created_at", "-id").first() or others.first()


def review_pair(a_id: int, b_id: int, verdict: str, note: str, user: Any) -> PairwiseReview:
    """Record a verdict on two summary versions of the same archive (audited on the archive)."""
    note = note.strip()
    if verdict not in PairwiseReview.Verdict.values:
        raise InvalidInput(f"unknown verdict {verdict!r}; one of: {', '.join(PairwiseReview.Verdict.values)}")
    if a_id == b_id:
        raise InvalidInput("pick two different versions to compare")
    with transaction.atomic():
        found = {s.pk: s for s in Summary.objects.filter(pk__in=[a_id, b_id]).select_related("archive")}
        if a_id not in found or b_id not in found:
            raise NotFound(f"no summary {a_id if a_id not in found else b_id}")
        a, b = found[a_id], found[b_id]
        if a.archive_id != b.archive_id:
            raise InvalidInput(f"{a.summary_id} and {b.summary_id} summarize different archives")
        if verdict == PairwiseReview.Verdict.BOTH_WRONG and not note:
            raise InvalidInput("say what both versions get wrong")
        review = PairwiseReview.objects.create(archive=a.archive, a=a, b=b, verdict=verdict, note=note, reviewer=user)
        audit(
            user,
            "summary.pairwise_review",
            a.archive,
            after={"a": a.summary_id, "b": b.summary_id, "verdict": verdict, "note": note, "review": review.pk},
        )
    return review
