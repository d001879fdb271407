"""The pages work under the Content-Security-Policy (issue 14, item 9): no page logs a CSP violation (inline
script, eval, an injected <style>), and what was inline script before (the promote box's Cancel) still works."""

from __future__ import annotations

import re
from typing import Any

import pytest
from playwright.sync_api import Page, expect

from console.celery import tasks_inline
from console.models import Archive
from console.services import summaries
from tests.browser.accounts import log_in, user
from tests.console.factories import compress_now, sample_session

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


def test_the_pages_run_under_the_policy_without_a_violation(live_server: Any, page: Page) -> None:
    session = sample_session()
    run = compress_now(session)
    archive = Archive.objects.get(run=run)
    with tasks_inline():
        draft = summaries.request_resummarize(archive.pk, summarizer="extractive")
    summaries.execute_resummarize(draft.pk)
    user("admin1", "admin")
    violations: list[str] = []
    page.on("console", lambda m: violations.append(m.text) if re.search("Content.Security.Policy", m.text) else None)
    page.on("pageerror", lambda exc: violations.append(str(exc)))
    base = live_server.url

    log_in(page, base, "admin1")
    for path in [
        "/",
        f"/sessions/{session.pk}/",
        f"/runs/{run.pk}/",
        f"/runs/{run.pk}/diff",
        f"/archives/{archive.pk}/",
        f"/archives/{archive.pk}/compare",
        f"/summaries/{draft.pk}/",
        "/drift/",
        "/dashboard/",
        "/audit/",
        "/inbox/",
        "/settings/webhooks/",
        "/api/v1/docs",
    ]:
        page.goto(f"{base}{path}")
        page.wait_for_load_state("networkidle")
    expect(page.locator("#swagger-ui .opblock").first).to_be_visible()  # Swagger UI ran under the policy

    # the promote confirmation htmx opens closes with Cancel (once an inline hx-on handler)
    page.goto(f"{base}/summaries/{draft.pk}/")
    page.locator("#promote-region").page.get_by_role("link", name="Promote…").first.click()
    box = page.locator(".promote-box")
    expect(box).to_be_visible()
    page.evaluate("window.stayed = true")  # gone if Cancel navigates instead of closing the box
    box.get_by_role("link", name="Cancel").click()
    expect(box).to_have_count(0)
    assert page.evaluate("window.stayed") is True
    assert violations == []
    assert page.evaluate("htmx.config.includeIndicatorStyles") is False
