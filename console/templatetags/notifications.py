"""``{% inbox_badge %}``: the header's inbox link with the signed-in user's unread count (one indexed count)."""

from __future__ import annotations

from typing import Any

from django import template

from .. import queries

register = template.Library()


@register.inclusion_tag("notifications/_badge.html", takes_context=True)
def inbox_badge(context: Any) -> dict[str, Any]:
    request = context.get("request")
    user = getattr(request, "user", None)
    current = getattr(getattr(request, "resolver_match", None), "url_name", "") == "inbox"
    return {"unread": queries.unread_count(user), "current": current}
