"""Login for pages; the API authenticates itself and answers 401 in JSON instead of redirecting."""

from __future__ import annotations

from typing import Any

from django.contrib.auth.middleware import LoginRequiredMiddleware
from django.http import HttpRequest, HttpResponseBase, JsonResponse

API_PREFIX = "/api/"


class PagesLoginRequiredMiddleware(LoginRequiredMiddleware):
    def process_view(
        self, request: HttpRequest, view_func: Any, view_args: Any, view_kwargs: Any
    ) -> HttpResponseBase | None:
        if request.path_info.startswith(API_PREFIX):
            return None
        return super().process_view(request, view_func, view_args, view_kwargs)


class ApiJsonErrorsMiddleware:
    """Under /api/, errors Django answers itself (no such endpoint, wrong method) are JSON too."""

    def __init__(self, get_response: Any) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponseBase:
        response = self.get_response(request)
        if (
            request.path_info.startswith(API_PREFIX)
            and response.status_code >= 400
            and not response.get("Content-Type", "").startswith("application/json")
        ):
            if response.status_code == 404:
                detail = f"no API endpoint {request.method} {request.path}; the endpoints are listed at /api/v1/docs"
            elif response.status_code == 405:
                detail = f"{request.method} is not allowed on {request.path}; allowed: {response.get('Allow', '-')}"
            else:
                detail = f"{response.status_code} {response.reason_phrase}"
            return JsonResponse(
                {"detail": detail},
                status=response.status_code,
                headers={"Allow": response.get("Allow")} if response.get("Allow") else None,
            )
        return response
