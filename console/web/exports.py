"""Downloads from the console: a session as ``manage.py export_session`` writes it.

The drift regression set (what ``manage.py export_drift_cases`` writes) is served by the drift queue
(``drift_export``). Both need only the view permission, and both are masked: a session's secrets come
out raw only with ``?reveal=1`` and the reveal permission, and that download is audited as the user's.
"""

from __future__ import annotations

import json

from django.contrib.auth.decorators import permission_required
from django.core.exceptions import PermissionDenied
from django.core.serializers.json import DjangoJSONEncoder
from django.http import HttpRequest, HttpResponse, HttpResponseBadRequest
from django.shortcuts import get_object_or_404
from django.views.decorators.http import require_GET

from ..masking import mask_text
from ..models import Session
from ..reveal import may_reveal
from ..services.exports import export_session
from . import VIEW

LABEL = "console download"


def filename(key: str) -> str:
    """A download name from a session key: ``wechat:wxid_demo01`` → ``session-wechat_wxid_demo01.json``.

    Built from the masked key, revealed or not: a file name outlives the download (browser history,
    proxy logs, the downloads folder), and a key may hold a secret."""
    safe = "".join(c if c.isascii() and (c.isalnum() or c in "-_.") else "_" for c in mask_text(key))[:120]
    return f"session-{safe or 'export'}.json"


@require_GET
@permission_required(VIEW, raise_exception=True)
def session_download(request: HttpRequest) -> HttpResponse:
    """The dashboard's export form: ``?session=<pk>[&reveal=1]``, answered as :func:`session_export`."""
    try:
        pk = int(request.GET.get("session", ""))
    except ValueError:
        return HttpResponseBadRequest("session must be a session's number", content_type="text/plain; charset=utf-8")
    return session_export(request, pk)


@require_GET
@permission_required(VIEW, raise_exception=True)
def session_export(request: HttpRequest, pk: int) -> HttpResponse:
    """The session's export (JSON, UTF-8, indented), as a download; masked unless revealed."""
    session = get_object_or_404(Session, pk=pk)
    reveal = request.GET.get("reveal", "")
    if reveal not in ("", "0", "1"):
        return HttpResponseBadRequest("reveal must be 1 or absent", content_type="text/plain; charset=utf-8")
    if reveal == "1" and not may_reveal(request.user):
        raise PermissionDenied("revealing secrets needs the console.reveal_secrets permission")
    data = export_session(session.key, reveal=reveal == "1", user=request.user, label=LABEL)
    text = json.dumps(data, cls=DjangoJSONEncoder, ensure_ascii=False, indent=2) + "\n"
    response = HttpResponse(text, content_type="application/json; charset=utf-8")
    response["Content-Disposition"] = f'attachment; filename="{filename(session.key)}"'
    return response
