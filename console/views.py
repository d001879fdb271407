from __future__ import annotations

from django.contrib.auth.decorators import login_not_required
from django.core.paginator import Paginator
from django.db.models import Q
from django.http import HttpRequest, HttpResponse, JsonResponse
from django.shortcuts import render
from django.views.decorators.cache import never_cache
from django.views.decorators.http import require_GET

from .health import broker_ok, database_ok
from .models import Session


@require_GET
def home(request: HttpRequest) -> HttpResponse:
    sessions = Session.objects.order_by("-updated_at")
    q = request.GET.get("q", "").strip()
    if q:
        sessions = sessions.filter(Q(key__icontains=q) | Q(channel__icontains=q))
    page = Paginator(sessions, 50).get_page(request.GET.get("page"))
    return render(request, "console/home.html", {"page": page, "q": q})


@login_not_required
@never_cache
@require_GET
def healthz(request: HttpRequest) -> JsonResponse:
    db, db_detail = database_ok()
    broker, broker_detail = broker_ok()
    status = 200 if db and broker else 503
    return JsonResponse(
        {
            "status": "ok" if status == 200 else "unavailable",
            "database": {"ok": db, "detail": db_detail},
            "broker": {"ok": broker, "detail": broker_detail},
        },
        status=status,
    )
