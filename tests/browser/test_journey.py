"""The operator's journey in headless Chromium, against a live server and a real Celery worker.

log in → open a session → compress with live progress → open the run → step through the diff
→ open the summary and its provenance → re-summarize → compare → promote. The model is the fake
OpenAI-compatible server on loopback, answering slowly enough that the progress is visible.
Under `make screenshots`, screenshots of every page go to artifacts/screenshots/, in English and Chinese.
"""

from __future__ import annotations

import re
from typing import Any

import pytest
from playwright.sync_api import Page, expect

from console.models import CompressionRun, Session, Summary
from tests.browser.accounts import log_in, user
from tests.console.factories import sample_session
from tests.fakes.openai_server import Behaviour

pytestmark = [pytest.mark.browser, pytest.mark.worker, pytest.mark.django_db(transaction=True)]

TIMEOUT = 45_000  # ms: the file broker polls once a second; the model answers after 1.5 s


def test_the_operator_journey(live_server: Any, page: Page, screenshot: Any, worker: None, model, settings) -> None:
    settings.OPENAI_BASE_URL = model.base_url  # the live server offers the same summarizers as the worker
    settings.OPENAI_API_KEY = "test"
    model.reset()
    model.script(default=Behaviour(kind="slow", delay=1.5))
    session = sample_session()
    user("operator1", "operator")
    errors: list[str] = []
    page.on("pageerror", lambda exc: errors.append(str(exc)))
    page.set_default_timeout(TIMEOUT)
    base = live_server.url

    log_in(page, base, "operator1")
    screenshot("journey-1-sessions-en")
    page.get_by_role("link", name=session.key).click()
    expect(page.get_by_role("heading", name=session.key)).to_be_visible()
    screenshot("journey-2-session-en")

    # compress with a focus topic and a small window, and watch the stages go by
    page.fill("#id_focus_topic", "the export batch size")
    page.locator("details.overrides summary").click()
    page.fill("#id_context_window_tokens", "4000")
    page.get_by_role("button", name="Compress now").click()
    expect(page.locator(".run-progress.active")).to_be_visible()
    expect(page.locator(".run-progress .stage.current")).to_be_visible()
    screenshot("journey-3-progress-en")
    expect(page.locator(".run-progress.finished")).to_be_visible()
    expect(page.locator(".run-progress.finished")).to_contain_text("Compressed")
    run = CompressionRun.objects.get(session=session)
    assert run.status == CompressionRun.Status.SUCCEEDED and run.focus_topic == "the export batch size"
    expect(page.locator("#runs")).to_contain_text(f"#{run.pk}")  # refreshed out of band
    screenshot("journey-4-compressed-en")

    # the run: stage breakdown and the diff, stepped through with the keyboard
    page.locator(".run-progress .open-run").click()
    expect(page).to_have_url(re.compile(rf"/runs/{run.pk}/"))
    expect(page.locator("[data-nav]").first).to_be_visible()
    screenshot("journey-5-run-en")
    page.keyboard.press("j")
    first = page.locator("[data-nav].nav-current")
    expect(first).to_have_count(1)
    first_id = first.get_attribute("id")
    page.keyboard.press("j")
    expect(page.locator("[data-nav].nav-current")).not_to_have_attribute("id", first_id or "")
    assert "#" in page.url  # the position is a deep link
    page.keyboard.press("k")
    expect(page.locator("[data-nav].nav-current")).to_have_attribute("id", first_id or "")
    page.get_by_role("link", name=re.compile("^Unified")).click()
    expect(page).to_have_url(re.compile(r"view=unified"))
    screenshot("journey-6-run-unified-en")

    # the summary and its provenance label
    summary = Summary.objects.get(run=run)
    page.goto(f"{base}/summaries/{summary.pk}/")
    label = page.locator(".provenance").first
    expect(label).to_contain_text(re.compile("not instructions", re.I))
    expect(label).to_contain_text("the export batch size")
    expect(label).to_contain_text("127.0.0.1")  # the endpoint host
    screenshot("journey-7-summary-en")

    # re-summarize from the archive (offline summarizer) and compare
    page.goto(f"{base}/archives/{summary.archive_id}/")
    expect(page.locator(".checksum")).to_contain_text(re.compile("verified", re.I))
    page.select_option("#id_summarizer", "extractive")
    page.get_by_role("button", name="Re-summarize").click()
    expect(page.locator(".progress-box")).to_be_visible()
    screenshot("journey-8-resummarize-en")
    page.get_by_role("link", name="Compare with the current version").click()
    expect(page.locator("#text-diff")).to_be_visible()
    screenshot("journey-9-compare-en")

    # promote the new version, after a confirmation that says what will change
    page.get_by_role("link", name=re.compile("Promote B")).click()
    confirm = page.locator(".promote-box")
    expect(confirm).to_contain_text(session.key)
    screenshot("journey-10-promote-confirm-en")
    confirm.get_by_role("button", name="Promote this version").click()
    expect(page.locator(".promote-region")).to_contain_text("Promoted")
    screenshot("journey-11-promoted-en")
    new = Summary.objects.exclude(pk=summary.pk).get(archive=summary.archive)
    new.refresh_from_db()
    assert new.status == Summary.Status.ACTIVE
    assert any(new.summary_id in str(m.get("content")) for m in Session.objects.get(pk=session.pk).messages())
    assert errors == []

    # the same pages in Chinese
    page.context.add_cookies([{"name": "django_language", "value": "zh-hans", "url": base}])
    for name, path in [
        ("sessions", "/"),
        ("session", f"/sessions/{session.pk}/"),
        ("run", f"/runs/{run.pk}/"),
        ("summary", f"/summaries/{summary.pk}/"),
        ("archive", f"/archives/{summary.archive_id}/"),
        ("compare", f"/archives/{summary.archive_id}/compare?a={summary.pk}&b={new.pk}"),
        ("promote", f"/summaries/{summary.pk}/promote"),
    ]:
        page.goto(base + path)
        expect(page.locator("html")).to_have_attribute("lang", "zh-hans")
        screenshot(f"journey-{name}-zh")
    assert errors == []
