"""Webhooks never turn the console into a probe of its own network (issue 33).

A URL whose host is, or resolves to, an address that is not public is refused when it is saved (service, API
and page alike) and again at send time, in every spelling; a name is resolved once per send and the connection
goes to the address checked (DNS rebinding); redirects are answers, never followed; of an answer only the status
and a short masked snippet are kept. ``WEBHOOK_ALLOWED_HOSTS`` allows a private receiver by name; the suite
allows ``127.0.0.1`` (``tests/conftest.py``) for the other webhook tests' loopback receiver.
"""

from __future__ import annotations

import json
import socket
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import pytest
from django.contrib.auth.models import User
from django.test import Client
from django.utils import translation

from console.celery import tasks_inline
from console.errors import InvalidInput
from console.models import Webhook, WebhookAttempt, WebhookDelivery
from console.services import egress, notifications
from tests.console.test_api import issue_key
from tests.fakes.webhook_receiver import Receiver

#: (address class, URL): every class of address the policy refuses, in the spellings an attacker would try
REFUSED: list[tuple[str, str]] = [
    ("loopback", "http://127.0.0.1:5432/"),
    ("loopback", "http://127.1/"),
    ("loopback", "http://2130706433/"),
    ("loopback", "http://0x7f000001/"),
    ("loopback", "http://0177.0.0.1/"),
    ("loopback", "http://0x7f.0.0.1/"),
    ("loopback", "http://127.0.0.1./"),
    ("loopback", "http://127.000.000.001/"),
    ("loopback", "http://017700000001/"),
    ("loopback", "http://user:pw@127.0.0.1/"),
    ("loopback", "http://[::127.0.0.1]/"),
    ("loopback", "http://[::1]:8000/"),
    ("loopback", "http://[0:0:0:0:0:0:0:1]/"),
    ("loopback", "http://[::ffff:127.0.0.1]/"),
    ("loopback", "http://[::ffff:7f00:1]/"),
    ("loopback", "http://[64:ff9b::7f00:1]/"),
    ("loopback", "http://[2002:7f00:1::]/"),
    ("loopback", "http://localhost:6379/"),
    ("loopback", "http://LOCALHOST/"),
    ("unspecified", "http://0.0.0.0/"),
    ("unspecified", "http://0/"),
    ("unspecified", "http://[::]/"),
    ("link-local", "http://169.254.169.254/latest/meta-data/"),
    ("link-local", "http://2852039166/latest/meta-data/"),
    ("link-local", "http://0xa9fea9fe/"),
    ("link-local", "http://[::ffff:169.254.169.254]/"),
    ("link-local", "http://[fe80::1]/"),
    ("link-local", "http://[fe80::1%25eth0]/"),
    ("link-local", "http://[::ffff:a9fe:a9fe]/"),
    ("metadata", "http://metadata.google.internal/computeMetadata/v1/"),
    ("metadata", "http://Metadata.Google.Internal./"),
    ("private", "http://10.0.0.1/"),
    ("private", "http://10.1/"),
    ("private", "http://public.example@10.0.0.1/"),
    ("private", "http://167772161/"),
    ("private", "http://172.16.0.1/"),
    ("private", "http://172.31.255.254/"),
    ("private", "http://192.168.1.1/"),
    ("private", "http://[::ffff:192.168.1.1]/"),
    ("private", "http://[fd00::1]/"),
    ("private", "http://[fd00:ec2::254]/"),
    ("private", "http://[fc00::1]/"),
    ("not public", "http://100.64.0.1/"),
    ("multicast", "http://224.0.0.1/"),
    ("multicast", "http://[ff02::1]/"),
    ("reserved", "http://240.0.0.1/"),
    ("reserved", "http://255.255.255.255/"),
]

#: what the refusal says for each class
SAYS = {
    "loopback": "loopback",
    "unspecified": "unspecified",
    "link-local": "link-local",
    "metadata": "metadata",
    "private": "private",
    "not public": "not a public address",
    "multicast": "multicast",
    "reserved": "reserved",
}

PUBLIC = ["http://93.184.216.34/hook", "https://[2606:2800:220:1:248:1893:25c8:1946]/hook", "http://8.8.8.8:8080/in"]


@pytest.fixture(autouse=True)
def english() -> Iterator[None]:
    """Refusals are in the active language: English here, whatever a page request left active in this thread."""
    with translation.override("en"):
        yield


@pytest.fixture
def no_allowed_hosts(settings: Any) -> None:
    settings.WEBHOOK_ALLOWED_HOSTS = []
    settings.WEBHOOK_RETRY_SECONDS = 0
    settings.WEBHOOK_MAX_ATTEMPTS = 3
    settings.WEBHOOK_TIMEOUT = 2


@pytest.fixture
def receiver() -> Iterator[Receiver]:
    with Receiver() as server:
        yield server


def create(url: str) -> Webhook:
    return notifications.create_webhook(
        name="probe", url=url, format="generic", events=[notifications.RUN_FAILED], active=True, user=None
    )


def stored(url: str) -> Webhook:
    """A webhook saved before the policy existed (or behind its back): only the send-time check stands."""
    return Webhook.objects.create(
        name="old", url=url, format="generic", events=[notifications.RUN_FAILED], active=True, secret="whsec_x"
    )


def send(webhook: Webhook) -> WebhookDelivery:
    with tasks_inline():
        delivery = notifications.ping(webhook, User.objects.create_user(f"pinger{WebhookDelivery.objects.count()}"))
        notifications.deliver(delivery.pk)
    delivery.refresh_from_db()
    return delivery


@pytest.mark.parametrize(("kind", "url"), REFUSED, ids=[f"{k}:{u}" for k, u in REFUSED])
def test_each_address_class_in_each_spelling_is_refused_when_saved(db, no_allowed_hosts, kind, url):
    with pytest.raises(InvalidInput, match=SAYS[kind]):
        create(url)
    assert not Webhook.objects.exists()
    with pytest.raises(egress.Refused, match=SAYS[kind]):
        egress.check(url, must_resolve=True)


@pytest.mark.parametrize(("kind", "url"), REFUSED, ids=[f"{k}:{u}" for k, u in REFUSED])
def test_each_is_refused_at_send_time_too_without_a_connection(db, no_allowed_hosts, kind, url, monkeypatch):
    connected: list[Any] = []
    monkeypatch.setattr(socket, "create_connection", lambda *a, **k: connected.append(a) or socket.socket())
    delivery = send(stored(url))
    attempt = WebhookAttempt.objects.get(delivery=delivery)  # one: a refusal is not retried
    assert attempt.status_code is None and attempt.error.startswith("refused:") and SAYS[kind] in attempt.error
    assert delivery.status == WebhookDelivery.Status.FAILED
    assert not connected, "nothing may be connected to"


@pytest.mark.parametrize("url", PUBLIC)
def test_public_addresses_are_accepted(db, no_allowed_hosts, url):
    assert create(url).url == url


def test_a_name_that_does_not_resolve_yet_is_saved_and_refused_at_send(db, no_allowed_hosts):
    webhook = create("https://receiver.invalid/hook")
    delivery = send(webhook)
    attempts = WebhookAttempt.objects.filter(delivery=delivery)
    assert attempts.count() == 3, "a name that does not resolve may resolve later: retried"
    assert all("could not resolve receiver.invalid" in a.error for a in attempts)


def test_the_api_and_the_page_refuse_too(db, no_allowed_hosts, login):
    key = issue_key("egress-admin", "admin")
    client = Client()
    auth = {"Authorization": f"Bearer {key}"}
    body = {"name": "x", "url": "http://169.254.169.254/latest/meta-data/", "events": ["run.failed"]}
    created = client.post("/api/v1/webhooks", json.dumps(body), content_type="application/json", headers=auth)
    assert created.status_code == 422 and "link-local" in created.json()["detail"], created.content
    good = client.post(
        "/api/v1/webhooks", json.dumps(body | {"url": "http://93.184.216.34/"}), content_type="application/json",
        headers=auth,
    )  # fmt: skip
    assert good.status_code == 201, good.content
    patched = client.patch(
        f"/api/v1/webhooks/{good.json()['id']}", json.dumps({"url": "http://[::1]/"}),
        content_type="application/json", headers=auth,
    )  # fmt: skip
    assert patched.status_code == 422 and "loopback" in patched.json()["detail"]
    assert Webhook.objects.get().url == "http://93.184.216.34/"
    admin = login("admin")
    page = admin.post(
        "/settings/webhooks/",
        {"name": "p", "url": "http://localhost:5432/", "format": "generic", "events": ["run.failed"]},
    )
    assert page.status_code in (200, 400, 422) and Webhook.objects.count() == 1
    assert "loopback" in page.content.decode()
    chinese = admin.post(
        "/settings/webhooks/",
        {"name": "p", "url": "http://10.0.0.1/", "format": "generic", "events": ["run.failed"]},
        HTTP_ACCEPT_LANGUAGE="zh-hans",
    ).content.decode()
    assert "已拒绝：10.0.0.1 是内网地址" in chinese and Webhook.objects.count() == 1


def test_an_admin_allows_a_private_receiver_by_name_only(db, settings, receiver):
    settings.WEBHOOK_ALLOWED_HOSTS = ["127.0.0.1"]
    assert send(create(receiver.url)).status == WebhookDelivery.Status.DELIVERED
    port = receiver.server.server_address[1]
    for other_spelling in (f"http://2130706433:{port}/hook", f"http://localhost:{port}/hook"):
        with pytest.raises(InvalidInput, match="loopback"):
            create(other_spelling)
    assert len(receiver.requests) == 1
    settings.WEBHOOK_ALLOWED_HOSTS = [".hooks.test"]
    assert egress.allowed_by_name("a.hooks.test") and egress.allowed_by_name("hooks.test")
    assert not egress.allowed_by_name("evilhooks.test")


@contextmanager
def dns(monkeypatch: Any, answers: dict[str, list[Any]]) -> Iterator[list[str]]:
    """Names resolve to the next of their answers (an address or a list of them; the last one repeats); yields
    the names asked, in order."""
    asked: list[str] = []
    real = socket.getaddrinfo

    def getaddrinfo(host: str, port: Any, *args: Any, **kwargs: Any) -> Any:
        if host not in answers:
            return real(host, port, *args, **kwargs)
        asked.append(host)
        queue = answers[host]
        answer = queue.pop(0) if len(queue) > 1 else queue[0]
        return [
            (socket.AF_INET6 if ":" in address else socket.AF_INET, socket.SOCK_STREAM, 6, "", (address, port))
            for address in ([answer] if isinstance(answer, str) else answer)
        ]

    monkeypatch.setattr(socket, "getaddrinfo", getaddrinfo)
    yield asked


def test_dns_rebinding_is_refused_at_send_time(db, no_allowed_hosts, receiver, monkeypatch):
    port = receiver.server.server_address[1]
    with dns(monkeypatch, {"rebind.test": ["93.184.216.34", "127.0.0.1"]}):
        webhook = create(f"http://rebind.test:{port}/hook")  # public when saved
        delivery = send(webhook)  # loopback when sent
    attempt = WebhookAttempt.objects.get(delivery=delivery)
    assert "resolved to 127.0.0.1, a loopback address" in attempt.error and delivery.status == "failed"
    assert not receiver.requests


def test_the_connection_goes_to_the_address_checked(db, settings, receiver, monkeypatch):
    """Resolved once per send: a second answer (here, an address where nothing listens) is never used."""
    settings.WEBHOOK_ALLOWED_HOSTS = ["hooks.test"]
    port = receiver.server.server_address[1]
    with dns(monkeypatch, {"hooks.test": ["127.0.0.1", "127.0.0.1", "192.0.2.1"]}) as asked:
        webhook = create(f"http://hooks.test:{port}/hook")
        delivery = send(webhook)
    assert delivery.status == WebhookDelivery.Status.DELIVERED, delivery.last_error
    assert asked == ["hooks.test", "hooks.test"], "once when saved, once when sent"
    assert receiver.requests[0]["headers"]["Host"] == f"hooks.test:{port}"


def test_a_name_with_several_addresses_is_tried_address_by_address(db, settings, receiver, monkeypatch):
    """Nothing listens on 127.0.0.2 (the receiver is bound to 127.0.0.1): refused, then the next address."""
    settings.WEBHOOK_ALLOWED_HOSTS = ["hooks.test"]
    port = receiver.server.server_address[1]
    with dns(monkeypatch, {"hooks.test": [["127.0.0.2", "127.0.0.1"]]}):
        delivery = send(create(f"http://hooks.test:{port}/hook"))
    assert delivery.status == WebhookDelivery.Status.DELIVERED and len(receiver.requests) == 1


def test_several_addresses_are_refused_if_one_is_not_public(db, no_allowed_hosts, monkeypatch):
    with (
        dns(monkeypatch, {"mixed.test": [["93.184.216.34", "10.0.0.7"]]}),
        pytest.raises(InvalidInput, match="10.0.0.7"),
    ):
        create("http://mixed.test/hook")


def test_a_redirect_is_an_answer_not_followed(db, settings, receiver):
    settings.WEBHOOK_ALLOWED_HOSTS = ["127.0.0.1"]
    with Receiver() as elsewhere:
        receiver.script, receiver.location = [302], elsewhere.url
        delivery = send(create(receiver.url))
        assert not elsewhere.requests
    assert delivery.status == WebhookDelivery.Status.PENDING
    assert WebhookAttempt.objects.get(delivery=delivery).status_code == 302


def test_only_the_status_and_a_short_masked_snippet_of_an_answer_are_kept(db, settings, receiver, login):
    settings.WEBHOOK_ALLOWED_HOSTS = ["127.0.0.1"]
    receiver.script = [500]
    receiver.answer = b"internal: password=PlantReceiverPw1 " + b"x" * 2000 + b" TAIL-OF-THE-ANSWER"
    delivery = send(create(receiver.url))
    attempt = WebhookAttempt.objects.get(delivery=delivery)
    assert attempt.status_code == 500 and attempt.error.startswith("HTTP 500: internal: password=[secret:")
    assert len(attempt.error) <= len("HTTP 500: ") + egress.SNIPPET_CHARS + 20
    assert "PlantReceiverPw1" not in attempt.error and "TAIL-OF-THE-ANSWER" not in attempt.error
    assert delivery.last_error == attempt.error
    page = login("admin").get(f"/settings/webhooks/{delivery.webhook_id}/").content.decode()
    assert "PlantReceiverPw1" not in page and "TAIL-OF-THE-ANSWER" not in page
