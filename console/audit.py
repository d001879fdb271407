"""The audit log: who changed what (``audit``), who the actor is (``person``), and an object's history."""

from __future__ import annotations

from typing import Any

from .models import AuditEvent, DriftCase


def person(user: Any) -> Any:
    """The logged-in user, or None for the system (a worker, the trigger) and anonymous callers."""
    return user if getattr(user, "is_authenticated", False) else None


def actor_label(user: Any) -> str:
    return user.get_username() if person(user) else "system"


def audit(user: Any, action: str, obj: Any, before: Any = None, after: Any = None, label: str = "") -> AuditEvent:
    """Record a state change. ``user`` None means the system (a worker, the trigger)."""
    return AuditEvent.objects.create(
        actor=person(user),
        actor_label=label or actor_label(user),
        action=action,
        object_type=type(obj)._meta.model_name,
        object_id=str(obj.pk),
        before=before,
        after=after,
    )


def history(case: DriftCase) -> list[AuditEvent]:
    """Every recorded change of a drift case, oldest first."""
    return list(
        AuditEvent.objects.filter(object_type="driftcase", object_id=str(case.pk))
        .select_related("actor")
        .order_by("created_at", "id")
    )
