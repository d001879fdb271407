"""Drift review pages (placeholder until they are written)."""

from __future__ import annotations

from django.http import HttpRequest, HttpResponse


def _todo(request: HttpRequest, pk: int = 0) -> HttpResponse:
    raise NotImplementedError


open_case = queue = export = case_detail = update_case = comment = _todo
