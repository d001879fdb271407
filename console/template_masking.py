"""The template hook: every string a template prints is masked (``console.masking.for_page``).

Installed once by ``ConsoleConfig.ready``; whether this request may see secrets raw comes from
``console.reveal``, never from the template's context.
"""

from __future__ import annotations

from datetime import date, time, timedelta
from decimal import Decimal
from typing import Any

from django.utils.functional import Promise
from django.utils.safestring import SafeData

from .masking import for_page

#: values a template prints without their __str__ being masked: strings (masked when resolved), numbers
#: and dates (localized by Django), lazy translations, HTML code made safe, None
_PRINTED_AS_IS = (str, int, float, Decimal, date, time, timedelta, Promise, SafeData, type(None))


def install_template_masking() -> None:
    """Every template variable resolving to a plain string is shown through :func:`for_page` (masked
    unless this request reveals: ``console.reveal``).

    Django's template language has no output hook, so this wraps ``Variable.resolve``, the one place
    every ``{{ }}``, filter argument and ``{% blocktranslate with %}`` value comes from (before
    filters, so ``|linebreaksbr`` and friends escape masked text). Safe strings are HTML that code
    built (rendered Markdown, widgets) and is responsible for: ``display`` masks before it marks
    anything safe; :class:`Shown` text was masked by :func:`for_page` already. Idempotent.
    """
    from django.template import base

    if getattr(base.Variable.resolve, "masks_secrets", False):
        return
    resolve = base.Variable.resolve

    def masked_resolve(self: base.Variable, context: Any) -> Any:
        value = resolve(self, context)
        if type(value) is str and self.lookups is not None:
            try:
                widget = context.get("widget")
            except AttributeError:  # not a template Context
                widget = None
            if isinstance(widget, dict) and "template_name" in widget:
                # a form field's own value: what this user typed (the console's forms never prefill stored
                # content), or the admin's raw rows (which need reveal); masking it would save placeholders
                return value
            return for_page(value)
        return value

    masked_resolve.masks_secrets = True  # type: ignore[attr-defined]
    masked_resolve.unmasked = resolve  # type: ignore[attr-defined]  # for bench/sessions_list.py
    base.Variable.resolve = masked_resolve  # type: ignore[method-assign]

    render_value = base.render_value_in_context

    def masked_render_value(value: Any, context: Any) -> Any:
        # an object printed by its __str__ ({{ session }} prints its key, {{ message }} a flash text)
        if not isinstance(value, _PRINTED_AS_IS):
            text = str(value)
            if isinstance(text, SafeData):  # HTML code built (a form field): it is responsible
                return render_value(text, context)
            value = for_page(text)
        return render_value(value, context)

    base.render_value_in_context = masked_render_value
