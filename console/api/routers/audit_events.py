"""The audit log, filtered as on its page."""

from typing import Any

from django.http import HttpRequest
from ninja import Query, Router
from ninja.errors import HttpError
from ninja.pagination import paginate

from ...models import AuditEvent
from ...queries import AuditQuery, object_type_of, object_types
from ...roles import AUDIT
from ..common import Pages, require
from ..schemas import AuditEventOut, AuditQueryIn

audit_router = Router(tags=["audit log"])


@audit_router.get(
    "",
    response=list[AuditEventOut],
    summary="The audit log, newest first (as on the page: actor, action prefix, object type[:id], since, until)",
)
@paginate(Pages)
def list_audit_events(request: HttpRequest, filters: Query[AuditQueryIn]) -> Any:
    require(request, AUDIT, "read the audit log")
    kind = filters.object.strip().partition(":")[0].strip()
    if kind and object_type_of(kind) not in object_types():
        raise HttpError(422, f"object: unknown type {kind!r}; one of: {', '.join(object_types())}")
    query = AuditQuery(
        actor=filters.actor.strip(),
        action=filters.action.strip(),
        obj=filters.object.strip(),
        since=filters.since,
        until=filters.until,
    )
    return query.apply(AuditEvent.objects.all())
