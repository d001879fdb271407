"""The audit log, filtered as on its page."""

from typing import Any

from django.http import HttpRequest
from ninja import Query, Router
from ninja.pagination import paginate

from ...models import AuditEvent
from ...queries import AuditQuery
from ...roles import AUDIT
from .. import schemas
from ..common import Pages, require

audit_router = Router(tags=["audit log"])


@audit_router.get(
    "",
    response=list[schemas.AuditEventOut],
    summary="The audit log, newest first (as on the page: actor, action prefix, object type[:id], since, until)",
)
@paginate(Pages)
def list_audit_events(request: HttpRequest, filters: Query[schemas.AuditQueryIn]) -> Any:
    require(request, AUDIT, "read the audit log")
    query = AuditQuery(
        actor=filters.actor.strip(),
        action=filters.action.strip(),
        obj=filters.object.strip(),
        since=filters.since,
        until=filters.until,
    )
    return query.apply(AuditEvent.objects.all())
