"""Text in the URL and in posted forms that the database cannot hold is refused before any view runs.

PostgreSQL refuses NUL characters in text; a ``%00`` in a search box, a filter, a path or a form field would
otherwise surface as a 500 from whichever query first used it. JSON bodies are checked by the API's parser.
"""

from __future__ import annotations

from typing import Any

from django.http import HttpRequest, HttpResponseBadRequest, HttpResponseBase, JsonResponse

from .middleware import API_PREFIX

FORM_TYPES = ("application/x-www-form-urlencoded", "multipart/form-data")


def _problem(request: HttpRequest) -> str | None:
    if "\x00" in request.path_info:
        return "the URL path contains a NUL character (%00), which cannot be stored; remove it"
    forms = [("query parameter", request.GET)]
    # the API reads JSON only and refuses a form with a 415 on its header (``console.api.json_bodies_only``):
    # parsing a multipart body here would consume the stream the API may still need to see
    if request.method == "POST" and request.content_type in FORM_TYPES and not request.path_info.startswith(API_PREFIX):
        forms.append(("form field", request.POST))
    for kind, data in forms:
        for name, values in data.lists():
            if "\x00" in name or any("\x00" in value for value in values if isinstance(value, str)):
                shown = name.replace("\x00", "\\u0000")
                return f"{kind} {shown!r}: contains a NUL character (\\u0000), which cannot be stored; remove it"
    return None


class RefuseUnstorableInputMiddleware:
    """A 422 (JSON, under /api/) or 400 (pages) naming the parameter, before the view sees it."""

    def __init__(self, get_response: Any) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponseBase:
        problem = _problem(request)
        if problem is None:
            return self.get_response(request)
        if request.path_info.startswith(API_PREFIX):
            return JsonResponse({"detail": problem}, status=422)
        return HttpResponseBadRequest(problem, content_type="text/plain; charset=utf-8")
