"""Drift cases: the queue (the page's filter), open one by hand, read, review, comment."""

from typing import Any

from django.contrib.auth import get_user_model
from django.http import HttpRequest
from django.shortcuts import get_object_or_404
from ninja import Query, Router, Status
from ninja.errors import HttpError
from ninja.pagination import paginate

from ...models import DriftCase
from ...queries import CaseQuery
from ...roles import OPEN_CASE, REVIEW, VIEW
from ...services import drift
from ..common import ERRORS, Pages, require
from ..schemas import (
    CasesQuery,
    DriftBulkIn,
    DriftCaseDetailOut,
    DriftCaseIn,
    DriftCaseOut,
    DriftCasePatch,
    DriftCommentIn,
    DriftCommentOut,
)

cases = Router(tags=["drift cases"])


@cases.get("", response=list[DriftCaseOut], summary="Drift cases (filter by status, severity, kind, ...)")
@paginate(Pages)
def list_cases(request: HttpRequest, filters: Query[CasesQuery]) -> Any:
    require(request, VIEW, "read drift cases")
    name = filters.assignee.strip()
    if name not in ("", "me", "none") and not get_user_model().objects.filter(username=name).exists():
        raise HttpError(422, f'assignee: no user {name!r}; a username, "me" or "none"')
    query = CaseQuery(
        status=filters.status,
        severity=filters.severity,
        kind=filters.kind,
        session=filters.session,
        assignee=name,
        mentions=filters.mentions,
    )
    cases = DriftCase.objects.select_related("session", "assignee", "opened_by")
    return query.apply(cases, request.user)


@cases.post("", response={201: DriftCaseDetailOut, **ERRORS}, summary="Open a case by hand about a passage")
def open_case(request: HttpRequest, payload: DriftCaseIn) -> Status:
    require(request, OPEN_CASE, "open drift cases")
    case = drift.open_case(payload.summary, **payload.dict(exclude={"summary"}), user=request.user)
    return Status(201, _case(case.pk))


@cases.post(
    "/bulk",
    response={200: list[DriftCaseOut], **ERRORS},
    summary="Claim, assign or dismiss several cases at once (all or none; returns the cases changed)",
)
def bulk(request: HttpRequest, payload: DriftBulkIn) -> list[DriftCase]:
    require(request, REVIEW, "review drift cases")
    changed = drift.bulk_update(
        payload.cases, payload.action, request.user, assignee=payload.assignee, verdict=payload.verdict
    )
    return list(
        DriftCase.objects.select_related("session", "assignee", "opened_by").filter(pk__in=[c.pk for c in changed])
    )


def _case(case_id: int) -> DriftCase:
    return get_object_or_404(DriftCase.objects.select_related("session", "assignee", "opened_by"), pk=case_id)


@cases.get("/{int:case_id}", response={200: DriftCaseDetailOut, **ERRORS}, summary="A drift case")
def get_case(request: HttpRequest, case_id: int) -> DriftCase:
    require(request, VIEW, "read drift cases")
    return _case(case_id)


@cases.patch(
    "/{int:case_id}",
    response={200: DriftCaseDetailOut, **ERRORS},
    summary="Claim, change status, assignee or verdict; add a comment (@username mentions)",
)
def patch_case(request: HttpRequest, case_id: int, payload: DriftCasePatch) -> DriftCase:
    require(request, REVIEW, "review drift cases")
    drift.update_drift_case(case_id, payload.dict(exclude_unset=True), request.user)
    return _case(case_id)


@cases.post("/{int:case_id}/comments", response={201: DriftCommentOut, **ERRORS}, summary="Comment on a case")
def comment_case(request: HttpRequest, case_id: int, payload: DriftCommentIn) -> Status:
    require(request, REVIEW, "comment on drift cases")
    comment = drift.add_comment(_case(case_id), payload.body, payload.quote, request.user)
    return Status(201, comment)
