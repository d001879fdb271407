"""Notifications: the in-app inbox and outgoing webhooks, fed by one call per event.

Call sites (one line each) publish what happened: a drift case opened (:func:`drift_case_opened`), a run that
ended degraded or failed (:func:`run_ended`), automatic compression stopped for a session
(:func:`auto_compression_stopped`), a comment mentioning teammates (:func:`mentioned`) and a case assigned
(:func:`assigned`). Publishing writes inbox rows and webhook deliveries in the caller's transaction (a
savepoint: a notification that cannot be written is logged, it never undoes the work it reports), and each
delivery's task is sent once that transaction commits (``console/services/queue.py``).

**Who gets an inbox line**

- *mention*: every active teammate a comment names with ``@name`` (not its author);
- *assignment*: the new assignee of a drift case, unless they assigned it to themselves (a claim);
- *new drift case* and *automatic compression stopped*: the people **involved with the session**: who
  started a compression of it, wrote (re-summarized) one of its summaries, or holds one of its drift cases;
  not the person who opened the case by hand;
- *degraded / failed run*: the person who started the run.

API-key users (agent runtimes) and inactive users get no inbox lines, nor do users who may not read sessions.

**Webhooks** get the events in :data:`EVENTS` they subscribe to, as generic JSON or as Slack's
``{"text": ...}``. Every payload is masked (``console.masking.mask_value``) before it is stored or signed, so a
secret in a session key, a finding or an error never leaves. Each request carries::

    X-Compression-Event: drift_case.opened
    X-Compression-Delivery: <id, the same on every retry: dedupe on it>
    X-Compression-Timestamp: <unix seconds of this attempt>
    X-Compression-Signature: sha256=<hex HMAC-SHA256(secret, timestamp + "." + raw body)>

A receiver recomputes the HMAC over the timestamp header, a dot and the raw body bytes with the webhook's
secret, compares it in constant time, and refuses a timestamp more than 5 minutes away from its clock (a
replayed request): :func:`verify` does exactly that. The timestamp is inside the signed text, so it cannot be
changed without breaking the signature.

Webhooks go to public addresses only, checked when the URL is saved and again at each send, unless an admin
allows a private receiver by name (``WEBHOOK_ALLOWED_HOSTS``; ``console.services.egress``). Of a receiver's
answer only the status and, when it is not a 2xx, a short masked snippet are kept.

A delivery is attempted by the ``console.deliver_webhook`` task; a non-2xx answer, a timeout or a refused
connection is retried after ``WEBHOOK_RETRY_SECONDS``, doubling each time up to ``WEBHOOK_RETRY_MAX_SECONDS``
(a 429's or 503's ``Retry-After`` is honoured within that bound), ``WEBHOOK_MAX_ATTEMPTS`` tries in all, then
the delivery is *failed*. Every attempt is a :class:`~console.models.WebhookAttempt` row (status code, error,
duration, number). A delivery whose task never reached the broker, or was lost, or whose worker died during
the attempt, is picked up by the recovery sweep (:func:`recover_deliveries`).
"""

from __future__ import annotations

import hashlib
import hmac
import json
import logging
import secrets
import time
import uuid
from collections.abc import Callable, Iterable
from datetime import timedelta
from functools import wraps
from typing import Any, TypeVar

from django.conf import settings
from django.contrib.auth import get_user_model
from django.db import transaction
from django.db.models import F
from django.urls import reverse
from django.utils import timezone, translation
from django.utils.translation import gettext_lazy as _

from ..audit import audit
from ..errors import InvalidInput, NotFound
from ..masking import mask_text, mask_value
from ..models import (
    CompressionRun,
    DriftCase,
    DriftComment,
    Notification,
    Session,
    Summary,
    Webhook,
    WebhookAttempt,
    WebhookDelivery,
)
from ..roles import MANAGE_WEBHOOKS
from . import egress, queue

log = logging.getLogger(__name__)

DRIFT_CASE_OPENED = "drift_case.opened"
RUN_DEGRADED = "run.degraded"
RUN_FAILED = "run.failed"
AUTO_STOPPED = "auto_compression.stopped"
PING = "ping"

#: the events a webhook may subscribe to, with what the console calls them
EVENTS: dict[str, Any] = {
    DRIFT_CASE_OPENED: _("A drift case is opened"),
    RUN_DEGRADED: _("A compression run ends degraded"),
    RUN_FAILED: _("A compression run fails"),
    AUTO_STOPPED: _("Automatic compression stops for a session"),
}

EVENT_HEADER = "X-Compression-Event"
DELIVERY_HEADER = "X-Compression-Delivery"
TIMESTAMP_HEADER = "X-Compression-Timestamp"
SIGNATURE_HEADER = "X-Compression-Signature"
#: how far a receiver should let a timestamp be from its clock
TOLERANCE_SECONDS = 300
MANAGE_PERMISSION = MANAGE_WEBHOOKS
VIEW_PERMISSION = "console.view_session"
#: characters of one text (an error, a finding's evidence) in a payload
TEXT_CHARS = 500
USER_AGENT = "compression-console-webhooks/1"

F_ = TypeVar("F_", bound=Callable[..., Any])


# --------------------------------------------------------------------------- signing


def new_secret() -> str:
    """A fresh signing secret (shown to the admin once; masked everywhere else)."""
    return "whsec_" + secrets.token_hex(32)


def signature(secret: str, timestamp: str | int, body: bytes) -> str:
    """The ``X-Compression-Signature`` value: ``sha256=`` and the hex HMAC-SHA256 of ``timestamp.body``."""
    digest = hmac.new(secret.encode(), f"{timestamp}.".encode() + body, hashlib.sha256).hexdigest()
    return f"sha256={digest}"


def verify(
    secret: str, body: bytes, signature_header: str, timestamp_header: str, *, tolerance: float = TOLERANCE_SECONDS
) -> bool:
    """What a receiver does: the signature matches the raw body and the timestamp, which is recent."""
    try:
        sent = int(timestamp_header)
    except (TypeError, ValueError):
        return False
    if abs(time.time() - sent) > tolerance:
        return False
    return hmac.compare_digest(signature(secret, timestamp_header, body), signature_header or "")


# --------------------------------------------------------------------------- publishing


def _safely(publish: F_) -> F_:
    """A notification that cannot be written is logged; it never undoes (or fails) the work it reports."""

    @wraps(publish)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        try:
            with transaction.atomic():
                return publish(*args, **kwargs)
        except Exception:
            log.exception("could not publish the %s notification", publish.__name__)
            return None

    return wrapper  # type: ignore[return-value]


def absolute(path: str) -> str:
    """``path`` as receivers should link it (``CONSOLE_URL`` + path; the path alone without it)."""
    return f"{settings.CONSOLE_URL}{path}" if settings.CONSOLE_URL else path


def _clip(text: str, limit: int = TEXT_CHARS) -> str:
    text = text or ""
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _session_data(session: Session) -> dict[str, Any]:
    path = reverse("session", args=[session.pk])
    return {"id": session.pk, "key": session.key, "url": absolute(path)}


def _readers(user_ids: Iterable[Any]) -> list[Any]:
    """The users among ``user_ids`` who get inbox lines: active people (not API keys) who may read sessions."""
    ids = {pk for pk in user_ids if pk is not None}
    if not ids:
        return []
    users = get_user_model().objects.filter(pk__in=ids, is_active=True, api_key__isnull=True)
    return [u for u in users if u.has_perm(VIEW_PERMISSION)]


def involved(session_id: int) -> set[int]:
    """The people involved with a session: started one of its runs, wrote one of its summaries, hold one of its
    cases."""
    ids: set[int] = set()
    ids.update(CompressionRun.objects.filter(session_id=session_id).values_list("created_by_id", flat=True))
    ids.update(Summary.objects.filter(archive__session_id=session_id).values_list("created_by_id", flat=True))
    ids.update(DriftCase.objects.filter(session_id=session_id).values_list("assignee_id", flat=True))
    ids.discard(None)  # type: ignore[arg-type]
    return ids


def _inbox(recipients: Iterable[Any], kind: str, *, url: str, data: dict[str, Any], actor: Any = None) -> int:
    label = actor.get_username() if getattr(actor, "is_authenticated", False) else "system"
    rows = [
        Notification(recipient=user, kind=kind, url=url, data=mask_value(data), actor_label=mask_text(label))
        for user in recipients
        if actor is None or user.pk != getattr(actor, "pk", None)
    ]
    Notification.objects.bulk_create(rows)
    return len(rows)


def _slack_escape(text: str) -> str:
    return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


def _link(url: str, label: str) -> str:
    """A Slack link when the URL is absolute, else the label and the path."""
    if url.startswith(("http://", "https://")):
        return f"<{url}|{_slack_escape(label)}>"
    return f"{_slack_escape(label)} ({_slack_escape(url)})"


def body_for(webhook: Webhook, event: str, delivery_id: str, text: str, data: dict[str, Any]) -> str:
    """The exact body a webhook gets (masked): Slack's ``{"text": ...}`` or the generic JSON document."""
    if webhook.format == Webhook.Format.SLACK:
        document: dict[str, Any] = {"text": mask_text(text)}
    else:
        document = {
            "id": delivery_id,
            "event": event,
            "created_at": timezone.now().isoformat(),
            "text": text,
            "data": data,
        }
        document = mask_value(document)
    return json.dumps(document, ensure_ascii=False, separators=(",", ":"), sort_keys=True)


def _webhooks(event: str, webhooks: Iterable[Webhook] | None = None) -> list[Webhook]:
    if webhooks is not None:
        return list(webhooks)
    return [w for w in Webhook.objects.filter(active=True) if event in (w.events or [])]


def deliver_event(
    event: str, *, text: str, plain_text: str, data: dict[str, Any], webhooks: Iterable[Webhook] | None = None
) -> list[WebhookDelivery]:
    """A delivery per subscribed webhook, each sent once the transaction commits. ``text`` is Slack's (with
    links), ``plain_text`` the generic document's."""
    deliveries = []
    for webhook in _webhooks(event, webhooks):
        delivery_id = f"dlv_{uuid.uuid4().hex}"
        chosen = text if webhook.format == Webhook.Format.SLACK else plain_text
        delivery = WebhookDelivery.objects.create(
            webhook=webhook,
            event=event,
            delivery_id=delivery_id,
            body=body_for(webhook, event, delivery_id, chosen, data),
        )
        queue.send_delivery_on_commit(delivery.pk)
        deliveries.append(delivery)
    return deliveries


def _finding(finding: dict[str, Any]) -> dict[str, Any]:
    evidence = finding.get("evidence") or {}
    return {
        "kind": finding.get("kind", ""),
        "severity": finding.get("severity", ""),
        "detail": _clip(str(finding.get("detail", ""))),
        "original": _clip(str(evidence.get("original", ""))),
        "summary": _clip(str(evidence.get("summary", ""))),
        "message_index": finding.get("message_index"),
    }


@_safely
def drift_case_opened(case: DriftCase, actor: Any = None) -> int:
    """A case opened by the drift check (``actor`` None) or by hand: webhooks, and the session's people."""
    session = case.session
    path = reverse("drift_case", args=[case.pk])
    kinds = ", ".join(case.kind_list) or "-"
    data = {
        "case": {
            "id": case.pk,
            "url": absolute(path),
            "severity": case.severity,
            "status": case.status,
            "kinds": case.kind_list,
            "findings": [_finding(f) for f in case.findings[:20]],
            "opened_by": actor.get_username() if getattr(actor, "is_authenticated", False) else None,
        },
        "summary": case.summary.summary_id,
        "session": _session_data(session),
    }
    head = f"New drift case #{case.pk} ({case.severity}: {kinds}) on session "
    deliver_event(
        DRIFT_CASE_OPENED,
        text=f"{_slack_escape(head)}{_link(absolute(reverse('session', args=[session.pk])), session.key)}: "
        + _link(absolute(path), f"review case #{case.pk}"),
        plain_text=f"{head}{session.key}: {absolute(path)}",
        data=data,
    )
    inbox = {"case": case.pk, "severity": case.severity, "kinds": kinds, "session": session.key}
    return _inbox(_readers(involved(session.pk)), Notification.Kind.DRIFT_CASE, url=path, data=inbox, actor=actor)


@_safely
def run_ended(run: CompressionRun) -> int:
    """A run that ended degraded or failed (any other status: nothing): webhooks, and who started it."""
    run.refresh_from_db(fields=["status", "error", "warnings", "tokens_before", "tokens_after", "trigger"])
    if run.status == CompressionRun.Status.DEGRADED:
        event, kind = RUN_DEGRADED, Notification.Kind.RUN_DEGRADED
    elif run.status == CompressionRun.Status.FAILED:
        event, kind = RUN_FAILED, Notification.Kind.RUN_FAILED
    else:
        return 0
    session = Session.objects.get(pk=run.session_id)
    path = reverse("run", args=[run.pk])
    warnings = [
        {"code": str(w.get("code", "")), "message": _clip(str(w.get("message", "")))}
        for w in (run.warnings or [])[:20]
        if isinstance(w, dict)
    ]
    data = {
        "run": {
            "id": run.pk,
            "url": absolute(path),
            "status": run.status,
            "trigger": run.trigger,
            "error": _clip(run.error),
            "warnings": warnings,
            "tokens_before": run.tokens_before,
            "tokens_after": run.tokens_after,
        },
        "session": _session_data(session),
    }
    why = _clip(run.error, 200) if run.error else ", ".join(w["code"] for w in warnings) or "-"
    head = f"Compression run #{run.pk} {run.status} ({why}) on session "
    deliver_event(
        event,
        text=f"{_slack_escape(head)}{_link(absolute(reverse('session', args=[session.pk])), session.key)}: "
        + _link(absolute(path), f"run #{run.pk}"),
        plain_text=f"{head}{session.key}: {absolute(path)}",
        data=data,
    )
    inbox = {"run": run.pk, "status": run.status, "session": session.key}
    return _inbox(_readers([run.created_by_id]), kind, url=path, data=inbox)


@_safely
def auto_compression_stopped(session: Session, run: CompressionRun | None = None, *, ineffective: int = 0) -> int:
    """Automatic compression was switched off for ``session``: ``ineffective`` compressions in a row left it over
    its trigger."""
    path = reverse("session", args=[session.pk])
    count = ineffective or session.ineffective_compressions
    data = {
        "session": _session_data(session) | {"ineffective_compressions": count},
        "run": {"id": run.pk, "url": absolute(reverse("run", args=[run.pk]))} if run is not None else None,
    }
    head = "Automatic compression stopped for session "
    tail = f" after {count} compressions in a row left it over its trigger"
    deliver_event(
        AUTO_STOPPED,
        text=f"{_slack_escape(head)}{_link(absolute(path), session.key)}{_slack_escape(tail)}",
        plain_text=f"{head}{session.key}{tail}: {absolute(path)}",
        data=data,
    )
    inbox = {"session": session.key, "count": count, "run": run.pk if run else None}
    return _inbox(_readers(involved(session.pk)), Notification.Kind.AUTO_STOPPED, url=path, data=inbox)


@_safely
def mentioned(comment: DriftComment, users: Iterable[Any]) -> int:
    """The teammates a comment names (inbox only)."""
    case = comment.case
    path = reverse("drift_case", args=[case.pk]) + f"#comment-{comment.pk}"
    data = {"case": case.pk, "comment": comment.pk, "excerpt": _clip(comment.body, 200)}
    return _inbox(_readers(u.pk for u in users), Notification.Kind.MENTION, url=path, data=data, actor=comment.author)


@_safely
def assigned(case: DriftCase, actor: Any) -> int:
    """A case given to someone other than the one assigning it (inbox only)."""
    if case.assignee_id is None:
        return 0
    path = reverse("drift_case", args=[case.pk])
    data = {"case": case.pk, "severity": case.severity, "session": case.session.key}
    return _inbox(_readers([case.assignee_id]), Notification.Kind.ASSIGNMENT, url=path, data=data, actor=actor)


def ping(webhook: Webhook, actor: Any) -> WebhookDelivery:
    """A test event for one webhook (from its page), delivered like any other."""
    text = f"Test event from the compression console, sent by {actor.get_username()}"
    data = {"webhook": webhook.pk, "name": webhook.name}
    with transaction.atomic():
        return deliver_event(PING, text=_slack_escape(text), plain_text=text, data=data, webhooks=[webhook])[0]


# --------------------------------------------------------------------------- inbox


def mark_read(user: Any, ids: Iterable[int] | None = None) -> int:
    """Mark ``user``'s notifications read (``ids``: only those; None: all). Returns how many changed."""
    rows = Notification.objects.filter(recipient=user, read_at__isnull=True)
    if ids is not None:
        rows = rows.filter(pk__in=list(ids))
    return rows.update(read_at=timezone.now())


# --------------------------------------------------------------------------- delivery


def backoff(attempt: int) -> float:
    """Seconds before the attempt after attempt number ``attempt`` (1-based): doubling, bounded."""
    seconds = settings.WEBHOOK_RETRY_SECONDS * 2 ** max(0, min(attempt - 1, 20))
    return float(min(seconds, settings.WEBHOOK_RETRY_MAX_SECONDS))


def _retry_after(headers: dict[str, str]) -> float | None:
    value = next((v for k, v in headers.items() if k.lower() == "retry-after"), None)
    try:
        return float(value) if value is not None else None
    except ValueError:
        return None


def _claim(delivery_id: int) -> WebhookDelivery | None:
    now = timezone.now()
    claimed = WebhookDelivery.objects.filter(
        pk=delivery_id, status=WebhookDelivery.Status.PENDING, next_attempt_at__lte=now + timedelta(seconds=1)
    ).update(status=WebhookDelivery.Status.SENDING, claimed_at=now, attempts=F("attempts") + 1)
    if not claimed:
        return None
    return WebhookDelivery.objects.select_related("webhook").get(pk=delivery_id)


def deliver(delivery_id: int) -> str | None:
    """One attempt of a delivery (the task); schedules the next on failure. The delivery's status, or None when
    it was not ours to attempt (delivered, failed, not due, or another worker has it)."""
    delivery = _claim(delivery_id)
    if delivery is None:
        return None
    webhook = delivery.webhook
    number = delivery.attempts
    started = timezone.now()
    headers: dict[str, str] = {}
    refused = False
    if not webhook.active:
        code, error, duration = None, "the webhook was switched off; not sent", 0
    else:
        body = delivery.body.encode()
        timestamp = str(int(time.time()))
        request_headers = {
            "Content-Type": "application/json; charset=utf-8",
            "User-Agent": USER_AGENT,
            EVENT_HEADER: delivery.event,
            DELIVERY_HEADER: delivery.delivery_id,
            TIMESTAMP_HEADER: timestamp,
            SIGNATURE_HEADER: signature(webhook.secret, timestamp, body),
        }
        clock = time.monotonic()
        # under the egress policy: public addresses only unless allowed, the one checked, no redirects; what is
        # stored is in the site's language, whoever's request (a page's "send a test event") runs this
        try:
            with translation.override(settings.LANGUAGE_CODE):
                code, error, headers = egress.post(webhook.url, body, request_headers, settings.WEBHOOK_TIMEOUT)
        except egress.Refused as exc:  # the URL must change: no retry
            code, error, refused = None, str(exc), True
        duration = int((time.monotonic() - clock) * 1000)
        if code is not None and not 200 <= code < 300 and not error:
            error = f"HTTP {code}"
    error = mask_text(error)[:2000]
    WebhookAttempt.objects.create(
        delivery=delivery, number=number, status_code=code, error=error, duration_ms=duration, started_at=started
    )
    ok = code is not None and 200 <= code < 300
    return _after_attempt(delivery, ok=ok, error=error, headers=headers, final=refused)


def _after_attempt(
    delivery: WebhookDelivery, *, ok: bool, error: str, headers: dict[str, str], final: bool = False
) -> str:
    mine = WebhookDelivery.objects.filter(pk=delivery.pk, status=WebhookDelivery.Status.SENDING)
    now = timezone.now()
    if ok:
        mine.update(status=WebhookDelivery.Status.DELIVERED, delivered_at=now, last_error="", claimed_at=None)
        return WebhookDelivery.Status.DELIVERED
    if final or delivery.attempts >= settings.WEBHOOK_MAX_ATTEMPTS or not delivery.webhook.active:
        mine.update(status=WebhookDelivery.Status.FAILED, last_error=error, claimed_at=None)
        log.warning("webhook delivery %s failed after %s attempts: %s", delivery.pk, delivery.attempts, error)
        return WebhookDelivery.Status.FAILED
    wait = backoff(delivery.attempts)
    asked = _retry_after(headers)
    if asked is not None:
        wait = min(max(wait, asked), settings.WEBHOOK_RETRY_MAX_SECONDS)
    updated = mine.update(
        status=WebhookDelivery.Status.PENDING,
        next_attempt_at=now + timedelta(seconds=wait),
        last_error=error,
        claimed_at=None,
        sent_at=None,
        sends=0,
    )
    if updated:
        queue.send_delivery(delivery.pk, countdown=wait)  # a broker that is down leaves it to the sweep
    return WebhookDelivery.Status.PENDING


def recover_deliveries(now: Any = None) -> dict[str, int]:
    """The sweep's part: attempts whose worker died are counted and retried; due deliveries whose task was never
    sent, or was lost, are sent again (waiting longer after each re-send, like runs)."""
    now = now or timezone.now()
    report = {"lost": 0, "resent": 0}
    stale = now - timedelta(seconds=settings.WEBHOOK_TIMEOUT + 60)
    for delivery in WebhookDelivery.objects.filter(status=WebhookDelivery.Status.SENDING, claimed_at__lt=stale):
        error = "the worker stopped during the attempt"
        final = delivery.attempts >= settings.WEBHOOK_MAX_ATTEMPTS
        moved = WebhookDelivery.objects.filter(pk=delivery.pk, claimed_at=delivery.claimed_at).update(
            status=WebhookDelivery.Status.FAILED if final else WebhookDelivery.Status.PENDING,
            next_attempt_at=now,
            last_error=error,
            claimed_at=None,
            sent_at=None,
            sends=0,
        )
        if moved:
            WebhookAttempt.objects.get_or_create(
                delivery=delivery,
                number=delivery.attempts,
                defaults={"error": error, "started_at": delivery.claimed_at},
            )
            report["lost"] += 1
    due = WebhookDelivery.objects.filter(
        status=WebhookDelivery.Status.PENDING, next_attempt_at__lte=now, created_at__lte=now - queue.SEND_GRACE
    ).order_by("next_attempt_at")[:200]
    ready = [
        d
        for d in due
        if d.sent_at is None or now - max(d.sent_at, d.next_attempt_at) >= queue.resend_after(max(d.sends, 1))
    ]
    report["resent"] = queue.send_all(queue.DELIVER_WEBHOOK, ready)
    return report


# --------------------------------------------------------------------------- configuration


def check_events(events: Iterable[str]) -> list[str]:
    """The events, each one of :data:`EVENTS` (ValueError naming an unknown one)."""
    chosen = list(dict.fromkeys(events))
    unknown = [e for e in chosen if e not in EVENTS]
    if unknown:
        raise ValueError(f"unknown event {unknown[0]!r}; one of: {', '.join(EVENTS)}")
    if not chosen:
        raise ValueError("choose at least one event")
    return chosen


def check_url(url: str) -> str:
    """``url``, stripped, if the egress policy lets webhooks go there (``egress.Refused``, a ValueError, if not)."""
    egress.check(url, must_resolve=False)
    return url.strip()


def _webhook_state(webhook: Webhook) -> dict[str, Any]:
    return {
        "name": webhook.name,
        "url": webhook.url,
        "format": webhook.format,
        "events": list(webhook.events),
        "active": webhook.active,
    }


@transaction.atomic
def create_webhook(*, name: str, url: str, format: str, events: Iterable[str], active: bool, user: Any) -> Webhook:
    """A webhook with a fresh secret (audited; the secret is not in the audit log)."""

    try:
        webhook = Webhook(
            name=name.strip(),
            url=check_url(url),
            format=format,
            events=check_events(events),
            active=active,
            secret=new_secret(),
            created_by=user if getattr(user, "is_authenticated", False) else None,
        )
    except ValueError as exc:
        raise InvalidInput(str(exc)) from None
    if not webhook.name:
        raise InvalidInput("give the webhook a name")
    if format not in Webhook.Format.values:
        raise InvalidInput(f"unknown format {format!r}; one of: {', '.join(Webhook.Format.values)}")
    webhook.save()
    audit(user, "webhook.create", webhook, after=_webhook_state(webhook))
    return webhook


@transaction.atomic
def update_webhook(webhook_id: int, changes: dict[str, Any], user: Any) -> Webhook:
    """Change a webhook's name, URL, format, events or active flag; ``rotate_secret`` gives it a new secret."""

    webhook = Webhook.objects.select_for_update().filter(pk=webhook_id).first()
    if webhook is None:
        raise NotFound(f"no webhook {webhook_id}")
    before = _webhook_state(webhook)
    try:
        if changes.get("name") is not None:
            webhook.name = str(changes["name"]).strip()
            if not webhook.name:
                raise ValueError("give the webhook a name")
        if changes.get("url") is not None:
            webhook.url = check_url(str(changes["url"]))
        if changes.get("format") is not None:
            if changes["format"] not in Webhook.Format.values:
                raise ValueError(f"unknown format {changes['format']!r}; one of: {', '.join(Webhook.Format.values)}")
            webhook.format = changes["format"]
        if changes.get("events") is not None:
            webhook.events = check_events(changes["events"])
        if changes.get("active") is not None:
            webhook.active = bool(changes["active"])
    except ValueError as exc:
        raise InvalidInput(str(exc)) from None
    rotated = bool(changes.get("rotate_secret"))
    if rotated:
        webhook.secret = new_secret()
    webhook.save()
    after = _webhook_state(webhook)
    if after != before or rotated:
        audit(user, "webhook.update", webhook, before=before, after=after | ({"secret": "rotated"} if rotated else {}))
    return webhook


@transaction.atomic
def delete_webhook(webhook_id: int, user: Any) -> None:
    """Remove a webhook and its delivery records (audited)."""

    webhook = Webhook.objects.filter(pk=webhook_id).first()
    if webhook is None:
        raise NotFound(f"no webhook {webhook_id}")
    audit(user, "webhook.delete", webhook, before=_webhook_state(webhook))
    webhook.delete()
