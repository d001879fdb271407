"""Drift review end to end, in headless Chromium against a live server and a real Celery worker.

The fake OpenAI-compatible model on loopback writes a summary that inverts the user's "don't deploy";
the worker's drift check opens a case by itself; a reviewer (who is also an operator) finds it in the
queue, claims it, confirms it with a reason, comments with a quote and a mention, re-summarizes with the
offline (faithful) summarizer and promotes the new version; the case resolves, and the audit log shows
every step. Under `make screenshots`, screenshots of the queue and the case page go to
artifacts/screenshots/, in English and Chinese.
"""

from __future__ import annotations

import re
from typing import Any

import pytest
from playwright.sync_api import Page, expect

from console.models import AuditEvent, CompressionRun, DriftCase, Summary
from console.services import runs
from tests.browser.accounts import log_in, user
from tests.console.factories import SMALL_WINDOW, sample_session
from tests.console.workers import wait_until
from tests.fakes.openai_server import Behaviour, FakeOpenAIServer

pytestmark = [pytest.mark.browser, pytest.mark.worker, pytest.mark.django_db(transaction=True)]

TIMEOUT = 45_000  # ms: the file broker polls once a second
#: what the model answers: the user said "Try BATCH=5000, but don't deploy; just run the job locally."
DRIFTED = (
    "## Decisions\n- Reduce the export batch size to BATCH=5000 and deploy the job to production now.\n\n"
    "## Progress and next steps\n- The dry run passes."
)


def test_a_drifted_summary_is_caught_reviewed_and_fixed(
    live_server: Any, page: Page, screenshot: Any, worker: None, model: FakeOpenAIServer, settings: Any
) -> None:
    settings.OPENAI_BASE_URL = model.base_url  # the live server offers the same summarizers as the worker
    settings.OPENAI_API_KEY = "test"
    model.reset()
    model.script(default=Behaviour(kind="ok", text=DRIFTED))
    reviewer = user("li.reviewer", "reviewer", "operator")
    user("wang", "reviewer")
    errors: list[str] = []
    page.on("pageerror", lambda exc: errors.append(str(exc)))
    page.set_default_timeout(TIMEOUT)
    base = live_server.url

    # a compression in the worker; the model drifts; the drift check opens a case by itself
    session = sample_session()
    run, _ = runs.request_compression(session.key, config=SMALL_WINDOW)
    wait_until(
        lambda: CompressionRun.objects.get(pk=run.pk).status, lambda s: s not in ("queued", "running"), 60, "run"
    )
    case = wait_until(lambda: DriftCase.objects.filter(session=session).first(), bool, 60, "the drift case")
    assert case.opened_by is None and "constraint_inverted" in case.kind_list and case.severity == "high"
    bad = case.summary

    # the queue
    log_in(page, base, reviewer.username)
    page.get_by_role("link", name=re.compile("Drift review")).click()
    row = page.locator(f"#case-{case.pk}")
    expect(row).to_contain_text("constraint inverted")
    expect(row).to_contain_text("unassigned")
    page.select_option("select[name=severity]", "high")
    expect(page).to_have_url(re.compile(r"severity=high"))
    expect(row).to_be_visible()
    screenshot("drift-1-queue-en")

    # the case: evidence side by side, claim, confirm with a reason
    row.get_by_role("link", name=f"Case #{case.pk}").click()
    expect(page.get_by_role("heading", name=re.compile(f"Drift case #{case.pk}"))).to_be_visible()
    pair = page.locator(".evidence-pair").first
    expect(pair.locator(".pane.original mark")).to_contain_text("don't deploy")
    expect(pair.locator(".pane.summary mark")).to_contain_text("deploy the job to production now")
    page.get_by_role("button", name="Claim").click()
    expect(page.locator("#case-review .holder")).to_have_text(reviewer.username)
    page.select_option(f"#status-{case.pk}", "confirmed")
    page.fill("#case-review textarea[name=verdict]", "The user said not to deploy; the summary says deploy now.")
    page.locator("#case-review").get_by_role("button", name="Save", exact=True).click()
    expect(page.locator("#case-review .review-state")).to_contain_text("confirmed")
    expect(page.locator("#case-review .history")).to_contain_text("open → confirmed")

    # a comment quoting a passage selected in the evidence, mentioning a teammate
    pair.locator(".pane.summary mark").select_text()
    page.locator(".pane.summary").dispatch_event("mouseup")
    expect(page.locator("#case-comments textarea[name=quote]")).to_have_value(re.compile("deploy the job"))
    page.fill("#case-comments textarea[name=body]", "@wang the prohibition became an instruction")
    page.get_by_role("button", name="Comment").click()
    expect(page.locator("#case-comments .comment")).to_contain_text("@wang")
    expect(page.locator("#case-comments .quoted")).to_contain_text("deploy the job")
    screenshot("drift-2-case-en")

    # the fix in place: re-summarize with the offline summarizer, then promote the clean version
    page.select_option("#id_summarizer", "extractive")
    page.get_by_role("button", name="Re-summarize").click()
    expect(page.locator("#resummarize .progress-box.state-draft")).to_contain_text("New version ready")
    fixed = Summary.objects.exclude(pk=bad.pk).get(archive=bad.archive)
    version = page.locator("#case-fix li", has_text=fixed.summary_id)
    expect(version).to_contain_text("no serious drift")
    version.get_by_role("link", name="Promote…").click()
    page.get_by_role("button", name="Promote this version").click()
    expect(page.locator("#promote-region")).to_contain_text("Promoted")
    expect(page.locator("#case-review .review-state")).to_contain_text("resolved")
    expect(page.locator("#case-review")).to_contain_text(f"Fixed by promoting {fixed.summary_id}")
    screenshot("drift-3-case-resolved-en")

    case.refresh_from_db()
    assert case.status == "resolved" and case.fixed_by_id == fixed.pk and case.assignee == reviewer
    fixed.refresh_from_db()
    assert fixed.status == "active"

    # a case opened by hand: select a passage of the new summary, say what is wrong
    page.goto(f"{base}/summaries/{fixed.pk}/")
    passage = page.locator("article.summary-text li").first
    passage.select_text()
    page.locator("article.summary-text").dispatch_event("mouseup")
    quoted = page.locator("#open-case textarea[name=quote]")
    expect(quoted).to_be_visible()  # the form's <details> opened by itself
    expect(quoted).not_to_have_value("")
    page.select_option("#open-case select[name=kind]", "hedge_lost")
    page.fill("#open-case textarea[name=note]", "sounds more certain than the user was")
    screenshot("drift-6-open-by-hand-en")
    page.get_by_role("button", name="Open a drift case").click()
    expect(page).to_have_url(re.compile(r"/drift/\d+/$"))
    by_hand = DriftCase.objects.exclude(pk=case.pk).get()
    assert by_hand.opened_by == reviewer and by_hand.summary_id == fixed.pk and by_hand.kind_list == ["hedge_lost"]
    expect(page.locator(".case-origin")).to_contain_text(f"Opened by hand by {reviewer.username}")

    # the audit log records each step, in order
    def step(action: str, obj: Any) -> int:
        return AuditEvent.objects.get(action=action, object_type=obj._meta.model_name, object_id=str(obj.pk)).pk

    case_steps = AuditEvent.objects.filter(object_type="driftcase", object_id=str(case.pk)).order_by("pk")
    assert list(case_steps.values_list("action", "actor_label")) == [
        ("drift_case.open", "system"),
        ("drift_case.update", reviewer.username),  # claimed
        ("drift_case.update", reviewer.username),  # confirmed, with the verdict
        ("drift_case.comment", reviewer.username),
        ("drift_case.resolve", reviewer.username),
    ]
    resolved = case_steps.last()
    assert resolved is not None
    assert step("drift_case.comment", case) < step("summary.resummarize", fixed) < step("summary.promote", fixed)
    assert step("summary.promote", fixed) < resolved.pk

    # the same pages in Chinese
    page.context.add_cookies([{"name": "django_language", "value": "zh-hans", "url": base}])
    page.goto(f"{base}/drift/?status=all")
    expect(page.locator(f"#case-{case.pk}")).to_be_visible()
    screenshot("drift-4-queue-zh")
    page.goto(f"{base}/drift/{case.pk}/")
    expect(page.locator(".evidence-pair").first).to_be_visible()
    screenshot("drift-5-case-zh")

    # ... and the audit log page, which only the admin role may read
    refused = page.goto(f"{base}/audit/")
    assert refused is not None and refused.status == 403  # the reviewer is not an admin
    page.context.clear_cookies()
    page.context.add_cookies([{"name": "django_language", "value": "zh-hans", "url": base}])
    log_in(page, base, user("auditor", "admin").username)
    page.goto(f"{base}/audit/?object=driftcase:{case.pk}")
    rows = page.locator("#results tbody tr")
    expect(rows).to_have_count(5)
    for action in ("drift_case.open", "drift_case.update", "drift_case.comment", "drift_case.resolve"):
        # the action in words (Chinese here), its code kept in the cell's title
        expect(page.locator(f'#results td.action[title="{action}"]').first).not_to_contain_text(action)
    expect(page.locator("#results")).to_contain_text("打开了漂移案例")
    screenshot("drift-7-audit-zh")
    assert not errors, errors
