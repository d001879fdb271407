"""API keys for agent runtimes: each key acts as its own user (``api:NAME``) in one role's group.

Only the key's sha256 and a lookup prefix are stored; the key itself is returned once, on creation.
"""

from __future__ import annotations

import hmac
import re
from datetime import timedelta
from typing import Any

from django.contrib.auth import get_user_model
from django.contrib.auth.models import Group
from django.db import transaction
from django.utils import timezone

from .audit import audit
from .errors import Conflict, InvalidInput, NotFound, ServiceError
from .models import ApiKey
from .roles import ROLE_PERMISSIONS

#: letters (any script), digits and . @ + - _
NAME = re.compile(r"^[\w.@+-]+$")
NAME_MAX = 100


def api_username(name: str) -> str:
    # the colon keeps key users apart from people (Django's user forms refuse it) and reads well in audit logs
    return f"api:{name}"


def authenticate_key(token: str) -> Any:
    """The active user a bearer key acts as, or None (unknown, revoked, or its user deactivated).

    The one check every way in uses (the API, the proxy, the MCP server). ``last_used_at`` is written at
    most once a minute, not per request.
    """
    lookup = token.removeprefix(ApiKey.PREFIX).split("_", 1)[0]
    key = ApiKey.objects.select_related("user").filter(lookup=lookup, revoked_at__isnull=True).first()
    if key is None or not hmac.compare_digest(ApiKey.digest(token), key.key_sha256) or not key.user.is_active:
        return None
    now = timezone.now()
    if key.last_used_at is None or now - key.last_used_at > timedelta(minutes=1):
        ApiKey.objects.filter(pk=key.pk).update(last_used_at=now)
    return key.user


@transaction.atomic
def create_api_key(name: str, role: str, user: Any = None, label: str = "") -> tuple[ApiKey, str]:
    """A new key called ``name`` with ``role``; returns the row and the key (the only time it exists)."""
    roles = ", ".join(ROLE_PERMISSIONS)
    name = (name or "").strip()
    if not name:
        raise InvalidInput("the key's name must not be empty")
    if len(name) > NAME_MAX:
        raise InvalidInput(f"the name {name!r} is too long (at most {NAME_MAX} characters)")
    if not NAME.match(name):
        raise InvalidInput(f"the name {name!r} may only hold letters, digits and . @ + - _")
    if role not in ROLE_PERMISSIONS:
        raise InvalidInput(f"unknown role {role!r}; valid roles: {roles}")
    group = Group.objects.filter(name=role).first()
    if group is None:
        raise ServiceError(f"the {role!r} group does not exist yet: run `manage.py migrate` first")
    username = api_username(name)
    User = get_user_model()
    if ApiKey.objects.filter(name=name).exists() or User.objects.filter(username=username).exists():
        raise Conflict(f"the name {name!r} is already used (by a key or by user {username}); choose another")
    key_user = User(username=username, is_active=True, is_staff=False, is_superuser=False)
    key_user.set_unusable_password()
    key_user.save()
    key_user.groups.add(group)
    key, lookup = ApiKey.new_key()
    api_key = ApiKey.objects.create(name=name, user=key_user, lookup=lookup, key_sha256=ApiKey.digest(key))
    audit(user, "api_key.create", api_key, after={"name": name, "role": role, "user": username}, label=label)
    return api_key, key


@transaction.atomic
def revoke_api_key(name: str, user: Any = None, label: str = "") -> tuple[ApiKey, bool]:
    """Revoke the key called ``name`` (its user is deactivated too); False when it already was."""
    api_key = ApiKey.objects.select_for_update().select_related("user").filter(name=name).first()
    if api_key is None:
        known = ", ".join(ApiKey.objects.order_by("name").values_list("name", flat=True)[:20]) or "none"
        raise NotFound(f"no API key called {name!r} (keys: {known})")
    if api_key.revoked_at is not None:
        return api_key, False
    api_key.revoked_at = timezone.now()
    api_key.save(update_fields=["revoked_at"])
    api_key.user.is_active = False
    api_key.user.save(update_fields=["is_active"])
    audit(user, "api_key.revoke", api_key, after={"revoked_at": api_key.revoked_at.isoformat()}, label=label)
    return api_key, True
