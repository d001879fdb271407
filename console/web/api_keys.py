"""API keys in the console (admins): create one with a role (the key is shown once), revoke one, see when each
was last used. Both changes go through ``console.apikeys`` (audited), as ``manage.py create_api_key`` does."""

from __future__ import annotations

from typing import Any

from django.contrib import messages
from django.contrib.auth.decorators import permission_required
from django.http import HttpRequest, HttpResponse
from django.shortcuts import render
from django.urls import reverse
from django.utils.translation import gettext as _
from django.views.decorators.cache import never_cache
from django.views.decorators.http import require_http_methods

from ..apikeys import create_api_key, revoke_api_key
from ..errors import ServiceError
from ..models import ApiKey
from ..roles import MANAGE_API_KEYS
from . import see_other
from .forms import ApiKeyForm

#: the session key under which a new key waits for the page that shows it (once)
NEW_KEY = "api-key-once"


def key_rows() -> list[ApiKey]:
    """Every key, active ones first, with its role (one query for the keys, one for their groups)."""
    keys = ApiKey.objects.select_related("user").prefetch_related("user__groups")
    rows = sorted(keys, key=lambda k: (k.revoked_at is not None, k.name.lower()))
    roles = dict(ApiKeyForm.base_fields["role"].choices)  # type: ignore[attr-defined]
    for key in rows:
        role = next((g.name for g in key.user.groups.all()), "")
        key.role_label = roles.get(role, role)  # type: ignore[attr-defined]
    return rows


@never_cache
@require_http_methods(["GET", "POST"])
@permission_required(MANAGE_API_KEYS, raise_exception=True)
def api_keys(request: HttpRequest) -> HttpResponse:
    form = ApiKeyForm(request.POST if request.POST.get("action") == "create" else None)
    status = 200
    if request.method == "POST":
        action = request.POST.get("action")
        if action == "create" and form.is_valid():
            try:
                key, secret = create_api_key(form.cleaned_data["name"], form.cleaned_data["role"], user=request.user)
            except ServiceError as exc:
                form.add_error(None, str(exc))
            else:
                request.session[NEW_KEY] = {"name": key.name, "key": secret}
                messages.success(request, _("API key %(name)s created.") % {"name": key.name})
                return see_other(reverse("api_keys"))
        elif action == "revoke":
            try:
                key, changed = revoke_api_key(request.POST.get("name", ""), user=request.user)
            except ServiceError as exc:
                messages.error(request, str(exc))
            else:
                said = _("API key %(name)s revoked.") if changed else _("API key %(name)s was already revoked.")
                messages.success(request, said % {"name": key.name})
            return see_other(reverse("api_keys"))
        status = 422
    ctx: dict[str, Any] = {"form": form, "keys": key_rows(), "new_key": request.session.pop(NEW_KEY, None)}
    return render(request, "console/api_keys.html", ctx, status=status)
