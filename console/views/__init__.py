"""Pages. One module per area; each view parses input, checks permission, calls one service, renders.

Conventions (see ../STYLE of django-htmx): one view serves the full page and, for an htmx request,
its fragment (``template + "#partial"``, with ``Vary: HX-Request``); links carry ``href`` and
``hx-get`` so pages work without JavaScript; permissions are checked here, never only in templates.
"""

from __future__ import annotations

from typing import Any

from django.core.exceptions import PermissionDenied
from django.http import HttpRequest

from ..display import may_reveal
from ..services import audit

VIEW = "console.view_session"
COMPRESS = "console.compress_session"
RESUMMARIZE = "console.resummarize_archive"
PROMOTE = "console.promote_summary"


def partial(request: HttpRequest, template: str, name: str) -> str:
    """The template to render: the whole page, or only partial ``name`` for an htmx request."""
    htmx = getattr(request, "htmx", None)
    # htmx restoring history after a cache miss sends HX-Request too, but needs the whole page
    return f"{template}#{name}" if htmx and not htmx.history_restore_request else template


def reveal_requested(request: HttpRequest, obj: Any) -> bool:
    """Whether this request shows secrets unmasked (``?reveal=1``): only with the permission, and audited."""
    if request.GET.get("reveal") != "1":
        return False
    if not may_reveal(request.user):
        raise PermissionDenied("revealing secrets needs the console.reveal_secrets permission")
    audit(request.user, "secrets.reveal", obj, after={"path": request.get_full_path()})
    return True
