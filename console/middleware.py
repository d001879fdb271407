"""Login for pages; the API authenticates itself and answers 401 in JSON instead of redirecting."""

from __future__ import annotations

from typing import Any

from django.contrib.auth.middleware import LoginRequiredMiddleware
from django.http import HttpRequest, HttpResponseBase

API_PREFIX = "/api/"


class PagesLoginRequiredMiddleware(LoginRequiredMiddleware):
    def process_view(
        self, request: HttpRequest, view_func: Any, view_args: Any, view_kwargs: Any
    ) -> HttpResponseBase | None:
        if request.path_info.startswith(API_PREFIX):
            return None
        return super().process_view(request, view_func, view_args, view_kwargs)
