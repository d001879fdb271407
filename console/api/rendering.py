"""The API renderer: every JSON response masked (``console.masking``) unless this request reveals."""

from __future__ import annotations

from typing import Any

from django.http import HttpRequest
from ninja.renderers import JSONRenderer

from ..masking import value_for_reader


class MaskingRenderer(JSONRenderer):
    """Every API response, errors included, masked unless ``?reveal=1`` was granted (``console.reveal``)."""

    def render(self, request: HttpRequest, data: Any, *, response_status: int) -> Any:
        return super().render(request, value_for_reader(data), response_status=response_status)
