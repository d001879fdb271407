"""The quality dashboard (placeholder until it is written)."""

from __future__ import annotations

from django.http import HttpRequest, HttpResponse


def dashboard(request: HttpRequest) -> HttpResponse:
    raise NotImplementedError
