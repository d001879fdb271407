"""The dashboard in a real browser, in English and Chinese: cost and latency, a bar that opens its runs,
a session download. Under `make screenshots`, screenshots of the dashboard, a run page and a summary page
in both languages go to artifacts/screenshots/ (dashboard-en.png, run-zh.png, …)."""

from __future__ import annotations

import json
import re

import pytest
from playwright.sync_api import Page, expect

from console.models import Summary
from tests.browser.accounts import log_in, user
from tests.console.factories import compress_now, sample_session
from tests.console.test_pages_dashboard import day, make_session, make_summary
from tests.samples import WECHAT

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

PRICES = {"gpt-x": {"input": 0.5, "output": 1.5}}
TEXT = {
    "en": {"cost": "Summarizer calls: cost and latency", "runs": "Runs", "download": "Download the session (JSON)"},
    "zh-hans": {"cost": "摘要器调用：费用与延迟", "runs": "运行记录", "download": "下载会话（JSON）"},
}


def switch_language(page: Page, code: str) -> None:
    if page.locator("html").get_attribute("lang") != code:
        page.select_option("#language", code)
        page.wait_for_load_state("load")
        expect(page.locator("html")).to_have_attribute("lang", code)


@pytest.mark.parametrize("language", ["en", "zh-hans"])
def test_the_dashboard_prices_calls_links_bars_and_downloads(live_server, page: Page, screenshot, settings, language):
    settings.SUMMARIZER_PRICES = PRICES
    admin = user(f"boss-{language}", "admin")
    admin.is_superuser = True
    admin.save()
    session = sample_session(WECHAT)
    run = compress_now(session)
    summary = Summary.objects.filter(run=run).first()
    assert summary is not None
    other = make_session("test:priced")
    make_summary(other, day(0), provenance={"generator": "openai", "model": "gpt-x", "input_tokens": 2_000_000,
                                            "output_tokens": 1000, "latency_ms": 1234.5})  # fmt: skip
    base = live_server.url
    log_in(page, base, admin.username)
    page.goto(f"{base}/dashboard/")
    switch_language(page, language)
    text = TEXT[language]

    expect(page.get_by_role("heading", name=text["cost"])).to_be_visible()
    expect(page.locator("#cost-total")).to_have_text("1,001.50")
    expect(page.locator("table.calls")).to_contain_text("2,000,000")
    screenshot(f"dashboard-{'zh' if language != 'en' else 'en'}")

    # a bar of the runs chart opens the runs of that day and outcome
    page.locator("#board svg").first.locator("a rect.seg.s-succeeded").last.click()
    expect(page).to_have_url(re.compile(r"/runs/\?day=\d{4}-\d\d-\d\d&status=succeeded"))
    expect(page.get_by_role("heading", name=text["runs"], exact=True)).to_be_visible()
    expect(page.locator(f'a[href="/runs/{run.pk}/"]')).to_be_visible()

    # the session download is the export_session JSON, masked
    page.goto(f"{base}/dashboard/")
    page.select_option("#export-session", str(session.pk))
    with page.expect_download() as info:
        page.get_by_role("button", name=text["download"]).click()
    download = info.value
    assert download.suggested_filename == "session-wechat_wxid_demo01.json"
    data = json.loads(download.path().read_text(encoding="utf-8"))
    assert data["session"]["key"] == "wechat:wxid_demo01" and data["runs"]

    suffix = "zh" if language != "en" else "en"
    page.goto(f"{base}/runs/{run.pk}/")
    expect(page.locator("time").first).to_have_attribute("datetime", re.compile(r"^\d{4}-\d\d-\d\dT"))
    screenshot(f"run-{suffix}")
    screenshot(f"run-{suffix}-top", full_page=False)  # the facts, size and stages, readable
    page.goto(f"{base}/summaries/{summary.pk}/")
    screenshot(f"summary-{suffix}")
    screenshot(f"summary-{suffix}-top", full_page=False)
