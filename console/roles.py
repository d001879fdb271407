"""Roles are Django groups; this is the one place that says what each may do."""

from __future__ import annotations

from typing import Any

VIEWER = "viewer"
OPERATOR = "operator"
REVIEWER = "reviewer"
ADMIN = "admin"

ROLE_PERMISSIONS: dict[str, list[str]] = {
    VIEWER: ["console.view_session"],
    OPERATOR: [
        "console.view_session",
        "console.add_session",
        "console.change_session",
        "console.compress_session",
        "console.resummarize_archive",
        "console.promote_summary",
        "console.open_drift_case",
    ],
    REVIEWER: ["console.view_session", "console.review_drift", "console.open_drift_case"],
}
#: everything the other roles may do, plus reading the audit log, revealing masked secrets and configuring webhooks
ROLE_PERMISSIONS[ADMIN] = sorted(
    {p for perms in ROLE_PERMISSIONS.values() for p in perms}
    | {"console.view_auditevent", "console.reveal_secrets", "console.manage_webhooks"}
)


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
