"""What every router uses: the permission check, the error responses, paging, finding a session by key."""

from __future__ import annotations

from typing import Any

from django.http import HttpRequest
from ninja.errors import HttpError
from ninja.pagination import PageNumberPagination

from ..errors import NotFound
from ..models import Session
from . import schemas


def require(request: HttpRequest, perm: str, doing: str) -> None:
    """Permissions are checked here, in the view, for keys and browser sessions alike."""
    if not request.user.has_perm(perm):
        raise HttpError(403, f"your role may not {doing} (needs the {perm} permission)")


ERRORS: dict[int, type] = {400: schemas.ErrorOut, 401: schemas.ErrorOut, 403: schemas.ErrorOut}
ERRORS |= {404: schemas.ErrorOut, 409: schemas.ErrorOut, 413: schemas.ErrorOut, 415: schemas.ErrorOut}
ERRORS |= {422: schemas.ErrorOut, 429: schemas.ErrorOut}


class Pages(PageNumberPagination):
    """50 a page; ``page`` and ``page_size`` bounded, so no offset overflows a database integer."""

    Input = schemas.PagesIn  # type: ignore[assignment]

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(page_size=50, max_page_size=100, **kwargs)


def session_named(key: str) -> Session:
    session = Session.objects.filter(key=key).first()
    if session is None:
        raise NotFound(f"no session {key!r}")
    return session
