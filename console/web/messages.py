"""One stored message in full: what "show the rest" loads in every view."""

from __future__ import annotations

from django.contrib.auth.decorators import permission_required
from django.http import HttpRequest, HttpResponse
from django.shortcuts import get_object_or_404, render
from django.views.decorators.http import require_GET
from django.views.decorators.vary import vary_on_headers

from ..display import message_view
from ..models import Message
from ..reveal import reveal_for
from . import VIEW
from .htmx import partial


@require_GET
@permission_required(VIEW, raise_exception=True)
@vary_on_headers("HX-Request")
def message_detail(request: HttpRequest, sha256: str) -> HttpResponse:
    message = get_object_or_404(Message, sha256=sha256)
    reveal = reveal_for(request, message)
    view = message_view(message.sha256, message.data, limit=None, tokens=message.tokens)
    return render(
        request,
        partial(request, "console/message.html", "body"),
        {"m": view, "anchor": request.GET.get("anchor", "message"), "reveal": reveal},
    )
