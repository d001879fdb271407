"""Notifications: the inbox and its badge, and webhooks delivered to a real HTTP receiver on loopback.

The receiver is ``http.server`` in a thread; it answers a scripted list of status codes (then 200) and
keeps every request's headers and raw body, which the tests verify with the documented method
(``notifications.verify``). Tasks run inline (Celery eager): a failed attempt's retry is sent at once
with ``WEBHOOK_RETRY_SECONDS=0``; one test delivers through a real worker process.
"""

from __future__ import annotations

import json
import re
import time
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
from django.contrib.auth.models import Group, User
from django.test import Client
from django.utils import timezone

from console.services import drift, notifications, queue, runs
from console.celery import app, tasks_inline
from console.models import (
    ApiKey,
    AuditEvent,
    CompressionRun,
    DriftCase,
    Notification,
    Session,
    Summary,
    Webhook,
    WebhookAttempt,
    WebhookDelivery,
)
from console.services.sessions import ImportedSession, append_messages, create_session
from tests.console.factories import SECRET, html_of, sample_session
from tests.fakes.webhook_receiver import Receiver

pytestmark = pytest.mark.django_db

CONSTRAINT = "but don't deploy; just run the job locally"
INVERTED = "and deploy it now"


# --------------------------------------------------------------------------- the receiver


@pytest.fixture
def receiver() -> Iterator[Receiver]:
    with Receiver() as server:
        yield server


@pytest.fixture(autouse=True)
def fast_retries(settings: Any) -> None:
    settings.WEBHOOK_RETRY_SECONDS = 0
    settings.WEBHOOK_MAX_ATTEMPTS = 3
    settings.WEBHOOK_TIMEOUT = 2
    settings.CONSOLE_URL = "https://console.example"


@pytest.fixture
def inline(django_capture_on_commit_callbacks: Any) -> Any:
    """``with inline():`` tasks run in this process as they are sent, and on-commit sends when the block ends."""

    @contextmanager
    def block() -> Iterator[None]:
        with tasks_inline(), django_capture_on_commit_callbacks(execute=True):
            yield

    return block


def hook(url: str, events: list[str] | None = None, fmt: str = "generic") -> Webhook:
    return notifications.create_webhook(
        name=f"hook-{fmt}",
        url=url,
        format=fmt,
        events=events or list(notifications.EVENTS),
        active=True,
        user=None,
    )


def readme_verify() -> Any:
    """The ``verify`` function the README gives receivers, run as written (independent of the console's code)."""
    readme = (Path(__file__).resolve().parents[2] / "README.md").read_text()
    blocks = re.findall(r"```python\n(.*?)```", readme, flags=re.S)
    [code] = [b for b in blocks if "def verify(" in b]
    namespace: dict[str, Any] = {}
    exec(code, namespace)  # noqa: S102 - our own README
    return namespace["verify"]


VERIFY = readme_verify()


def verified(webhook: Webhook, request: dict[str, Any]) -> dict[str, Any]:
    """The request's JSON body, after checking its signature the way the README tells receivers to."""
    headers = request["headers"]
    assert headers["X-Compression-Signature"].startswith("sha256=")
    signature, timestamp = headers["X-Compression-Signature"], headers["X-Compression-Timestamp"]
    assert VERIFY(webhook.secret, request["body"], timestamp, signature), "the README's check refuses it"
    assert notifications.verify(webhook.secret, request["body"], signature, timestamp)
    assert not VERIFY(webhook.secret, request["body"] + b" ", timestamp, signature), "a changed body must fail"
    return json.loads(request["body"])


def user(name: str, role: str) -> User:
    person = User.objects.create_user(name, password="pw")
    person.groups.add(Group.objects.get(name=role))
    return person


def client_for(person: User) -> Client:
    client = Client()
    client.force_login(person)
    return client


def drifting_case(archive: Any, active: Summary, **fields: Any) -> DriftCase:
    """A draft that inverts the user's "don't deploy", checked: the drift check opens its case."""
    summary = Summary.objects.create(
        archive=archive,
        text=active.text.replace(CONSTRAINT, INVERTED),
        status=Summary.Status.DRAFT,
        summary_id=f"sum_drift{Summary.objects.count():08d}",
        provenance={"generator": "openai", "model": "gpt-test", "trigger": "resummarize"},
        **fields,
    )
    drift.check_summary_drift(summary.pk)
    return DriftCase.objects.get(summary=summary)


# --------------------------------------------------------------------------- signing


def test_a_signature_verifies_only_for_the_exact_body_and_a_recent_timestamp():
    secret = notifications.new_secret()
    body = b'{"event":"ping"}'
    now = str(int(time.time()))
    signed = notifications.signature(secret, now, body)
    assert signed.startswith("sha256=") and len(signed) == 7 + 64
    assert notifications.verify(secret, body, signed, now)
    assert not notifications.verify(secret, body + b" ", signed, now), "a changed body must not verify"
    assert not notifications.verify("whsec_other", body, signed, now), "another secret must not verify"
    later = str(int(now) + 1)
    assert not notifications.verify(secret, body, signed, later), "the timestamp is part of what is signed"
    old = str(int(time.time()) - 600)
    assert not notifications.verify(secret, body, notifications.signature(secret, old, body), old), "a replay"
    assert not notifications.verify(secret, body, signed, "not-a-number")


def test_the_backoff_doubles_and_is_bounded(settings):
    settings.WEBHOOK_RETRY_SECONDS = 10
    settings.WEBHOOK_RETRY_MAX_SECONDS = 300
    assert [notifications.backoff(n) for n in range(1, 8)] == [10, 20, 40, 80, 160, 300, 300]


# --------------------------------------------------------------------------- the three events


def test_a_new_drift_case_reaches_the_receiver_signed_and_masked_with_a_retry_after_a_500(receiver, inline):
    session = sample_session(key=f"import:{SECRET}")
    from tests.console.factories import compress_now

    run = compress_now(session)
    archive = run.archive
    active = archive.summaries.get(status=Summary.Status.ACTIVE)
    webhook = hook(receiver.url, [notifications.DRIFT_CASE_OPENED])
    receiver.script = [500]

    with inline():
        case = drifting_case(archive, active)

    assert receiver.events() == ["drift_case.opened", "drift_case.opened"], "one 500, then the retry"
    first, second = (verified(webhook, r) for r in receiver.requests)
    assert first == second, "a retry sends the same body"
    ids = {r["headers"]["X-Compression-Delivery"] for r in receiver.requests}
    assert len(ids) == 1 and first["id"] in ids, "receivers dedupe on the delivery id"
    assert first["event"] == "drift_case.opened"
    assert first["data"]["case"]["id"] == case.pk and first["data"]["case"]["severity"] == "high"
    assert first["data"]["case"]["url"] == f"https://console.example/drift/{case.pk}/"
    assert "constraint_inverted" in first["data"]["case"]["kinds"]
    raw = b"".join(r["body"] for r in receiver.requests).decode()
    assert SECRET not in raw, "the session key's secret left the console"
    assert "[secret:" in first["data"]["session"]["key"]
    delivery = WebhookDelivery.objects.get(webhook=webhook)
    assert delivery.status == "delivered" and delivery.attempts == 2
    attempts = list(delivery.attempt_rows.order_by("number").values_list("number", "status_code"))
    assert attempts == [(1, 500), (2, 200)]
    failed = delivery.attempt_rows.get(number=1)
    assert "HTTP 500" in failed.error and "receiver says no" in failed.error


def test_a_degraded_run_and_stopped_automatic_compression_reach_the_receiver(receiver, inline):
    """A session whose latest message alone is over its trigger: each run ends degraded; the second stops
    automatic compression (judged against the session's own window, no override)."""
    generic = hook(receiver.url, [notifications.RUN_DEGRADED, notifications.AUTO_STOPPED])
    slack = hook(receiver.url, [notifications.AUTO_STOPPED], fmt="slack")
    turns = []
    for n in range(10):
        turns += [{"role": "user", "content": f"question {n} " * 30}, {"role": "assistant", "content": f"answer {n}"}]
    huge = {"role": "user", "content": f"my key is {SECRET}; please read this: " + "word " * 5000}
    session = create_session(
        ImportedSession(key="import:thrash", messages=[*turns, huge], metadata={}, context_window_tokens=4000)
    )
    receiver.script = [500]  # the first delivery fails once

    for _ in range(3):
        with inline():
            run, _ = runs.request_compression(session.key, config={})
            runs.execute_run(run.pk)
        session.refresh_from_db()
        if session.auto_compression_stopped:
            break
        append_messages(session.key, [{"role": "assistant", "content": "ok"}, huge])

    assert session.auto_compression_stopped
    events = receiver.events()
    assert "run.degraded" in events and "auto_compression.stopped" in events
    assert events.count("auto_compression.stopped") == 2, "one generic, one Slack"
    bodies = [r for r in receiver.requests if r["headers"]["X-Compression-Event"] == "auto_compression.stopped"]
    slack_body = next(json.loads(r["body"]) for r in bodies if b'"data"' not in r["body"])
    assert set(slack_body) == {"text"} and "<https://console.example/sessions/" in slack_body["text"]
    assert verified(slack, next(r for r in bodies if b'"data"' not in r["body"]))
    document = verified(generic, next(r for r in bodies if b'"data"' in r["body"]))
    assert document["data"]["session"]["key"] == "import:thrash"
    assert document["data"]["session"]["ineffective_compressions"] >= 2
    degraded = [r for r in receiver.requests if r["headers"]["X-Compression-Event"] == "run.degraded"]
    document = verified(generic, degraded[-1])
    assert document["data"]["run"]["status"] == "degraded"
    codes = {w["code"] for w in document["data"]["run"]["warnings"]}
    assert codes & {"still_over_threshold", "fixed_part_over_trigger"}
    raw = b"".join(r["body"] for r in receiver.requests).decode()
    assert SECRET not in raw
    first = WebhookDelivery.objects.order_by("created_at", "id").first()
    assert first is not None and first.attempts == 2 and first.status == "delivered"
    assert list(first.attempt_rows.values_list("status_code", flat=True)) == [500, 200]


def test_a_failed_run_is_published_and_a_succeeded_one_is_not(receiver, inline, compressed_run):
    webhook = hook(receiver.url, [notifications.RUN_FAILED, notifications.RUN_DEGRADED])
    assert notifications.run_ended(compressed_run) == 0
    assert not WebhookDelivery.objects.exists(), "a succeeded run publishes nothing"
    CompressionRun.objects.filter(pk=compressed_run.pk).update(status="failed", error=f"boom {SECRET}")
    with inline():
        notifications.run_ended(compressed_run)
    [request] = receiver.requests
    document = verified(webhook, request)
    assert document["event"] == "run.failed" and document["data"]["run"]["id"] == compressed_run.pk
    assert SECRET not in request["body"].decode() and "[secret:" in document["data"]["run"]["error"]


# --------------------------------------------------------------------------- failures and outages


def test_a_delivery_that_keeps_failing_is_failed_with_every_attempt_recorded_and_shown(receiver, inline, superuser):
    webhook = hook(receiver.url)
    receiver.script = [500, 503, 502]
    with inline():
        delivery = notifications.ping(webhook, User.objects.create_user("pinger"))

    delivery.refresh_from_db()
    assert delivery.status == "failed" and delivery.attempts == 3
    rows = list(delivery.attempt_rows.order_by("number"))
    assert [(a.number, a.status_code) for a in rows] == [(1, 500), (2, 503), (3, 502)]
    assert all(a.error.startswith("HTTP 5") and a.duration_ms >= 0 for a in rows)
    assert delivery.last_error.startswith("HTTP 502")
    html = html_of(superuser.get(f"/settings/webhooks/{webhook.pk}/"))
    assert f'id="d-{delivery.pk}"' in html and "HTTP 503" in html and "status-failed" in html
    listing = html_of(superuser.get("/settings/webhooks/"))
    assert "1 failed" in listing


def test_an_unreachable_receiver_is_retried_then_failed(inline, settings):
    webhook = hook("http://127.0.0.1:9/nothing-listens-here")
    with inline():
        delivery = notifications.ping(webhook, User.objects.create_user("pinger"))
    delivery.refresh_from_db()
    assert delivery.status == "failed" and delivery.attempts == 3
    assert all(a.status_code is None and "could not connect" in a.error for a in delivery.attempt_rows.all())


def test_a_failed_attempt_waits_its_backoff_before_the_next(receiver, settings, django_capture_on_commit_callbacks):
    settings.WEBHOOK_RETRY_SECONDS = 30
    webhook = hook(receiver.url)
    receiver.script = [500]
    sent: list[tuple[int, float | None]] = []
    real = queue.send
    queue.send = lambda name, pk, countdown=None: sent.append((pk, countdown)) or True  # type: ignore[assignment]
    try:
        with django_capture_on_commit_callbacks(execute=True):
            delivery = notifications.ping(webhook, User.objects.create_user("pinger"))
        assert sent == [(delivery.pk, None)]
        assert notifications.deliver(delivery.pk) == "pending"
        delivery.refresh_from_db()
        assert 25 < (delivery.next_attempt_at - timezone.now()).total_seconds() <= 30
        assert sent[-1] == (delivery.pk, 30.0), "the retry is sent with its countdown"
        assert notifications.deliver(delivery.pk) is None, "not due yet: an early duplicate does nothing"
        assert len(receiver.requests) == 1
    finally:
        queue.send = real  # type: ignore[assignment]


@pytest.mark.parametrize(("asked", "wait"), [("60", 60), ("5000", 120), ("soon", 1)])
def test_a_retry_after_is_honoured_within_the_bound(receiver, settings, monkeypatch, asked, wait):
    settings.WEBHOOK_RETRY_SECONDS = 1
    settings.WEBHOOK_RETRY_MAX_SECONDS = 120
    monkeypatch.setattr(queue, "send", lambda name, pk, countdown=None: True)
    receiver.script, receiver.retry_after = [429], asked
    delivery = notifications.ping(hook(receiver.url), User.objects.create_user("pinger"))
    assert notifications.deliver(delivery.pk) == "pending"
    delivery.refresh_from_db()
    assert wait - 5 < (delivery.next_attempt_at - timezone.now()).total_seconds() <= wait
    assert delivery.attempt_rows.get().status_code == 429


def test_nothing_is_lost_while_the_broker_is_down(receiver, monkeypatch, django_capture_on_commit_callbacks):
    webhook = hook(receiver.url)
    task = app.tasks[queue.DELIVER_WEBHOOK]

    def broker_down(*args: Any, **kwargs: Any) -> None:
        raise ConnectionRefusedError("broker down")

    monkeypatch.setattr(task, "apply_async", broker_down)
    with django_capture_on_commit_callbacks(execute=True):
        delivery = notifications.ping(webhook, User.objects.create_user("pinger"))
    delivery.refresh_from_db()
    assert delivery.status == "pending" and delivery.sent_at is None and not receiver.requests
    monkeypatch.undo()

    with tasks_inline():
        report = notifications.recover_deliveries(now=timezone.now() + timedelta(seconds=10))
    assert report["resent"] == 1
    delivery.refresh_from_db()
    assert delivery.status == "delivered" and len(receiver.requests) == 1
    verified(webhook, receiver.requests[0])


def test_the_sweep_retries_an_attempt_whose_worker_died(receiver):
    webhook = hook(receiver.url)
    delivery = WebhookDelivery.objects.create(
        webhook=webhook, event="ping", delivery_id="dlv_lost", body="{}", status="sending", attempts=1
    )
    WebhookDelivery.objects.filter(pk=delivery.pk).update(
        claimed_at=timezone.now() - timedelta(minutes=5), created_at=timezone.now() - timedelta(minutes=5)
    )
    with tasks_inline():
        report = notifications.recover_deliveries()
    assert report == {"lost": 1, "resent": 1}
    delivery.refresh_from_db()
    assert delivery.status == "delivered" and delivery.attempts == 2
    lost, ok = delivery.attempt_rows.order_by("number")
    assert lost.status_code is None and "worker stopped" in lost.error and ok.status_code == 200


def test_publishing_never_breaks_the_work_it_reports(monkeypatch, archive, active):
    def broken(*args: Any, **kwargs: Any) -> Any:
        raise RuntimeError("notifications are broken")

    monkeypatch.setattr(notifications, "deliver_event", broken)
    case = drifting_case(archive, active)
    assert case.pk and AuditEvent.objects.filter(action="drift_case.open", object_id=str(case.pk)).exists()
    assert not Notification.objects.exists()


# --------------------------------------------------------------------------- the inbox


def test_mentions_and_assignments_fill_the_inbox_and_the_badge_counts_them(archive, active):
    alice, bob = user("alice", "reviewer"), user("bob", "reviewer")
    case = drifting_case(archive, active)
    browser = client_for(bob)
    assert 'data-unread="' not in html_of(browser.get("/"))

    drift.add_comment(case, f"@bob look at this, and @alice too; the key is {SECRET}", "", alice)
    drift.update_drift_case(case.pk, {"assignee": "bob"}, alice)
    drift.update_drift_case(case.pk, {"claim": True}, bob)  # taking it yourself notifies nobody

    assert not Notification.objects.filter(recipient=alice).exists(), "no line for your own mention"
    rows = list(Notification.objects.filter(recipient=bob).order_by("created_at", "id"))
    assert [r.kind for r in rows] == ["mention", "assignment"]
    assert SECRET not in rows[0].data["excerpt"] and "[secret:" in rows[0].data["excerpt"]
    html = html_of(browser.get("/"))
    assert 'data-unread="2"' in html
    inbox = html_of(browser.get("/inbox/"))
    assert "alice mentioned you on drift case #" in inbox and "assigned drift case #" in inbox
    assert SECRET not in inbox

    opened = browser.post(f"/inbox/{rows[0].pk}/open")
    assert opened.status_code == 303 and opened["Location"] == f"/drift/{case.pk}/#comment-{rows[0].data['comment']}"
    assert 'data-unread="1"' in html_of(browser.get("/"))
    assert client_for(alice).post(f"/inbox/{rows[1].pk}/open").status_code == 404, "only your own"
    answer = browser.get("/api/v1/notifications").json()
    assert answer["unread"] == 1 and len(answer["items"]) == 2

    browser.post("/inbox/read")
    assert 'data-unread="' not in html_of(browser.get("/"))
    assert browser.get("/api/v1/notifications?unread=true").json() == {"unread": 0, "items": []}


def test_a_new_case_notifies_the_people_involved_with_its_session(active, archive):
    operator, bystander = user("oper", "operator"), user("bystander", "reviewer")
    holder = user("holder", "reviewer")
    CompressionRun.objects.filter(pk=archive.run_id).update(created_by=operator)
    runtime = User.objects.create_user("api:agent")
    runtime.groups.add(Group.objects.get(name="operator"))
    ApiKey.objects.create(name="agent", user=runtime, lookup="abc", key_sha256="x")
    CompressionRun.objects.create(session=archive.session, trigger="api", status="succeeded", created_by=runtime)
    DriftCase.objects.create(
        summary=active, session=archive.session, findings=[], severity="low", assignee=holder, status="dismissed"
    )

    case = drifting_case(archive, active)

    got = set(Notification.objects.filter(kind="drift_case").values_list("recipient__username", flat=True))
    assert got == {"oper", "holder"}, "who compressed it and who holds one of its cases; no API key, no bystander"
    line = Notification.objects.get(recipient=operator)
    assert line.url == f"/drift/{case.pk}/" and line.data["severity"] == "high"
    assert not bystander.notifications.exists()


def test_a_case_opened_by_hand_does_not_notify_its_opener(active, archive):
    operator, opener = user("oper", "operator"), user("opener", "reviewer")
    CompressionRun.objects.filter(pk=archive.run_id).update(created_by=operator)
    DriftCase.objects.create(summary=active, session=archive.session, findings=[], severity="low", assignee=opener)
    drift.open_case(active.pk, quote=CONSTRAINT, kind="other", severity="low", note="odd", user=opener)
    assert list(Notification.objects.values_list("recipient__username", "actor_label")) == [("oper", "opener")]


def test_inbox_filters_are_validated(login):
    client = login("viewer")
    assert client.get("/inbox/?show=bogus").status_code == 200
    assert client.get("/api/v1/notifications?limit=0").status_code == 422


# --------------------------------------------------------------------------- who may configure webhooks


@pytest.mark.parametrize("role", ["viewer", "operator", "reviewer"])
def test_only_the_admin_role_sees_or_edits_webhooks(login, role):
    webhook = hook("https://example.invalid/hook")
    client = login(role)
    assert client.get("/settings/webhooks/").status_code == 403
    assert client.get(f"/settings/webhooks/{webhook.pk}/").status_code == 403
    form = {"name": "x", "url": "https://example.invalid/x", "format": "generic", "events": ["run.failed"]}
    assert client.post("/settings/webhooks/", form).status_code == 403
    assert client.post(f"/settings/webhooks/{webhook.pk}/", {"action": "delete"}).status_code == 403
    assert 'href="/settings/webhooks/"' not in html_of(client.get("/"))
    assert client.get("/api/v1/webhooks").status_code == 403
    assert client.get(f"/api/v1/webhooks/{webhook.pk}/deliveries").status_code == 403
    body = {"name": "x", "url": "https://example.invalid/x", "events": ["run.failed"]}
    assert client.post("/api/v1/webhooks", body, content_type="application/json").status_code == 403
    patch = {"url": "https://evil.invalid/"}
    assert client.patch(f"/api/v1/webhooks/{webhook.pk}", patch, content_type="application/json").status_code == 403
    assert client.delete(f"/api/v1/webhooks/{webhook.pk}").status_code == 403
    assert Webhook.objects.get().url == "https://example.invalid/hook"


def test_an_admin_configures_a_webhook_on_its_page_and_sees_the_secret_once(login, receiver, inline):
    admin = login("admin")
    assert 'href="/settings/webhooks/"' in html_of(admin.get("/"))
    bad = admin.post("/settings/webhooks/", {"name": "x", "url": "ftp://x", "format": "generic"})
    assert bad.status_code == 422
    form = {"name": "oncall", "url": receiver.url, "format": "slack", "events": ["run.failed", "drift_case.opened"]}
    form["active"] = "on"
    created = admin.post("/settings/webhooks/", form)
    assert created.status_code == 303
    webhook = Webhook.objects.get()
    assert webhook.format == "slack" and webhook.active
    assert set(webhook.events) == {"drift_case.opened", "run.failed"}
    page = html_of(admin.get(created["Location"]))
    assert webhook.secret in page, "shown once, after creation"
    assert webhook.secret not in html_of(admin.get(created["Location"])), "and not again"
    with inline():
        admin.post(created["Location"], {"action": "test"})
    [request] = receiver.requests
    assert verified(webhook, request) == {"text": "Test event from the compression console, sent by admin1"}
    old = webhook.secret
    admin.post(created["Location"], {"action": "rotate"})
    webhook.refresh_from_db()
    assert webhook.secret != old
    assert AuditEvent.objects.filter(action="webhook.update", object_id=str(webhook.pk)).exists()
    assert not any(old in json.dumps(e.after) for e in AuditEvent.objects.all()), "no secret in the audit log"
    admin.post(created["Location"], {"action": "delete"})
    assert not Webhook.objects.exists()


def test_an_admin_key_configures_webhooks_over_the_api(login, receiver, inline):
    admin = login("admin")
    body = {"name": "generic", "url": receiver.url, "events": ["run.failed"], "format": "generic"}
    made = admin.post("/api/v1/webhooks", body, content_type="application/json")
    assert made.status_code == 201, made.content
    data = made.json()
    webhook = Webhook.objects.get()
    assert data["secret"] == webhook.secret and data["events"] == ["run.failed"]
    assert "secret" not in admin.get(f"/api/v1/webhooks/{webhook.pk}").json()
    unknown = {**body, "events": ["bogus"]}
    assert admin.post("/api/v1/webhooks", unknown, content_type="application/json").status_code == 422
    bad_url = {**body, "url": "file:///etc/passwd"}
    assert admin.post("/api/v1/webhooks", bad_url, content_type="application/json").status_code == 422
    with inline():
        notifications.ping(webhook, admin.user)
    [delivery] = admin.get(f"/api/v1/webhooks/{webhook.pk}/deliveries").json()
    assert delivery["status"] == "delivered" and delivery["attempt_rows"][0]["status_code"] == 200
    off = admin.patch(f"/api/v1/webhooks/{webhook.pk}", {"active": False}, content_type="application/json")
    assert off.status_code == 200 and off.json()["active"] is False and "secret" not in off.json()
    assert admin.get(f"/api/v1/webhooks/{webhook.pk}/deliveries?status=bogus").status_code == 422
    rotated = admin.patch(f"/api/v1/webhooks/{webhook.pk}", {"rotate_secret": True}, content_type="application/json")
    assert rotated.status_code == 200 and rotated.json()["secret"] != data["secret"]
    webhook.refresh_from_db()
    assert rotated.json()["secret"] == webhook.secret
    assert admin.delete(f"/api/v1/webhooks/{webhook.pk}").status_code == 204


def test_the_django_admin_lists_webhooks_and_deliveries(superuser):
    hook("https://example.invalid/hook")
    for path in ("webhook", "webhookdelivery", "notification", "webhook/add"):
        assert superuser.get(f"/admin/console/{path}/").status_code == 200, path


def test_a_switched_off_webhook_gets_nothing_new(receiver, inline, archive, active):
    webhook = hook(receiver.url)
    notifications.update_webhook(webhook.pk, {"active": False}, None)
    with inline():
        drifting_case(archive, active)
    assert not receiver.requests and not WebhookDelivery.objects.exists()
    assert Session.objects.exists()
    assert not WebhookAttempt.objects.exists()


# --------------------------------------------------------------------------- a real worker


@pytest.mark.worker
@pytest.mark.django_db(transaction=True)
def test_a_real_worker_delivers_and_retries_through_the_broker(receiver):
    from tests.console.workers import broker_env, celery_worker, default_queue, unique_queue, wait_until

    webhook = hook(receiver.url)
    receiver.script = [500]
    name = unique_queue()
    env = broker_env() | {"WEBHOOK_RETRY_SECONDS": "0.5", "WEBHOOK_MAX_ATTEMPTS": "3", "CONSOLE_URL": ""}
    with celery_worker(env, name) as worker, default_queue(name):
        delivery = notifications.ping(webhook, User.objects.create_user("pinger"))  # sent on commit
        done = wait_until(
            lambda: WebhookDelivery.objects.get(pk=delivery.pk),
            lambda d: d.status in ("delivered", "failed"),
            60,
            f"delivery {delivery.pk}",
            worker,
        )
    assert done.status == "delivered" and done.attempts == 2
    assert list(done.attempt_rows.order_by("number").values_list("status_code", flat=True)) == [500, 200]
    first, second = receiver.requests
    assert first["headers"]["X-Compression-Delivery"] == second["headers"]["X-Compression-Delivery"]
    assert int(second["headers"]["X-Compression-Timestamp"]) >= int(first["headers"]["X-Compression-Timestamp"])
    for request in receiver.requests:
        verified(webhook, request)
