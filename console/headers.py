"""Headers every dynamic response carries: Permissions-Policy, and no caching of what shows session content.

(Content-Security-Policy comes from django-csp, HSTS and the rest from Django's SecurityMiddleware.)
"""

from __future__ import annotations

from typing import Any

from django.conf import settings
from django.http import HttpRequest, HttpResponseBase
from django.utils.cache import add_never_cache_headers


class SecurityHeadersMiddleware:
    def __init__(self, get_response: Any) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponseBase:
        response = self.get_response(request)
        response.setdefault("Permissions-Policy", settings.PERMISSIONS_POLICY)
        # API answers and pages hold session content (messages, summaries, keys): no browser or proxy keeps
        # them. Static files never get here (WhiteNoise answers them first, cacheable).
        if "Cache-Control" not in response:
            add_never_cache_headers(response)
        return response
