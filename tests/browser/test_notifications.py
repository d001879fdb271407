"""Notifications in headless Chromium, in English and Chinese: an admin adds a webhook on its page and sends a
test event to a receiver on loopback (a 500, then the retry lands); a reviewer mentioned and assigned by a
teammate sees the badge, opens the inbox and follows a line to the case. Tasks run in this process (eager),
so the delivery is visible as soon as the page reloads. Under `make screenshots`, screenshots go to
artifacts/screenshots/."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from typing import Any

import pytest
from playwright.sync_api import Page, expect

from console.celery import tasks_inline
from console.models import DriftCase, Summary, WebhookDelivery
from console.services import drift, notifications
from tests.browser.accounts import log_in, user
from tests.console.factories import compress_now, sample_session
from tests.fakes.webhook_receiver import Receiver

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

TIMEOUT = 20_000


@pytest.fixture
def receiver() -> Iterator[Receiver]:
    with Receiver() as server:
        yield server


@pytest.fixture
def inline(settings: Any) -> Iterator[None]:
    settings.WEBHOOK_RETRY_SECONDS = 0
    settings.WEBHOOK_MAX_ATTEMPTS = 3
    with tasks_inline():
        yield


def a_case() -> DriftCase:
    """A compressed session and a draft that inverts "don't deploy": the drift check opens a case."""
    run = compress_now(sample_session())
    active = run.archive.summaries.get(status=Summary.Status.ACTIVE)
    summary = Summary.objects.create(
        archive=run.archive,
        text=active.text.replace("but don't deploy; just run the job locally", "and deploy it now"),
        status=Summary.Status.DRAFT,
        summary_id="sum_browserdrift0001",
        provenance={"generator": "openai", "model": "gpt-test", "trigger": "resummarize"},
    )
    drift.check_summary_drift(summary.pk)
    return DriftCase.objects.get(summary=summary)


def chinese(page: Page, base: str) -> None:
    page.context.add_cookies([{"name": "django_language", "value": "zh-hans", "url": base}])


def test_an_admin_adds_a_webhook_and_a_reviewer_reads_the_inbox(
    live_server: Any, page: Page, screenshot: Any, receiver: Receiver, inline: None
) -> None:
    admin = user("ada.admin", "admin")
    alice, bob = user("alice", "reviewer"), user("bob", "reviewer")
    errors: list[str] = []
    page.on("pageerror", lambda exc: errors.append(str(exc)))
    page.set_default_timeout(TIMEOUT)
    base = live_server.url

    # the admin adds a webhook from the header link; the secret is shown once
    log_in(page, base, admin.username)
    page.get_by_role("link", name="Webhooks").click()
    expect(page.get_by_role("heading", name="Webhooks")).to_be_visible()
    page.fill("#id_name", "On-call channel")
    page.fill("#id_url", receiver.url)
    page.select_option("#id_format", "generic")
    page.get_by_role("button", name="Add webhook").click()
    expect(page.locator("#webhook-secret")).to_contain_text("whsec_")
    secret = page.locator("#webhook-secret").inner_text().strip()

    # a test event: the receiver answers 500 once; the retry lands; both attempts are listed
    receiver.script = [500]
    page.get_by_role("button", name="Send a test event").click()
    delivery = WebhookDelivery.objects.get()
    row = page.locator(f"#d-{delivery.pk}")
    expect(row).to_contain_text("delivered")
    expect(row).to_contain_text("HTTP 500")
    expect(row).to_contain_text("HTTP 200")
    expect(page.locator("#webhook-secret")).to_have_count(0)
    assert len(receiver.requests) == 2
    for request in receiver.requests:
        headers = request["headers"]
        assert notifications.verify(
            secret, request["body"], headers["X-Compression-Signature"], headers["X-Compression-Timestamp"]
        )
    assert json.loads(receiver.requests[1]["body"])["event"] == "ping"
    screenshot("notifications-1-webhook-en")
    page.goto(f"{base}/settings/webhooks/")
    expect(page.locator("table.webhooks")).to_contain_text("1 delivered")
    screenshot("notifications-2-webhooks-en")

    # a teammate mentions bob and assigns him the case (two inbox lines)
    case = a_case()
    drift.add_comment(case, "@bob could you look at the deploy line?", "", alice)
    drift.update_drift_case(case.pk, {"assignee": "bob"}, alice)

    page.context.clear_cookies()
    log_in(page, base, bob.username)
    badge = page.locator("header .inbox-badge")
    expect(badge).to_have_attribute("data-unread", "2")
    screenshot("notifications-3-badge-en", of=page.locator("header.topbar"))
    page.locator("header .inbox-link").click()
    expect(page.get_by_role("heading", name="Inbox")).to_be_visible()
    expect(page.locator(".inbox-row.unread")).to_have_count(2)
    expect(page.locator(".inbox")).to_contain_text(f"alice mentioned you on drift case #{case.pk}")
    expect(page.locator(".inbox")).to_contain_text(f"alice assigned drift case #{case.pk} (high)")
    screenshot("notifications-4-inbox-en")

    # following the mention opens the case and leaves one unread
    page.locator(".kind-mention button.inbox-open").click()
    expect(page).to_have_url(re.compile(rf"/drift/{case.pk}/"))
    expect(badge).to_have_attribute("data-unread", "1")

    # in Chinese
    chinese(page, base)
    page.goto(f"{base}/inbox/?show=all")
    expect(page.get_by_role("heading", name="收件箱")).to_be_visible()
    expect(page.locator(".inbox")).to_contain_text(f"alice 在漂移案例 #{case.pk} 中提及了你")
    expect(page.locator(".inbox")).to_contain_text("指派给了你")
    expect(page.get_by_role("button", name="全部标为已读")).to_be_visible()
    screenshot("notifications-5-badge-zh", of=page.locator("header.topbar"))
    screenshot("notifications-6-inbox-zh")
    page.get_by_role("button", name="全部标为已读").click()
    expect(page.locator("header .inbox-badge")).to_have_count(0)
    expect(page.locator(".empty")).to_contain_text("没有未读通知")

    page.context.clear_cookies()
    chinese(page, base)
    log_in(page, base, admin.username)
    page.goto(f"{base}/settings/webhooks/{delivery.webhook_id}/")
    expect(page.get_by_role("heading", name="投递", exact=True)).to_be_visible()
    expect(page.locator(f"#d-{delivery.pk}")).to_contain_text("已送达")
    screenshot("notifications-7-webhook-zh")
    page.goto(f"{base}/settings/webhooks/")
    expect(page.get_by_role("heading", name="添加 Webhook")).to_be_visible()
    screenshot("notifications-8-webhooks-zh")
    assert not errors, errors
