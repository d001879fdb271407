"""A drift check that keeps failing is bounded (then shown as failed, with a retry), and the check's claim-by-claim
reading of a summary is shown on its page, on the drift case page and in the API."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest
from django.utils import timezone

from console.celery import tasks_inline
from console.models import AuditEvent, DriftCase, Summary
from console.services import drift as drift_service
from console.services.drift import check_summary_drift, drift_check_failed
from console.services.summaries import recover_stale_summaries
from tests.console.factories import html_of
from tests.console.test_pages_summaries import crafted


def _crash(*args: Any, **kwargs: Any) -> Any:
    raise IndexError("no such group")


def test_a_check_that_keeps_failing_is_marked_failed_and_not_sent_again(archive, monkeypatch, settings):
    settings.DRIFT_CHECK_MAX_ATTEMPTS = 2
    summary = crafted(archive)
    monkeypatch.setattr(drift_service, "assess_summary", _crash)
    for _ in range(2):
        with pytest.raises(IndexError):
            check_summary_drift(summary.pk, once=True)
    summary.refresh_from_db()
    assert summary.drift_attempts == 2 and summary.drift_checked_at is None
    assert summary.drift_error == "IndexError: no such group"
    assert drift_check_failed(summary)
    # a third delivery (a late resend) does nothing, and the sweep no longer sends it
    assert check_summary_drift(summary.pk, once=True) == []
    Summary.objects.filter(pk=summary.pk).update(updated_at=timezone.now() - timedelta(hours=1))
    report = recover_stale_summaries()
    assert report["drift_resent"] == 0
    assert Summary.objects.get(pk=summary.pk).drift_attempts == 2


def test_an_unchecked_summary_under_the_cap_is_still_resent(archive, settings):
    settings.DRIFT_CHECK_MAX_ATTEMPTS = 3
    summary = crafted(archive)
    Summary.objects.filter(pk=summary.pk).update(drift_attempts=2, updated_at=timezone.now() - timedelta(hours=1))
    assert recover_stale_summaries()["drift_resent"] == 1


def test_the_page_shows_the_failed_check_and_an_operator_retries_it(
    archive, monkeypatch, settings, as_operator, as_viewer, django_capture_on_commit_callbacks
):
    settings.DRIFT_CHECK_MAX_ATTEMPTS = 1
    summary = crafted(archive, text="## Progress\n- the tests pass now")
    monkeypatch.setattr(drift_service, "assess_summary", _crash)
    with pytest.raises(IndexError):
        check_summary_drift(summary.pk, once=True)

    viewer_page = html_of(as_viewer.get(f"/summaries/{summary.pk}/"))
    assert "The drift check failed 1 time" in viewer_page and "IndexError: no such group" in viewer_page
    assert "Run the drift check again" not in viewer_page  # a viewer may not send it
    page = html_of(as_operator.get(f"/summaries/{summary.pk}/"))
    assert f'action="/summaries/{summary.pk}/drift-check"' in page

    monkeypatch.undo()
    with tasks_inline(), django_capture_on_commit_callbacks(execute=True):
        response = as_operator.post(f"/summaries/{summary.pk}/drift-check")
    assert response.status_code == 303
    summary.refresh_from_db()
    assert summary.drift_checked_at is not None and summary.drift_error == ""
    assert AuditEvent.objects.filter(action="summary.drift_retry", object_id=str(summary.pk)).exists()
    assert "The drift check failed" not in html_of(as_operator.get(f"/summaries/{summary.pk}/"))


def test_the_api_retries_a_failed_check_and_refuses_a_checked_one(
    archive, monkeypatch, settings, as_operator, as_viewer, django_capture_on_commit_callbacks
):
    settings.DRIFT_CHECK_MAX_ATTEMPTS = 1
    summary = crafted(archive)
    monkeypatch.setattr(drift_service, "assess_summary", _crash)
    with pytest.raises(IndexError):
        check_summary_drift(summary.pk, once=True)
    body = as_viewer.get(f"/api/v1/summaries/{summary.pk}").json()
    assert body["drift_check"] == "failed" and body["drift_attempts"] == 1
    assert (
        as_viewer.post(f"/api/v1/summaries/{summary.pk}/drift-check", {}, content_type="application/json").status_code
        == 403
    )

    monkeypatch.undo()
    with tasks_inline(), django_capture_on_commit_callbacks(execute=True):
        response = as_operator.post(f"/api/v1/summaries/{summary.pk}/drift-check", {}, content_type="application/json")
    assert response.status_code == 202, response.content
    body = as_viewer.get(f"/api/v1/summaries/{summary.pk}").json()
    assert body["drift_check"] == "checked" and body["drift_attempts"] == 1
    again = as_operator.post(f"/api/v1/summaries/{summary.pk}/drift-check", {}, content_type="application/json")
    assert again.status_code == 409


# --------------------------------------------------------------------------- the claim-by-claim reading


def test_every_claim_line_shows_its_verdict_and_the_messages_it_rests_on(archive, as_viewer):
    summary = crafted(archive, text="## Progress\n- the tests pass now\n- the user asked to keep the batch size")
    check_summary_drift(summary.pk)
    summary.refresh_from_db()
    claims = summary.drift_assessment["claims"]
    assert claims, "the check reads claims from a summary with progress and a requirement"
    page = html_of(as_viewer.get(f"/summaries/{summary.pk}/"))
    assert "Line by line: each claim against the originals" in page
    for claim in claims:
        assert f'id="line-{claim["line"] + 1}"' in page
    body = as_viewer.get(f"/api/v1/summaries/{summary.pk}").json()
    assert [c["line"] for c in body["drift_claims"]] == [c["line"] for c in claims]
    assert {c["verdict"] for c in body["drift_claims"]} <= {"supported", "contradicted", "unsupported", "cannot_tell"}
    for claim in body["drift_claims"]:
        for index in claim["messages"]:
            assert f"#{index}" in page


def test_the_page_reads_in_chinese(archive, as_viewer):
    summary = crafted(archive, text="## Progress\n- the tests pass now")
    check_summary_drift(summary.pk)
    page = html_of(as_viewer.get(f"/summaries/{summary.pk}/", HTTP_ACCEPT_LANGUAGE="zh-hans"))
    assert "逐行核对" in page


def test_a_case_shows_the_reading_of_the_lines_it_is_about(archive, as_reviewer):
    text = "## Progress\n- the tests pass now\n- deployed it to production"
    summary = crafted(archive, text=text)
    check_summary_drift(summary.pk)
    summary.refresh_from_db()
    case = DriftCase.objects.filter(summary=summary).first()
    if case is None:  # the check opened none: open one by hand about the second line
        case = drift_service.open_case(
            summary.pk, quote="the tests pass now", kind="progress_fabricated", severity="high", note="", user=None
        )
    page = html_of(as_reviewer.get(f"/drift/{case.pk}/"))
    assert "What the check read on these lines" in page
