"""The masking core: what a secret looks like to a reader who may not see it.

Every way stored content leaves the console goes through this text core, each by its own module:

- **API**: ``console.api.rendering.MaskingRenderer`` masks every string (keys and values) of every
  JSON response.
- **Pages and fragments**: ``console.template_masking`` makes every template variable that resolves
  to a plain string masked and its invisible characters visible. Whatever a view forgets, a template
  cannot print a raw secret: it fails closed. Form widgets print their value as is, and the Django
  admin (raw rows, editable) is only open to staff who may reveal (``admin.py``).
- **Exports**: :func:`mask_value` over the whole document (``export_session``, the drift regression
  set), unless ``--reveal`` (audited).
- **Logs**: ``console.log_masking.MaskSecretsFilter`` on the log handlers.
- **Search**: ``Message.text`` (what content search reads) is stored masked, and a session key that
  holds a secret keeps a masked copy (``Session.masked_key``); readers without reveal search (and
  sort) only those, so a search cannot confirm a secret the page hides (:func:`key_search`).

Who may see secrets raw is decided once per request in ``console.reveal``; everything here asks
:func:`revealing`.

Secrets are masked by the library (``agent_compression.secrets``: by shape, and by the secret-named
key a value sits under), called from here only, so the placeholder key (derived from ``SECRET_KEY``)
is passed in one place.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from functools import cache, lru_cache
from typing import Any

from django.db.models import F, Q
from django.db.models.functions import Coalesce
from django.utils.crypto import salted_hmac

from agent_compression.secrets import mask_json, mask_secrets

# --------------------------------------------------------------------------- who sees raw text

#: whether this request (or this block of a command) shows secrets raw: set only by ``console.reveal``
_revealing: ContextVar[bool] = ContextVar("console_revealing", default=False)


def revealing() -> bool:
    """Whether what is being shown right now may show secrets unmasked (``console.reveal`` decides)."""
    return _revealing.get()


@contextmanager
def revealed(reveal: bool = True) -> Iterator[None]:
    """Reveal (or not) for the code inside: a command's audited ``--reveal``, a test."""
    token = _revealing.set(reveal)
    try:
        yield
    finally:
        _revealing.reset(token)


# --------------------------------------------------------------------------- text


def placeholder_key() -> bytes:
    """The key of this deployment's placeholders (derived from ``SECRET_KEY``): whatever masks for the
    console (this module, and the pipeline's ``CompressionConfig.secret_mask_key``) must use it, so that
    one secret gets one placeholder everywhere."""
    return salted_hmac("console.masking", "placeholders").digest()


@cache
def _key() -> bytes:
    return placeholder_key()


def mask_text(text: str) -> str:
    """``text`` with every secret the library knows replaced by its placeholder."""
    if not text:
        return text
    if len(text) <= 200:  # labels, keys, statuses: a page asks for the same ones again and again
        return _mask_short(text)
    return mask_secrets(text, key=_key())


@lru_cache(maxsize=8192)
def _mask_short(text: str) -> str:
    return mask_secrets(text, key=_key())


def mask_value(value: Any) -> Any:
    """A JSON-like value (API bodies, exports, metadata) with every string masked, dict keys included, and every
    value under a secret-named key (``password``, ``auth.token``...) masked whole (``agent_compression.secrets
    .mask_json``; the names are ``agent_compression.secret_names``)."""
    if isinstance(value, str):
        return mask_text(value)
    return mask_json(value, key=_key(), text=mask_text)


def value_for_reader(value: Any) -> Any:
    """``value`` as the current reader may see it: raw when revealing, else :func:`mask_value`."""
    return value if revealing() else mask_value(value)


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


def for_page(text: str) -> Shown:
    """``text`` as a page shows it: secrets masked unless this request reveals them
    (``console.reveal``), invisible characters made visible."""
    return Shown(show_invisible(text if revealing() else mask_text(text)))


def cut(text: str, end: int) -> str:
    """The first ``end`` characters of page text, still marked :class:`Shown` when it was."""
    part = text[:end]
    return Shown(part) if isinstance(text, Shown) else part


# --------------------------------------------------------------------------- search


def key_search(q: str, *, prefix: str = "", exact: bool = False) -> Q:
    """Sessions whose key contains ``q`` (``exact``: is ``q``) as this reader sees the key.

    Unless this request reveals, a key holding a secret is matched by its masked form only, so typing the start of
    a hidden secret finds nothing; ``prefix`` is the path to the session (``"session__"``).
    """
    lookup = "exact" if exact else "icontains"
    raw = Q(**{f"{prefix}key__{lookup}": q})
    if revealing():
        return raw
    return (Q(**{f"{prefix}masked_key__isnull": True}) & raw) | Q(**{f"{prefix}masked_key__{lookup}": q})


def key_order(prefix: str = "") -> Any:
    """What sorting sessions by key sorts on: the key as this reader sees it. Sorting on a raw key
    while showing its masked form would let a reader recover a hidden key one probe at a time."""
    if revealing():
        return F(f"{prefix}key")
    return Coalesce(F(f"{prefix}masked_key"), F(f"{prefix}key"))


def masked_key(key: str) -> str | None:
    """What ``Session.masked_key`` holds: the masked key when it differs from the key, else None."""
    masked = mask_text(key)
    return masked if masked != key else None
