"""``{{ value|when }}``: the one way a page writes a date and time.

A ``<time>`` element whose ``datetime`` is the ISO 8601 instant, whose text is the language's short
timestamp (``SHORT_DATETIME_FORMAT``: ``2 Dec 2026, 14:05`` / ``2026年12月2日 14:05``) and whose title is
the full one with seconds and time zone (``DATETIME_FORMAT``), both in the current time zone and
language (console/formats/). ``{{ value|when:"date" }}`` writes the day only. Empty values give ``—``.
"""

from __future__ import annotations

from datetime import date, datetime
from typing import Any

from django import template
from django.utils import timezone
from django.utils.formats import date_format
from django.utils.html import format_html

register = template.Library()

FORMATS = {"": "SHORT_DATETIME_FORMAT", "date": "DATE_FORMAT"}


def local(value: datetime) -> datetime:
    return timezone.localtime(value) if timezone.is_aware(value) else value


@register.filter(is_safe=True)
def when(value: Any, style: str = "") -> str:
    if not isinstance(value, date):
        return "—"
    if style not in FORMATS:
        raise template.TemplateSyntaxError(f"when: unknown style {style!r} (use one of {sorted(FORMATS)})")
    shown = local(value) if isinstance(value, datetime) else value
    full = date_format(shown, "DATETIME_FORMAT" if isinstance(shown, datetime) else "DATE_FORMAT")
    return format_html(
        '<time datetime="{}" title="{}">{}</time>', shown.isoformat(), full, date_format(shown, FORMATS[style])
    )
