"""API: ``/api/v1/notifications`` (the caller's inbox) and ``/api/v1/webhooks`` (admin role: configure outgoing
webhooks, read their deliveries attempt by attempt). Masked like every response (``console.masking``)."""

from __future__ import annotations

from datetime import datetime
from typing import Any, Literal

from django.http import HttpRequest
from django.shortcuts import get_object_or_404
from ninja import Field, Router, Schema, Status
from ninja.errors import HttpError

from ...models import Notification, Webhook, WebhookAttempt, WebhookDelivery
from ...reveal import reveal_this_response
from ...services import notifications
from ..schemas import ErrorOut, RowId, StrictIn

router = Router(tags=["notifications"])
ERRORS: dict[int, type] = {code: ErrorOut for code in (400, 401, 403, 404, 409, 413, 415, 422, 429)}
Event = Literal["drift_case.opened", "run.degraded", "run.failed", "auto_compression.stopped"]
Format = Literal["generic", "slack"]


def require_admin(request: HttpRequest) -> None:
    if not request.user.has_perm(notifications.MANAGE_PERMISSION):
        raise HttpError(
            403, f"your role may not configure webhooks (needs the {notifications.MANAGE_PERMISSION} permission)"
        )


# --------------------------------------------------------------------------- schemas


class NotificationOut(Schema):
    id: int
    kind: str
    actor: str
    url: str
    data: dict[str, Any]
    created_at: datetime
    read_at: datetime | None

    @staticmethod
    def resolve_actor(obj: Notification) -> str:
        return obj.actor_label


class InboxOut(Schema):
    unread: int
    items: list[NotificationOut]


class MarkReadIn(StrictIn):
    ids: list[RowId] | None = Field(None, description="the notifications to mark read; leave out for all")


class WebhookIn(StrictIn):
    name: str = Field(..., min_length=1, max_length=100)
    url: str = Field(..., max_length=2000)
    format: Format = "generic"
    events: list[Event] = Field(..., min_length=1)
    active: bool = True


class WebhookPatch(StrictIn):
    name: str | None = Field(None, min_length=1, max_length=100)
    url: str | None = Field(None, max_length=2000)
    format: Format | None = None
    events: list[Event] | None = Field(None, min_length=1)
    active: bool | None = None
    rotate_secret: bool = Field(False, description="make a new signing secret (returned in this response only)")


class WebhookOut(Schema):
    id: int
    name: str
    url: str
    format: str
    events: list[str]
    active: bool
    created_at: datetime
    updated_at: datetime


class WebhookSecretOut(WebhookOut):
    secret: str = Field(..., description="the signing secret: shown in this response only")


class AttemptOut(Schema):
    number: int
    status_code: int | None
    error: str
    duration_ms: int
    started_at: datetime


class DeliveryOut(Schema):
    id: int
    delivery_id: str
    event: str
    status: str
    attempts: int
    next_attempt_at: datetime
    last_error: str
    created_at: datetime
    delivered_at: datetime | None
    body: str
    attempt_rows: list[AttemptOut]

    @staticmethod
    def resolve_attempt_rows(obj: WebhookDelivery) -> list[WebhookAttempt]:
        return list(obj.attempt_rows.order_by("number"))


# --------------------------------------------------------------------------- inbox


@router.get("/notifications", response={200: InboxOut, **ERRORS}, summary="Your inbox, newest first")
def inbox(request: HttpRequest, unread: bool = False, limit: int = 50) -> dict[str, Any]:
    if not 1 <= limit <= 200:
        raise HttpError(422, "limit must be between 1 and 200")
    rows = Notification.objects.filter(recipient_id=request.user.pk)
    count = rows.filter(read_at__isnull=True).count()
    if unread:
        rows = rows.filter(read_at__isnull=True)
    return {"unread": count, "items": list(rows.order_by("-created_at", "-id")[:limit])}


@router.post("/notifications/read", response={200: dict[str, int], **ERRORS}, summary="Mark notifications read")
def mark_read(request: HttpRequest, payload: MarkReadIn) -> dict[str, int]:
    return {"marked": notifications.mark_read(request.user, payload.ids)}


# --------------------------------------------------------------------------- webhooks


def _reveal_secret(request: HttpRequest) -> None:
    """This response holds the new signing secret, which the masking would hide: the admin asked for it."""
    reveal_this_response()


@router.get("/webhooks", response={200: list[WebhookOut], **ERRORS}, summary="Outgoing webhooks (admin)")
def list_webhooks(request: HttpRequest) -> list[Webhook]:
    require_admin(request)
    return list(Webhook.objects.order_by("name", "id"))


@router.post("/webhooks", response={201: WebhookSecretOut, **ERRORS}, summary="Add a webhook; its secret is returned")
def create_webhook(request: HttpRequest, payload: WebhookIn) -> Status:
    require_admin(request)
    webhook = notifications.create_webhook(**payload.dict(), user=request.user)
    _reveal_secret(request)
    return Status(201, webhook)


@router.get("/webhooks/{int:webhook_id}", response={200: WebhookOut, **ERRORS}, summary="A webhook (admin)")
def get_webhook(request: HttpRequest, webhook_id: int) -> Webhook:
    require_admin(request)
    return get_object_or_404(Webhook, pk=webhook_id)


@router.patch(
    "/webhooks/{int:webhook_id}",
    response={200: WebhookSecretOut | WebhookOut, **ERRORS},
    summary="Change a webhook, or rotate its secret",
)
def patch_webhook(request: HttpRequest, webhook_id: int, payload: WebhookPatch) -> Any:
    require_admin(request)
    webhook = notifications.update_webhook(webhook_id, payload.dict(exclude_unset=True), request.user)
    if payload.rotate_secret:
        _reveal_secret(request)
        return WebhookSecretOut.from_orm(webhook)
    return WebhookOut.from_orm(webhook)


@router.delete("/webhooks/{int:webhook_id}", response={204: None, **ERRORS}, summary="Remove a webhook")
def delete_webhook(request: HttpRequest, webhook_id: int) -> Status:
    require_admin(request)
    notifications.delete_webhook(webhook_id, request.user)
    return Status(204, None)


@router.get(
    "/webhooks/{int:webhook_id}/deliveries",
    response={200: list[DeliveryOut], **ERRORS},
    summary="A webhook's deliveries, newest first, with every attempt (admin)",
)
def list_deliveries(request: HttpRequest, webhook_id: int, status: str = "", limit: int = 50) -> list[WebhookDelivery]:
    require_admin(request)
    webhook = get_object_or_404(Webhook, pk=webhook_id)
    if status and status not in WebhookDelivery.Status.values:
        raise HttpError(422, f"unknown status {status!r}; one of: {', '.join(WebhookDelivery.Status.values)}")
    if not 1 <= limit <= 200:
        raise HttpError(422, "limit must be between 1 and 200")
    rows = webhook.deliveries.order_by("-created_at", "-id")
    if status:
        rows = rows.filter(status=status)
    return list(rows.prefetch_related("attempt_rows")[:limit])
