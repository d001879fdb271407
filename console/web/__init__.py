"""The pages, and what they share. One module per page area (sessions, runs, summaries, archives, messages,
drift, dashboard, audit_log, health); each view parses input, checks permission, calls one service, renders.
Shared: labels.py (the translated vocabulary), forms.py, presenters.py (rows the templates show), charts.py
(the dashboard's SVG geometry), htmx.py; this module holds the small request helpers.

Conventions (see ../STYLE of django-htmx): one view serves the full page and, for an htmx request,
its fragment (``template + "#partial"``, with ``Vary: HX-Request``); links carry ``href`` and
``hx-get`` so pages work without JavaScript; permissions are checked here, never only in templates.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from django.http import HttpRequest, HttpResponse, HttpResponseRedirect

from ..models import Message
from ..reveal import may_reveal, reveal_for
from ..roles import COMPRESS, OPEN_CASE, PROMOTE, RESUMMARIZE, REVIEW, VIEW  # noqa: F401  (the pages import them here)


def reveal_context(request: HttpRequest, obj: Any) -> dict[str, Any]:
    """``reveal`` (``console.reveal.reveal_for``: decided once, and from then on every masking function
    asks it) and ``may_reveal`` (whether to offer the reveal link), for the page's links."""
    return {"reveal": reveal_for(request, obj), "may_reveal": may_reveal(request.user)}


def int_or_none(value: str | None) -> int | None:
    """A whole-number query parameter, or None when it is missing or not a number."""
    try:
        return int(value) if value else None
    except ValueError:
        return None


def see_other(url: str) -> HttpResponse:
    """After a POST without JavaScript: go to ``url`` with a GET (303)."""
    return HttpResponseRedirect(url, status=303)


def load_messages(keys: Iterable[str]) -> dict[str, tuple[Any, int]]:
    """The stored messages with these keys, as ``{key: (data, tokens)}``: one query, whatever their number."""
    rows = Message.objects.filter(sha256__in=set(keys)).values_list("sha256", "data", "tokens")
    return {key: (data, tokens) for key, data, tokens in rows}


# END
