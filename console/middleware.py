"""Login for pages; the API authenticates itself and answers 401 in JSON instead of redirecting."""

from __future__ import annotations

import logging
import sys
from typing import Any

from django.conf import settings
from django.contrib.auth.middleware import LoginRequiredMiddleware
from django.core.signals import got_request_exception
from django.db import InterfaceError, OperationalError
from django.dispatch import receiver
from django.http import HttpRequest, HttpResponse, HttpResponseBase, JsonResponse

API_PREFIX = "/api/"
#: what a database outage raises (refused or dropped connections, a server shutting down, a lock timeout)
DATABASE_DOWN = (OperationalError, InterfaceError)

log = logging.getLogger(__name__)


def database_unavailable(request: HttpRequest) -> HttpResponse:
    """503 with Retry-After: the database cannot be reached; nothing was (or could be) written."""
    retry = str(settings.DATABASE_RETRY_AFTER_SECONDS)
    detail = "the database is unavailable; nothing was changed. Retry in a few seconds."
    if request.path_info.startswith(API_PREFIX):
        return JsonResponse({"detail": detail}, status=503, headers={"Retry-After": retry})
    page = (
        "<!doctype html><meta charset=utf-8><title>Service unavailable</title>"
        f"<h1>Service unavailable</h1><p>{detail}</p>"
    )
    return HttpResponse(page, status=503, headers={"Retry-After": retry})


@receiver(got_request_exception)
def _note_database_down(sender: Any, request: HttpRequest | None = None, **kwargs: Any) -> None:
    # Django turns an exception anywhere in the stack (a view, another middleware loading the session or
    # the user) into a 500 before outer middleware sees it; this marks the request for DatabaseUnavailable.
    if request is not None and isinstance(sys.exc_info()[1], DATABASE_DOWN):
        request._database_down = True  # type: ignore[attr-defined]


class DatabaseUnavailableMiddleware:
    """A database outage answers 503 with Retry-After (pages and API), not 500. Listed first."""

    def __init__(self, get_response: Any) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponseBase:
        response = self.get_response(request)
        if getattr(request, "_database_down", False) and response.status_code >= 500:
            log.warning("database unavailable during %s %s: answered 503", request.method, request.path)
            return database_unavailable(request)
        return response


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
