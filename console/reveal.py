"""Who may see secrets unmasked, decided once per request.

A reader holding ``console.reveal_secrets`` may ask for raw content with ``?reveal=1`` (pages and API
alike): :func:`reveal_for` checks the permission, audits the reveal and records the decision in a
context variable for the rest of the request (``console.masking.revealing``, kept next to the masking
so the models and queries that mask need not import this module). Everything that masks
(``console.masking.for_page``, the template hook, the API renderer, exports) asks ``revealing()``
instead of taking a ``reveal`` flag, so no function between the view and the text can forget to pass it on.

:class:`RevealScopeMiddleware` starts every request masked and restores the value afterwards: a WSGI
thread serves many requests, and a context variable set by one would otherwise leak into the next.
Outside a request (workers, commands) nothing is revealed unless code asks with :func:`revealed`.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from django.core.exceptions import PermissionDenied
from django.http import HttpRequest, HttpResponse

from .audit import audit
from .masking import _revealing, revealed, revealing
from .roles import REVEAL as REVEAL_PERMISSION

__all__ = ["REVEAL_PERMISSION", "may_reveal", "reveal_for", "reveal_this_response", "revealed", "revealing"]


def may_reveal(user: Any) -> bool:
    """Whether ``user`` may ask for secrets unmasked (whether to offer the reveal link)."""
    return bool(user and user.has_perm(REVEAL_PERMISSION))


def reveal_for(request: HttpRequest, obj: Any) -> bool:
    """The one decision: does this request show secrets unmasked? Only ``?reveal=1`` with the permission
    (else :class:`PermissionDenied`), audited against ``obj``; a yes holds for the rest of the request."""
    if request.GET.get("reveal") != "1":
        return revealing()
    if not may_reveal(getattr(request, "user", None)):
        raise PermissionDenied(f"revealing secrets needs the {REVEAL_PERMISSION} permission")
    if not revealing():
        audit(request.user, "secrets.reveal", obj, after={"path": request.get_full_path()})
        _revealing.set(True)
    return True


def reveal_this_response() -> None:
    """This response must hold a secret the caller asked for (a webhook's new signing secret)."""
    _revealing.set(True)


class RevealScopeMiddleware:
    """Each request starts masked; whatever it decided is undone when its response is ready."""

    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        token = _revealing.set(False)
        try:
            return self.get_response(request)
        finally:
            _revealing.reset(token)
