"""The operator's everyday loop in headless Chromium, in English and Chinese: promoting a drifted summary asks
for an acknowledgement, a reviewed case keeps its status, the runs table filters in the URL, the compare page
leads with the difference, API keys are made in the console, errors stay inside the layout, and "?" and "/"
work. Under `make screenshots`, every page it visits goes to artifacts/screenshots/ (loop-*-en.png, -zh.png).
"""

from __future__ import annotations

import re
from typing import Any

import pytest
from playwright.sync_api import Page, expect

from console.models import AuditEvent, DriftCase, Notification, Summary
from console.services import drift
from tests.browser.accounts import log_in, user
from tests.console.factories import compress_now, sample_session
from tests.console.test_pages_drift import CONSTRAINT, INVERTED, crafted

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

LANGUAGES = ["en", "zh-hans"]
TEXT = {
    "en": {
        "findings": "Open drift findings",
        "acknowledge": "I have read the high-severity drift findings",
        "promote": "Promote this version",
        "acknowledged": "You acknowledged",
        "reopen": "Reopen the case",
        "runs": "Runs",
        "csv": "Download as CSV",
        "changed": "What changed",
        "full": "Both full texts, side by side",
        "keys": "API keys",
        "create": "Create key",
        "shown_once": "shown once",
        "not_found": "There is nothing at this address",
        "forbidden": "Your role may not do this",
        "shortcuts": "Keyboard shortcuts",
        "inbox": "constraint inverted",
        "audit": "changed a drift case's review",
    },
    "zh-hans": {
        "findings": "未解决的漂移发现",
        "acknowledge": "我已阅读上面的高严重度漂移发现",
        "promote": "采用此版本",
        "acknowledged": "你已确认其未解决的高严重度漂移发现",
        "reopen": "重新打开案例",
        "runs": "运行记录",
        "csv": "下载 CSV",
        "changed": "改动",
        "full": "两个版本的全文，并排显示",
        "keys": "API 密钥",
        "create": "创建密钥",
        "shown_once": "只显示一次",
        "not_found": "此地址没有内容",
        "forbidden": "你的角色无权执行此操作",
        "shortcuts": "键盘快捷键",
        "inbox": "约束反转",
        "audit": "修改了漂移案例的复核",
    },
}


def short(language: str) -> str:
    return "zh" if language != "en" else "en"


def in_language(page: Page, base: str, language: str) -> None:
    page.context.add_cookies([{"name": "django_language", "value": language, "url": base}])


def drifted_draft() -> tuple[Summary, Summary, DriftCase]:
    """The coding sample compressed, and a draft that turns its "don't deploy" into "deploy", checked."""
    run = compress_now(sample_session())
    active = Summary.objects.get(run=run)
    draft = crafted(active.archive, active.text.replace(CONSTRAINT, INVERTED))
    drift.check_summary_drift(draft.pk)
    return active, draft, DriftCase.objects.get(summary=draft)


@pytest.mark.parametrize("language", LANGUAGES)
def test_promoting_a_drifted_draft_asks_and_a_resolved_case_keeps_its_status(
    live_server: Any, page: Page, screenshot: Any, language: str
) -> None:
    text = TEXT[language]
    person = user(f"op-{short(language)}", "operator", "reviewer")
    _active, draft, case = drifted_draft()
    base = live_server.url
    in_language(page, base, language)
    log_in(page, base, person.username)

    page.goto(f"{base}/summaries/{draft.pk}/promote")
    expect(page.get_by_role("heading", name=re.compile(text["findings"]))).to_be_visible()
    expect(page.locator(f'.promote-findings a[href="/drift/{case.pk}/"]')).to_be_visible()
    box = page.locator('input[name="acknowledge_drift"]')
    expect(box).to_be_visible()
    screenshot(f"loop-promote-{short(language)}")
    page.get_by_role("button", name=text["promote"]).click()  # the box is required: nothing is sent
    draft.refresh_from_db()
    assert draft.status == "draft"
    box.check()
    page.get_by_role("button", name=text["promote"]).click()
    expect(page.locator(".promote-box.done")).to_contain_text(text["acknowledged"])
    assert AuditEvent.objects.filter(action="summary.acknowledge_drift", object_id=str(draft.pk)).exists()

    # the case: confirm it, resolve it; the form then keeps "resolved", and reopening is its own button
    drift.update_drift_case(case.pk, {"status": "confirmed", "verdict": "it says deploy"}, person)
    drift.update_drift_case(case.pk, {"status": "resolved", "verdict": "fixed elsewhere"}, person)
    page.goto(f"{base}/drift/{case.pk}/")
    expect(page.locator(f"#status-{case.pk}")).to_have_value("resolved")
    page.locator(".status-form button[type=submit]").first.click()  # Save with the status as it is
    expect(page.locator("#case-review .ok-text")).to_be_visible()
    case.refresh_from_db()
    assert case.status == "resolved"
    screenshot(f"loop-case-{short(language)}")
    page.get_by_role("button", name=text["reopen"]).click()
    expect(page.locator("#case-review .review-state .badge")).to_have_class(re.compile("status-open"))


@pytest.mark.parametrize("language", LANGUAGES)
def test_runs_sessions_compare_inbox_and_audit_speak_words(
    live_server: Any, page: Page, screenshot: Any, language: str
) -> None:
    text = TEXT[language]
    admin = user(f"lead-{short(language)}", "admin")
    active, draft, case = drifted_draft()
    Notification.objects.create(
        recipient=admin,
        kind=Notification.Kind.DRIFT_CASE,
        url=f"/drift/{case.pk}/",
        data={"case": case.pk, "severity": "high", "kinds": "constraint_inverted", "session": "job:1"},
    )
    drift.update_drift_case(case.pk, {"claim": True}, admin)
    base = live_server.url
    in_language(page, base, language)
    log_in(page, base, admin.username)

    page.goto(f"{base}/runs/")
    expect(page.get_by_role("heading", name=text["runs"], exact=True)).to_be_visible()
    expect(page.get_by_role("link", name=text["csv"])).to_be_visible()
    page.select_option('select[name="status"]', "succeeded")
    expect(page).to_have_url(re.compile(r"/runs/\?.*status=succeeded"))
    expect(page.locator(f"#r-{active.run_id}")).to_be_visible()
    screenshot(f"loop-runs-{short(language)}")

    page.goto(f"{base}/")
    expect(page.locator("table.sessions .last-run .badge").first).to_be_visible()
    screenshot(f"loop-sessions-{short(language)}")
    page.goto(f"{base}/sessions/{active.archive.session_id}/")
    expect(page.locator(f'#session-drift a[href="/drift/{case.pk}/"]')).to_be_visible()
    screenshot(f"loop-session-{short(language)}")

    page.goto(f"{base}/archives/{active.archive_id}/compare?a={active.pk}&b={draft.pk}")
    expect(page.get_by_role("heading", name=re.compile(text["changed"]))).to_be_visible()
    expect(page.locator("#text-diff ins.diff").first).to_be_visible()
    full = page.locator("#full-texts")
    expect(full).not_to_have_attribute("open", "")
    expect(full.locator(".summary-text").first).to_be_hidden()  # collapsed until asked for
    screenshot(f"loop-compare-{short(language)}")
    full.locator("summary").click()
    expect(full.locator(".summary-text").first).to_be_visible()

    page.goto(f"{base}/inbox/")
    expect(page.locator("main")).to_contain_text(text["inbox"])
    expect(page.locator("main")).not_to_contain_text("constraint_inverted")
    screenshot(f"loop-inbox-{short(language)}")
    page.goto(f"{base}/audit/")
    expect(page.locator("main")).to_contain_text(text["audit"])
    screenshot(f"loop-audit-{short(language)}")


@pytest.mark.parametrize("language", LANGUAGES)
def test_api_keys_errors_and_keyboard_help(live_server: Any, page: Page, screenshot: Any, language: str) -> None:
    text = TEXT[language]
    admin = user(f"keys-{short(language)}", "admin")
    viewer = user(f"look-{short(language)}", "viewer")
    base = live_server.url
    in_language(page, base, language)
    log_in(page, base, admin.username)

    page.goto(f"{base}/settings/api-keys/")
    expect(page.get_by_role("heading", name=text["keys"], exact=True)).to_be_visible()
    page.fill("#id_name", f"runtime-{short(language)}")
    page.select_option("#id_role", "operator")
    page.get_by_role("button", name=text["create"]).click()
    expect(page.locator("#new-api-key")).to_contain_text(text["shown_once"])
    expect(page.locator("#api-key-value")).to_have_text(re.compile(r"^ccs_"))
    screenshot(f"loop-api-keys-{short(language)}")
    page.reload()
    expect(page.locator("#api-key-value")).to_have_count(0)  # shown once

    icon = page.locator('link[rel="icon"]').get_attribute("href")
    assert icon and page.request.get(f"{base}{icon}").ok

    # "?" lists the shortcuts, "/" goes to the search box
    page.goto(f"{base}/runs/")
    page.locator("body").press("?")
    expect(page.get_by_role("heading", name=text["shortcuts"])).to_be_visible()
    screenshot(f"loop-keys-help-{short(language)}", full_page=False)
    page.keyboard.press("Escape")
    expect(page.locator("#keyboard-help")).to_be_hidden()
    page.locator("body").press("/")
    expect(page.locator("#q")).to_be_focused()

    page.goto(f"{base}/sessions/999999/")
    expect(page.get_by_role("heading", name=text["not_found"])).to_be_visible()
    expect(page.get_by_role("navigation", name=re.compile("Main|主"))).to_be_visible()
    screenshot(f"loop-404-{short(language)}")

    page.context.clear_cookies()
    in_language(page, base, language)
    log_in(page, base, viewer.username)
    page.goto(f"{base}/settings/api-keys/")
    expect(page.get_by_role("heading", name=text["forbidden"])).to_be_visible()
    expect(page.locator("header nav a").first).to_be_visible()
    screenshot(f"loop-403-{short(language)}")
