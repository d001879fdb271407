"""Pages. One module per area; each view parses input, checks permission, calls one service, renders.

Conventions (see ../STYLE of django-htmx): one view serves the full page and, for an htmx request,
its fragment (``template + "#partial"``, with ``Vary: HX-Request``); links carry ``href`` and
``hx-get`` so pages work without JavaScript; permissions are checked here, never only in templates.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from django import forms
from django.core.exceptions import PermissionDenied
from django.http import HttpRequest, HttpResponse, HttpResponseRedirect
from django.utils.translation import gettext_lazy
from django_htmx.middleware import HtmxDetails

from ..audit import audit
from ..display import may_reveal
from ..models import Message
from ..roles import COMPRESS, OPEN_CASE, PROMOTE, RESUMMARIZE, REVIEW, VIEW  # noqa: F401  (the pages import them here)


class HtmxHttpRequest(HttpRequest):
    """A request as django-htmx's middleware leaves it, for type checking (``request.htmx``)."""

    htmx: HtmxDetails


def fragment(request: HttpRequest) -> bool:
    """Whether to answer with a fragment: an htmx request, but not htmx restoring history (that needs the page)."""
    htmx = getattr(request, "htmx", None)
    return htmx is not None and bool(htmx) and not htmx.history_restore_request


def partial(request: HttpRequest, template: str, name: str) -> str:
    """The template to render: the whole page, or only partial ``name`` for an htmx request."""
    return f"{template}#{name}" if fragment(request) else template


def reveal_requested(request: HttpRequest, obj: Any) -> bool:
    """Whether this request shows secrets unmasked (``?reveal=1``): only with the permission, and audited."""
    if request.GET.get("reveal") != "1":
        return False
    if not may_reveal(request.user):
        raise PermissionDenied("revealing secrets needs the console.reveal_secrets permission")
    audit(request.user, "secrets.reveal", obj, after={"path": request.get_full_path()})
    return True


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


def focus_topic_field(**options: Any) -> forms.CharField:
    """The optional focus topic a compression or a re-summarize passes to the summarizer."""
    return forms.CharField(
        label=gettext_lazy("Focus topic"),
        required=False,
        max_length=2000,
        help_text=gettext_lazy("What the summary should favour, e.g. the user's current request."),
        **options,
    )
