"""The review flow as annotation queues have it, in headless Chromium, in English and Chinese: bulk-dismiss ticked
cases from the queue, "Save and next case" after a verdict, and a verdict on two summary versions on the compare
page. Under `make screenshots`, screenshots go to artifacts/screenshots/ (review-*-en / review-*-zh)."""

from __future__ import annotations

import re
from typing import Any

import pytest
from playwright.sync_api import Page, expect

from console.models import AuditEvent, DriftCase, PairwiseReview, Summary
from console.services import drift
from tests.browser.accounts import log_in, user
from tests.console.factories import compress_now, sample_session

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

TIMEOUT = 20_000
WORDS = {
    "en": {
        "dismiss": "Dismiss",
        "dismissed": "Dismissed 2 cases.",
        "next": "Save and next case",
        "save": "Save",
        "saved": "Status changed to dismissed.",
        "none_left": "No open case is left in this filter.",
        "b_better": "B is better",
        "record": "Record verdict",
        "recorded": "Your verdict is recorded.",
    },
    "zh": {
        "dismiss": "驳回",
        "dismissed": "已驳回 2 个案例。",
        "next": "保存并转到下一个",
        "save": "保存",
        "saved": "状态已改为已驳回。",
        "none_left": "此筛选条件下已没有待处理的案例。",
        "b_better": "B 更好",
        "record": "记录结论",
        "recorded": "你的结论已记录。",
    },
}


@pytest.mark.parametrize("lang", ["en", "zh"])
def test_bulk_dismiss_save_and_next_and_a_pairwise_verdict(live_server: Any, page: Page, screenshot: Any, lang: str):
    words = WORDS[lang]
    run = compress_now(sample_session())
    active = run.archive.summaries.get(status=Summary.Status.ACTIVE)
    other = Summary.objects.create(
        archive=run.archive,
        text=active.text.replace("Decisions", "Choices made"),
        status=Summary.Status.DRAFT,
        summary_id=f"sum_browserpair{lang}",
        provenance={"generator": "openai", "model": "gpt-test", "trigger": "resummarize"},
    )
    cases = [
        drift.open_case(active.pk, quote="Decisions", kind=kind, severity=sev, note="", user=None)
        for kind, sev in (("hedge_lost", "low"), ("other", "medium"), ("other", "low"), ("hedge_lost", "high"))
    ]
    reviewer = user(f"li.{lang}", "reviewer")
    errors: list[str] = []
    page.on("pageerror", lambda exc: errors.append(str(exc)))
    page.set_default_timeout(TIMEOUT)
    page.set_viewport_size({"width": 1280, "height": 900})
    base = live_server.url
    log_in(page, base, reviewer.username)
    if lang == "zh":
        page.context.add_cookies([{"name": "django_language", "value": "zh-hans", "url": base}])

    # the queue: tick two cases (select all, then untick two), dismiss them with one verdict
    page.goto(f"{base}/drift/")
    page.locator("#pick-all").check()
    for case in (cases[0], cases[1]):
        expect(page.locator(f"#case-{case.pk} input[name=case]")).to_be_checked()
    page.locator(f"#case-{cases[2].pk} input[name=case]").uncheck()
    page.locator(f"#case-{cases[3].pk} input[name=case]").uncheck()
    page.fill("#bulk-verdict", "duplicates of a known hedge")
    screenshot(f"review-1-queue-bulk-{lang}")
    page.locator("#bulk-form").get_by_role("button", name=words["dismiss"], exact=True).click()
    expect(page.locator("body")).to_contain_text(words["dismissed"])
    assert set(DriftCase.objects.filter(status="dismissed").values_list("pk", flat=True)) == {cases[0].pk, cases[1].pk}
    assert AuditEvent.objects.filter(action="drift_case.update").count() == 2
    expect(page.locator(f"#case-{cases[0].pk}")).to_have_count(0)
    screenshot(f"review-2-queue-after-bulk-{lang}")
    # "mentioning me" looks at every status: ticking it widens the status filter
    page.locator("input[name=mentions]").check()
    expect(page).to_have_url(re.compile(r"status=all.*mentions=me|mentions=me.*status=all"))
    expect(page.locator("select[name=status]")).to_have_value("all")
    page.goto(f"{base}/drift/")

    # the newest open case; "Save and next case" lands on the next open one of the queue
    page.locator(f"#case-{cases[3].pk} a").first.click()
    page.select_option(f"#status-{cases[3].pk}", "confirmed")
    page.fill("#case-review textarea[name=verdict]", "the hedge is gone")
    page.get_by_role("button", name=words["next"]).click()
    expect(page).to_have_url(re.compile(rf"/drift/{cases[2].pk}/$"))
    assert DriftCase.objects.get(pk=cases[3].pk).status == "confirmed"

    # the last open case: a plain save says none is left
    page.select_option(f"#status-{cases[2].pk}", "dismissed")
    page.fill("#case-review textarea[name=verdict]", "it was a hedge the user dropped")
    page.locator("#case-review").get_by_role("button", name=words["save"], exact=True).click()
    expect(page.locator("#case-review")).to_contain_text(words["saved"])
    expect(page.locator("#case-review")).to_contain_text(words["none_left"])
    screenshot(f"review-3-case-after-verdict-{lang}")
    assert DriftCase.objects.get(pk=cases[2].pk).status == "dismissed"

    # the compare page: B is better, with a note
    page.goto(f"{base}/archives/{run.archive.pk}/compare?a={active.pk}&b={other.pk}")
    page.get_by_label(words["b_better"]).check()
    page.fill("#pairwise textarea[name=note]", "the headings read better")
    page.get_by_role("button", name=words["record"]).click()
    expect(page.locator("#pairwise")).to_contain_text(words["recorded"])
    expect(page.locator("#pairwise .pair-reviews")).to_contain_text("the headings read better")
    page.locator("#pairwise").scroll_into_view_if_needed()
    screenshot(f"review-4-pairwise-{lang}")
    review = PairwiseReview.objects.get()
    assert (review.a_id, review.b_id, review.verdict, review.reviewer) == (active.pk, other.pk, "b_better", reviewer)
    assert not errors, errors
