"""Issue 16 in headless Chromium: a "nothing to compress" run, a degraded run and the provenance label,
in English and Chinese. Data is made in-process (tasks inline); screenshots (`make screenshots`) go to
artifacts/screenshots/."""

from __future__ import annotations

import re
from typing import Any

import pytest
from playwright.sync_api import Page, expect

from console.models import Archive, Summary
from console.services.drift import check_summary_drift
from console.services.sessions import ImportedSession, create_session
from console.services.summaries import execute_resummarize, promote_summary, request_resummarize
from tests.browser.accounts import log_in, user
from tests.compression.builders import assistant, system
from tests.compression.builders import user as said
from tests.console.factories import compress_now, sample_session

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


def chinese(page: Page, base: str) -> None:
    page.context.add_cookies([{"name": "django_language", "value": "zh-hans", "url": base}])


def test_run_outcomes_in_both_languages(live_server: Any, page: Page, screenshot: Any) -> None:
    errors: list[str] = []
    page.on("pageerror", lambda exc: errors.append(str(exc)))
    base = live_server.url
    tiny = create_session(
        ImportedSession(key="test:tiny", messages=[said("hello"), assistant("hi"), said("bye")], metadata={})
    )
    nothing = compress_now(tiny)
    assert nothing.status == "nothing"
    messages = [system(), said("Rewrite the export job. Requirements: " + "keep every column stable; " * 300)]
    for n in range(12):
        messages += [said(f"step {n}: check batch {n}"), assistant(f"batch {n} checked: " + "all rows match. " * 40)]
    messages.append(said("now summarise what changed"))
    big = create_session(ImportedSession(key="test:over", messages=messages, metadata={}, context_window_tokens=2000))
    degraded = compress_now(big, config={})
    assert degraded.status == "degraded"
    log_in(page, base, user("ops", "viewer").username)

    page.goto(f"{base}/runs/{nothing.pk}/")
    expect(page.locator(".run-head .status-badge")).to_have_text("nothing to compress")
    expect(page.locator("#nothing-to-compress")).to_contain_text("Nothing to compress.")
    expect(page.locator("#nothing-to-compress")).to_contain_text("not counted as a compression")
    expect(page.locator("#stages-not-applied")).to_contain_text("Nothing was saved.")
    screenshot("outcome-1-run-nothing-en")
    page.goto(f"{base}/runs/{degraded.pk}/")
    expect(page.locator(".run-head .status-badge")).to_have_text("degraded")
    screenshot("outcome-2-run-degraded-en")
    page.goto(f"{base}/sessions/{tiny.pk}/")
    expect(page.locator(f"#run-{nothing.pk}")).to_contain_text("nothing to compress")

    chinese(page, base)
    page.goto(f"{base}/runs/{nothing.pk}/")
    expect(page.locator(".run-head .status-badge")).to_have_text("无可压缩")
    expect(page.locator("#nothing-to-compress")).to_contain_text("无可压缩。")
    expect(page.locator("#stages-not-applied")).to_contain_text("未应用")
    screenshot("outcome-3-run-nothing-zh")
    page.goto(f"{base}/runs/{degraded.pk}/")
    screenshot("outcome-4-run-degraded-zh")
    assert not errors, errors


def test_the_provenance_label_in_both_languages(live_server: Any, page: Page, screenshot: Any) -> None:
    errors: list[str] = []
    page.on("pageerror", lambda exc: errors.append(str(exc)))
    base = live_server.url
    run = compress_now(sample_session())
    archive = Archive.objects.get(run=run)
    operator = user("li.operator", "operator")
    draft = request_resummarize(archive.pk, summarizer="extractive", focus_topic="batch size", user=operator)
    execute_resummarize(draft.pk)
    check_summary_drift(draft.pk)
    promote_summary(draft.pk, user=operator)
    draft = Summary.objects.get(pk=draft.pk)
    log_in(page, base, operator.username)

    page.goto(f"{base}/summaries/{draft.pk}/")
    label = page.locator("aside .provenance")
    expect(label.get_by_role("heading", name="Provenance")).to_be_visible()
    expect(label).to_contain_text("— (no prompt: extractive)")
    expect(label).to_contain_text(f"sha256 {archive.sha256[:16]}")
    expect(label).to_contain_text("window 4,000 · trigger 2,800")
    expect(label).to_contain_text("promoted by li.operator")
    expect(label).not_to_contain_text(re.compile(r"Tokens\s+0 →"))
    screenshot("provenance-1-summary-en")

    chinese(page, base)
    page.goto(f"{base}/summaries/{draft.pk}/")
    label = page.locator("aside .provenance")
    expect(label.get_by_role("heading", name="来源标注")).to_be_visible()
    expect(label).to_contain_text("无提示词：extractive")
    expect(label).to_contain_text("由 li.operator 采用")
    expect(label).to_contain_text(re.compile(r"窗口 4,?000 · 触发点 2,?800"))  # separators: the locale's
    screenshot("provenance-2-summary-zh")
    assert not errors, errors
