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
