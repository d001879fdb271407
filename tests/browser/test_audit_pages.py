"""The pages an auditor reads, in headless Chromium, in English and Chinese: every ``#N`` of a summary
lands on its archived original (after a second compression too), the run diff shows the originals
beside their summary with in-page links, and the session page searches, jumps to the message that
matched and shows numbers and times. Under `make screenshots`, screenshots go to artifacts/screenshots/."""

from __future__ import annotations

import re
from typing import Any

import pytest
from playwright.sync_api import Page, expect

from console.models import Archive, Summary
from console.services.sessions import append_messages
from tests.browser.accounts import log_in, user
from tests.console.factories import compress_now, sample_session

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


def more_turns(n: int) -> list[dict[str, str]]:
    out = []
    for i in range(n):
        out.append({"role": "user", "content": f"Step {i}: keep /srv/app/config-{i}.yaml as it is and check the logs."})
        out.append({"role": "assistant", "content": f"Checked step {i}: " + "the log shows nothing unusual. " * 40})
    return out


@pytest.mark.parametrize("lang", ["en", "zh"])
def test_references_run_diff_and_session_search(live_server: Any, page: Page, screenshot: Any, lang: str) -> None:
    session = sample_session()
    assert compress_now(session).applied
    append_messages(session.key, more_turns(12))
    second = compress_now(session)
    archive = Archive.objects.get(run=second)
    summary = archive.summaries.get(status=Summary.Status.ACTIVE)
    viewer = user(f"auditor-{lang}", "viewer")
    errors: list[str] = []
    page.on("pageerror", lambda exc: errors.append(str(exc)))
    base = live_server.url
    if lang == "zh":
        page.context.add_cookies([{"name": "django_language", "value": "zh-hans", "url": base}])
    log_in(page, base, viewer.username)

    # the summary page: every #N is a link; one into this archive and one carried into the first archive
    page.goto(f"{base}/summaries/{summary.pk}/")
    text = page.locator("article.summary-text")
    refs = text.locator("a.ref")
    assert refs.count() >= 5
    assert not re.search(r"(?<![\w#])#\d+", re.sub(r"#\d+", "", text.inner_text()) or "")
    screenshot(f"audit-summary-{lang}")
    hrefs = [refs.nth(i).get_attribute("href") or "" for i in range(refs.count())]
    here = next(h for h in hrefs if h.startswith(f"/archives/{archive.pk}/"))
    carried = next(h for h in hrefs if h.startswith("/archives/") and not h.startswith(f"/archives/{archive.pk}/"))
    for href in (here, carried):
        ref = text.locator(f'a.ref[href="{href}"]').first
        n = ref.inner_text()
        ref.click()
        anchor = href.rsplit("#", 1)[1]
        expect(page).to_have_url(re.compile(re.escape(href.split("#")[0].split("?")[1])))
        target = page.locator(f"#{anchor}")
        expect(target).to_be_in_viewport()
        expect(page.locator(".archived.targeted")).to_have_count(1)
        expect(target.locator(".anchor")).to_have_text(n)  # the card the link lands on is the #N it says
        page.go_back()

    # the run diff: the originals beside the summary, #N links in the page
    page.goto(f"{base}/runs/{second.pk}/")
    block = page.locator(".darchive")
    block.locator("details.archived-originals > summary").click()
    link = block.locator('.summary-text a.ref[href^="#orig-"]').first
    href = link.get_attribute("href") or ""
    n = link.inner_text()
    link.click()
    expect(page.locator(href)).to_be_in_viewport()
    expect(page.locator(href).locator(".anchor")).to_have_text(n)
    screenshot(f"audit-run-diff-originals-{lang}")
    page.set_viewport_size({"width": 1280, "height": 900})
    block.scroll_into_view_if_needed()
    screenshot(f"audit-run-diff-block-{lang}", full_page=False)

    # the session page: search, jump to the message that matched, numbers and times on the timeline
    page.goto(f"{base}/sessions/{session.pk}/")
    page.fill("#search-q", "config-11.yaml")
    page.locator("form.in-page-search button[type=submit]").click()
    hits = page.locator(".hit-list li")
    expect(hits).to_have_count(1)
    expect(hits.first).to_contain_text("user")
    screenshot(f"audit-session-search-{lang}")
    hits.first.locator("a").click()
    expect(page).to_have_url(re.compile(r"#m-\d+$"))
    number = page.url.rsplit("#m-", 1)[1]
    target = page.locator(f"#m-{number}")
    expect(target).to_be_in_viewport()
    expect(target).to_contain_text("config-11.yaml")
    expect(target.locator(".anchor")).to_have_text(f"#{number}")
    expect(page.locator("#summary-history li").first).to_be_visible()
    screenshot(f"audit-session-timeline-{lang}")
    if lang == "zh":
        expect(page.locator("html")).to_have_attribute("lang", "zh-hans")
        expect(page.locator("#summary-history h2")).to_have_text("摘要版本与采用记录")
    assert errors == []
