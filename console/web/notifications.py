"""The inbox (every user: mentions, assignments, events on their sessions) and the webhook settings (admin role)."""

from __future__ import annotations

from typing import Any
from urllib.parse import urlencode

from django import forms
from django.conf import settings
from django.contrib import messages
from django.contrib.auth.decorators import permission_required
from django.core.paginator import Paginator
from django.db.models import Count, Prefetch, Q
from django.http import HttpRequest, HttpResponse
from django.shortcuts import get_object_or_404, render
from django.urls import reverse
from django.utils.http import url_has_allowed_host_and_scheme
from django.utils.translation import gettext as _
from django.utils.translation import gettext_lazy
from django.views.decorators.http import require_GET, require_http_methods, require_POST

from ..errors import ServiceError
from ..masking import Shown
from ..models import Notification, Webhook, WebhookAttempt, WebhookDelivery
from ..queries import choice
from ..services import notifications
from . import int_or_none, see_other

PAGE_SIZE = 50
DELIVERIES_SHOWN = 50
MANAGE = notifications.MANAGE_PERMISSION
SHOW = ("unread", "all")


# --------------------------------------------------------------------------- inbox


@require_GET
def inbox(request: HttpRequest) -> HttpResponse:
    """The signed-in user's notifications, newest first; unread ones by default."""
    show = choice(request.GET, "show", SHOW, "unread")
    rows = Notification.objects.filter(recipient_id=request.user.pk)
    unread = rows.filter(read_at__isnull=True).count()
    if show == "unread":
        rows = rows.filter(read_at__isnull=True)
    page = Paginator(rows.order_by("-created_at", "-id"), PAGE_SIZE).get_page(int_or_none(request.GET.get("page")))
    context = {
        "page": page,
        "rows": page.object_list,
        "show": show,
        "unread": unread,
        "page_params": urlencode({"show": show}),
    }
    return render(request, "notifications/inbox.html", context)


@require_POST
def mark_all_read(request: HttpRequest) -> HttpResponse:
    count = notifications.mark_read(request.user)
    messages.success(request, _("%(count)d notifications marked read.") % {"count": count})
    return see_other(reverse("inbox"))


@require_POST
def open_notification(request: HttpRequest, pk: int) -> HttpResponse:
    """Mark one notification read and go to what it is about (only the recipient's own)."""
    row = get_object_or_404(Notification, pk=pk, recipient_id=request.user.pk)
    notifications.mark_read(request.user, [row.pk])
    target = row.url if url_has_allowed_host_and_scheme(row.url, allowed_hosts=None) else reverse("inbox")
    return see_other(target or reverse("inbox"))


# --------------------------------------------------------------------------- webhooks (admin)


class WebhookForm(forms.Form):
    name = forms.CharField(label=gettext_lazy("Name"), max_length=100)
    url = forms.URLField(
        label=gettext_lazy("URL"),
        max_length=2000,
        assume_scheme="https",
        help_text=gettext_lazy("Where the console POSTs each event (http or https)."),
    )
    format = forms.ChoiceField(label=gettext_lazy("Format"), choices=Webhook.Format.choices)
    events = forms.MultipleChoiceField(
        label=gettext_lazy("Events"),
        choices=list(notifications.EVENTS.items()),
        widget=forms.CheckboxSelectMultiple,
    )
    active = forms.BooleanField(label=gettext_lazy("Active"), required=False, initial=True)


def _webhook_rows() -> list[Any]:
    rows = list(
        Webhook.objects.annotate(
            delivered=Count("deliveries", filter=_status(WebhookDelivery.Status.DELIVERED)),
            failed=Count("deliveries", filter=_status(WebhookDelivery.Status.FAILED)),
            waiting=Count(
                "deliveries", filter=_status(WebhookDelivery.Status.PENDING) | _status(WebhookDelivery.Status.SENDING)
            ),
        ).order_by("name", "id")
    )
    for row in rows:
        row.event_labels = [notifications.EVENTS.get(e, e) for e in row.events]  # type: ignore[attr-defined]
    return rows


def _status(status: str) -> Q:
    return Q(deliveries__status=status)


def _secret_once(request: HttpRequest, webhook: Webhook) -> None:
    """The secret, shown on the next page only (the admin copies it into the receiver)."""
    request.session[f"webhook-secret-{webhook.pk}"] = webhook.secret


@require_http_methods(["GET", "POST"])
@permission_required(MANAGE, raise_exception=True)
def webhooks(request: HttpRequest) -> HttpResponse:
    """The webhooks, their delivery counts, and the form adding one."""
    form = WebhookForm(request.POST or None, initial={"events": list(notifications.EVENTS), "active": True})
    status = 200
    if request.method == "POST":
        if form.is_valid():
            try:
                webhook = notifications.create_webhook(**form.cleaned_data, user=request.user)
            except ServiceError as exc:
                form.add_error(None, str(exc))
            else:
                _secret_once(request, webhook)
                messages.success(request, _("Webhook added. Copy its signing secret now: it is shown once."))
                return see_other(reverse("webhook", args=[webhook.pk]))
        status = 422
    context = {"form": form, "rows": _webhook_rows(), "events": notifications.EVENTS}
    return render(request, "notifications/webhooks.html", context, status=status)


@require_http_methods(["GET", "POST"])
@permission_required(MANAGE, raise_exception=True)
def webhook_detail(request: HttpRequest, pk: int) -> HttpResponse:
    """One webhook: edit it, rotate its secret, send a test event, remove it; its deliveries, attempt by attempt."""
    webhook = get_object_or_404(Webhook, pk=pk)
    initial = {
        "name": webhook.name,
        "url": webhook.url,
        "format": webhook.format,
        "events": webhook.events,
        "active": webhook.active,
    }
    form = WebhookForm(initial=initial)
    status = 200
    if request.method == "POST":
        action = request.POST.get("action", "save")
        try:
            if action == "rotate":
                webhook = notifications.update_webhook(pk, {"rotate_secret": True}, request.user)
                _secret_once(request, webhook)
                messages.success(request, _("New signing secret made. Copy it now: it is shown once."))
                return see_other(reverse("webhook", args=[pk]))
            if action == "test":
                notifications.ping(webhook, request.user)
                messages.success(request, _("Test event queued; its delivery appears below."))
                return see_other(reverse("webhook", args=[pk]))
            if action == "delete":
                notifications.delete_webhook(pk, request.user)
                messages.success(request, _("Webhook removed."))
                return see_other(reverse("webhooks"))
            form = WebhookForm(request.POST)
            if form.is_valid():
                notifications.update_webhook(pk, form.cleaned_data, request.user)
                messages.success(request, _("Webhook saved."))
                return see_other(reverse("webhook", args=[pk]))
            status = 422
        except ServiceError as exc:
            form.add_error(None, str(exc))
            status = 422
    secret = request.session.pop(f"webhook-secret-{webhook.pk}", None)
    deliveries = (
        webhook.deliveries.order_by("-created_at", "-id")
        .prefetch_related(Prefetch("attempt_rows", queryset=WebhookAttempt.objects.order_by("number")))
        .all()[:DELIVERIES_SHOWN]
    )
    context = {
        "webhook": webhook,
        "form": form,
        # shown raw on purpose, once: the admin configures the receiver with it
        "secret": Shown(secret) if secret else None,
        "deliveries": deliveries,
        "max_attempts": _max_attempts(),
        "signature_header": notifications.SIGNATURE_HEADER,
        "timestamp_header": notifications.TIMESTAMP_HEADER,
    }
    return render(request, "notifications/webhook.html", context, status=status)


def _max_attempts() -> int:
    return int(settings.WEBHOOK_MAX_ATTEMPTS)
