"""What the views share about htmx: the typed request, whether to answer with a fragment, which partial
or page region to render, and the client events pages listen to."""

from __future__ import annotations

from collections.abc import Mapping

from django.http import HttpRequest
from django_htmx.middleware import HtmxDetails

#: htmx events pages listen to, to refresh what a promote or a re-summarize changed
SUMMARY_PROMOTED = "summaryPromoted"
SUMMARY_CHANGED = "summaryChanged"
#: the case page listens to it, to refresh its review panel
CASE_CHANGED = "caseChanged"


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


def region(request: HtmxHttpRequest, regions: Mapping[str, str], default: str = "") -> str:
    """The partial an htmx request for one region of a page gets (by its ``HX-Target``); "" for the whole page.

    A fragment request for a target not in ``regions`` gets ``default``.
    """
    return regions.get(request.htmx.target or "", default) if fragment(request) else ""
