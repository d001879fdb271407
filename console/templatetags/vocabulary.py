"""``{{ m.role|role }}`` and ``{{ event.actor_label|actor }}``: codes the models store, in the page's language.

A built-in library (settings ``TEMPLATES``), like ``when``; the words live in ``console.web.labels``.
"""

from __future__ import annotations

from typing import Any

from django import template

from ..web import labels

register = template.Library()


@register.filter
def role(value: Any) -> Any:
    """A message role (system, user, assistant, tool) translated; an unknown role as it is."""
    return labels.label(labels.ROLES, value)


@register.filter
def actor(value: Any) -> Any:
    """An audit actor: ``system`` translated, a user name or an API key label as it is."""
    return labels.label(labels.ACTORS, value)


@register.filter
def severity(value: Any) -> Any:
    """A drift severity (high, medium, low) translated."""
    return labels.label(labels.SEVERITIES, value)


@register.filter
def finding_kinds(value: Any) -> str:
    """Drift finding kinds, a list or "a, b" as an inbox line stores them, translated and joined."""
    codes = value if isinstance(value, list | tuple) else [k.strip() for k in str(value or "").split(",")]
    return str(labels.LIST_SEPARATOR).join(str(labels.label(labels.FINDING_KINDS, k)) for k in codes if k and k != "-")
