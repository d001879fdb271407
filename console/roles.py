"""Roles are Django groups; this is the one place that says what each may do."""

from __future__ import annotations

from typing import Any

from django.contrib.auth import get_user_model
from django.db.models import QuerySet

#: the permissions pages and API check, by what they allow (codenames in ``console.models``' Meta)
VIEW = "console.view_session"
ADD = "console.add_session"
CHANGE = "console.change_session"
COMPRESS = "console.compress_session"
RESUMMARIZE = "console.resummarize_archive"
PROMOTE = "console.promote_summary"
REVIEW = "console.review_drift"
OPEN_CASE = "console.open_drift_case"
AUDIT = "console.view_auditevent"
REVEAL = "console.reveal_secrets"
MANAGE_WEBHOOKS = "console.manage_webhooks"
#: creating and revoking API keys in the console (Django's own permission of the ApiKey model)
MANAGE_API_KEYS = "console.add_apikey"

VIEWER = "viewer"
OPERATOR = "operator"
REVIEWER = "reviewer"
ADMIN = "admin"

ROLE_PERMISSIONS: dict[str, list[str]] = {
    VIEWER: [VIEW],
    OPERATOR: [VIEW, ADD, CHANGE, COMPRESS, RESUMMARIZE, PROMOTE, OPEN_CASE],
    REVIEWER: [VIEW, REVIEW, OPEN_CASE],
}
#: everything the other roles may do, plus reading the audit log, revealing masked secrets, configuring webhooks
#: and managing API keys
ROLE_PERMISSIONS[ADMIN] = sorted(
    {p for perms in ROLE_PERMISSIONS.values() for p in perms} | {AUDIT, REVEAL, MANAGE_WEBHOOKS, MANAGE_API_KEYS}
)


def reviewers() -> QuerySet[Any]:
    """Active users who may review drift cases: the one definition, for the assignee list and the check.

    Asked of Django's ModelBackend (``with_perm``), the same rules ``user.has_perm(REVIEW)`` applies: by a
    group, by the user's own permission, or as a superuser; inactive users never. People only: the user an API
    key acts as (``api:<name>``) is an agent runtime, not someone a case can be handed to. (The drift page used
    to rebuild this as its own query, and the assign check used ``has_perm``: now both read this.)
    """
    users = get_user_model().objects.with_perm(
        REVIEW, is_active=True, include_superusers=True, backend="django.contrib.auth.backends.ModelBackend"
    )
    return users.filter(api_key__isnull=True).order_by("username")


def sync_role_groups(**kwargs: Any) -> None:
    """Create the role groups and give them exactly their permissions (runs after migrate)."""
    from django.contrib.auth.models import Group, Permission

    for role, perms in ROLE_PERMISSIONS.items():
        group, _ = Group.objects.get_or_create(name=role)
        wanted: list[Any] = []
        for perm in perms:
            app_label, codename = perm.split(".", 1)
            wanted.extend(Permission.objects.filter(content_type__app_label=app_label, codename=codename))
        group.permissions.set(wanted)
