"""The one masking boundary: every way stored content leaves the console goes through here.

- **API**: :class:`MaskingRenderer` masks every string (keys and values) of every JSON response;
  ``console.api.api_reveal`` lets a reader holding ``console.reveal_secrets`` ask for raw content with
  ``?reveal=1`` (audited, 403 without the permission).
- **Pages and fragments**: :func:`install_template_masking` makes every template variable that
  resolves to a plain string masked (unless the page's context has ``reveal`` true, which only
  ``views.reveal_requested`` sets) and its invisible characters visible. Whatever a view forgets,
  a template cannot print a raw secret: it fails closed. Form widgets print their value as is, and
  the Django admin (raw rows, editable) is only open to staff who may reveal (``admin.py``).
- **Exports**: :func:`mask_value` over the whole document (``export_session``, the drift
  regression set), unless ``--reveal`` (audited).
- **Logs**: :class:`MaskSecretsFilter` on the log handlers masks the formatted message and traceback.
- **Search**: ``Message.text`` (what content search reads) is stored masked, and a session key that
  holds a secret keeps a masked copy (``Session.masked_key``); readers without reveal search only
  those, so a search cannot confirm a secret the page hides (:func:`key_search`).

Secrets are masked by the library (``agent_compression.secrets.mask_secrets``), called from
:func:`mask_text` only, so the placeholder key (derived from ``SECRET_KEY``) is passed in one place.
"""

from __future__ import annotations

import inspect
import logging
import re
from datetime import date, time, timedelta
from decimal import Decimal
from functools import cache, lru_cache
from typing import Any

from django.db.models import Q
from django.http import HttpRequest
from django.utils.crypto import salted_hmac
from django.utils.functional import Promise
from django.utils.safestring import SafeData
from ninja.renderers import JSONRenderer

from agent_compression.secrets import mask_secrets

from .roles import REVEAL as REVEAL_PERMISSION

# --------------------------------------------------------------------------- text


def placeholder_key() -> bytes:
    """The key of this deployment's placeholders (derived from ``SECRET_KEY``): whatever masks for the
    console (this module, and the pipeline's ``CompressionConfig.secret_mask_key``) must use it, so that
    one secret gets one placeholder everywhere."""
    return salted_hmac("console.masking", "placeholders").digest()


@cache
def _mask_kwargs() -> dict[str, Any]:
    """``key=`` for the library's keyed placeholders when it supports them."""
    if "key" not in inspect.signature(mask_secrets).parameters:
        return {}
    return {"key": placeholder_key()}


def mask_text(text: str) -> str:
    """``text`` with every secret the library knows replaced by its placeholder."""
    if not text:
        return text
    if len(text) <= 200:  # labels, keys, statuses: a page asks for the same ones again and again
        return _mask_short(text)
    return mask_secrets(text, **_mask_kwargs())


@lru_cache(maxsize=8192)
def _mask_short(text: str) -> str:
    return mask_secrets(text, **_mask_kwargs())


def mask_value(value: Any) -> Any:
    """A JSON-like value with every string masked, dict keys included (for API bodies and exports)."""
    if isinstance(value, str):
        return mask_text(value)
    if isinstance(value, dict):
        return {mask_value(k): mask_value(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [mask_value(v) for v in value]
    return value


def may_reveal(user: Any) -> bool:
    return bool(user and user.has_perm(REVEAL_PERMISSION))


# --------------------------------------------------------------------------- invisible characters

#: Invisible characters, as ranges: Cf (bidi embeddings, overrides and isolates, zero-width space and joiners,
#: word joiner, BOM, soft hyphen, tag characters...), Cc but tab and line ends, Zl/Zp (line and paragraph
#: separators), and the Hangul fillers, letters that draw nothing (a fake empty or look-alike name).
#: Written out because the stdlib re has no \p{Cf}; test_masking checks it against unicodedata.
INVISIBLE_CLASS = (
    "\x00-\x08\x0b-\x0c\x0e-\x1f\x7f-\x9f\xad\u0600-\u0605\u061c\u06dd\u070f\u0890-\u0891\u08e2"
    "\u115f-\u1160\u180e\u200b-\u200f\u2028-\u202e\u2060-\u2064\u2066-\u206f\u3164\ufeff\uffa0"
    "\ufff9-\ufffb\U000110bd\U000110cd\U00013430-\U00013438\U0001bca0-\U0001bca3\U0001d173-\U0001d17a"
    "\U000e0001\U000e0020-\U000e007f"
)
_INVISIBLE = re.compile(f"[{INVISIBLE_CLASS}]")


def show_invisible(text: str) -> str:
    """Invisible characters as a visible marker (``⟨U+202E⟩``): no reversed or look-alike text on a page."""
    if not text:
        return text
    # a fast pre-check in C: printable text (once layout is set aside) holds none of them
    if text.isprintable() or text.replace("\n", "").replace("\t", "").replace("\r", "").isprintable():
        return text
    if not _INVISIBLE.search(text):
        return text
    return _INVISIBLE.sub(lambda m: f"⟨U+{ord(m.group(0)):04X}⟩", text)


class Shown(str):
    """Text :func:`for_page` already made ready for a page: templates print it without masking it again
    (a history's worth of message text would otherwise be masked twice). Any operation on it (a slice,
    a join) gives a plain ``str`` again, which templates mask."""

    __slots__ = ()


def for_page(text: str, reveal: bool = False) -> Shown:
    """``text`` as a page shows it: secrets masked unless revealed, invisible characters made visible."""
    return Shown(show_invisible(text if reveal else mask_text(text)))


def cut(text: str, end: int) -> str:
    """The first ``end`` characters of page text, still marked :class:`Shown` when it was."""
    part = text[:end]
    return Shown(part) if isinstance(text, Shown) else part


# --------------------------------------------------------------------------- pages


#: values a template prints without their __str__ being masked: strings (masked when resolved), numbers
#: and dates (localized by Django), lazy translations, HTML code made safe, None
_PRINTED_AS_IS = (str, int, float, Decimal, date, time, timedelta, Promise, SafeData, type(None))


def install_template_masking() -> None:
    """Every template variable resolving to a plain string is shown through :func:`for_page`.

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
                reveal, widget = bool(context.get("reveal")), context.get("widget")
            except AttributeError:  # not a template Context
                reveal, widget = False, None
            if isinstance(widget, dict) and "template_name" in widget:
                # a form field's own value: what this user typed (the console's forms never prefill stored
                # content), or the admin's raw rows (which need reveal); masking it would save placeholders
                return value
            return for_page(value, reveal)
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
            try:
                reveal = bool(context.get("reveal"))
            except AttributeError:
                reveal = False
            value = for_page(text, reveal)
        return render_value(value, context)

    base.render_value_in_context = masked_render_value


# --------------------------------------------------------------------------- API


class MaskingRenderer(JSONRenderer):
    """Every API response, errors included, masked unless ``console.api.api_reveal`` granted a reveal."""

    def render(self, request: HttpRequest, data: Any, *, response_status: int) -> Any:
        if not getattr(request, "reveal_secrets", False):
            data = mask_value(data)
        return super().render(request, data, response_status=response_status)


# --------------------------------------------------------------------------- search


def reveals(request: HttpRequest) -> bool:
    """Whether this API request was granted a reveal (raw search and filters)."""
    return bool(getattr(request, "reveal_secrets", False))


def key_search(q: str, *, reveal: bool = False, prefix: str = "", exact: bool = False) -> Q:
    """Sessions whose key contains ``q`` (``exact``: is ``q``) as this reader sees the key.

    Without reveal a key holding a secret is matched by its masked form only, so typing the start of
    a hidden secret finds nothing; ``prefix`` is the path to the session (``"session__"``).
    """
    lookup = "exact" if exact else "icontains"
    raw = Q(**{f"{prefix}key__{lookup}": q})
    if reveal:
        return raw
    return (Q(**{f"{prefix}masked_key__isnull": True}) & raw) | Q(**{f"{prefix}masked_key__{lookup}": q})


def masked_key(key: str) -> str | None:
    """What ``Session.masked_key`` holds: the masked key when it differs from the key, else None."""
    masked = mask_text(key)
    return masked if masked != key else None


# --------------------------------------------------------------------------- logs


class MaskSecretsFilter(logging.Filter):
    """Masks the formatted message and the traceback of every record a handler emits."""

    def filter(self, record: logging.LogRecord) -> bool:
        try:
            message = record.getMessage()
        except Exception:  # noqa: BLE001 - a bad format string: let the handler report it as usual
            return True
        record.msg, record.args = mask_text(message), ()
        if record.exc_info and not record.exc_text:
            record.exc_text = logging.Formatter().formatException(record.exc_info)
        if record.exc_text:
            record.exc_text = mask_text(record.exc_text)
        if record.stack_info:
            record.stack_info = mask_text(record.stack_info)
        return True
