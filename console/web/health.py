from __future__ import annotations

from django.contrib.auth.decorators import login_not_required
from django.http import HttpRequest, JsonResponse
from django.views.decorators.cache import never_cache
from django.views.decorators.http import require_GET

from ..health import broker_ok, cache_ok, database_ok


@login_not_required
@never_cache
@require_GET
def healthz(request: HttpRequest) -> JsonResponse:
    db, db_detail = database_ok()
    broker, broker_detail = broker_ok()
    cache, cache_detail = cache_ok()  # reported, never a failure: rate limits fall back to local memory
    status = 200 if db and broker else 503
    return JsonResponse(
        {
            "status": "ok" if status == 200 else "unavailable",
            "database": {"ok": db, "detail": db_detail},
            "broker": {"ok": broker, "detail": broker_detail},
            "cache": {"ok": cache, "detail": cache_detail},
        },
        status=status,
    )
