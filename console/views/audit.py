"""The audit log page (placeholder until it is written)."""

from __future__ import annotations

from django.http import HttpRequest, HttpResponse


def audit_log(request: HttpRequest) -> HttpResponse:
    raise NotImplementedError
