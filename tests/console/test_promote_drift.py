"""Promoting with open drift findings (page and API), and a reviewed case that one Save cannot reopen."""

from __future__ import annotations

import json

import pytest
from django.test import Client

from console.apikeys import create_api_key
from console.models import Archive, AuditEvent, DriftCase, Session, Summary
from console.services import drift
from console.services.promotion import open_findings
from tests.console.factories import HX, html_of
from tests.console.test_pages_drift import CONSTRAINT, INVERTED, confirm, crafted


@pytest.fixture
def drifting(archive: Archive, active: Summary) -> Summary:
    """A draft that inverts the user's "don't deploy", checked: its case opened by itself."""
    summary = crafted(archive, active.text.replace(CONSTRAINT, INVERTED))
    drift.check_summary_drift(summary.pk)
    return summary


@pytest.fixture
def case(drifting: Summary) -> DriftCase:
    return DriftCase.objects.get(summary=drifting)


def api_promote(summary: Summary, body: dict | None = None) -> tuple[int, dict]:
    key = create_api_key(f"promoter{Summary.objects.count()}", "operator")[1]
    response = Client().post(
        f"/api/v1/summaries/{summary.pk}/promote",
        data=json.dumps(body) if body is not None else b"",
        content_type="application/json",
        headers={"Authorization": f"Bearer {key}"},
    )
    return response.status_code, response.json()


def live_version(summary: Summary) -> int:
    return Session.objects.get(pk=summary.archive.session_id).version


# --------------------------------------------------------------------------- the API


def test_the_api_refuses_with_409_naming_the_high_findings(case, drifting):
    version = live_version(drifting)
    status, body = api_promote(drifting)
    assert status == 409
    assert "open high-severity drift finding" in body["detail"] and f"case #{case.pk}" in body["detail"]
    assert "acknowledge_drift" in body["detail"]
    assert [f["case"] for f in body["findings"]] == [case.pk] * len(body["findings"])
    assert {f["kind"] for f in body["findings"]} == set(case.kind_list)
    drifting.refresh_from_db()
    assert drifting.status == "draft" and live_version(drifting) == version  # nothing changed
    assert not AuditEvent.objects.filter(action__startswith="summary.", object_id=str(drifting.pk)).exists()


def test_the_api_promotes_when_acknowledged_and_audits_it(case, drifting):
    status, body = api_promote(drifting, {"acknowledge_drift": True})
    assert status == 200, body
    assert body["summary"]["status"] == "active"
    event = AuditEvent.objects.get(action="summary.acknowledge_drift", object_id=str(drifting.pk))
    assert "promoter" in event.actor_label
    assert [f["case"] for f in event.after["findings"]] == [case.pk] * len(event.after["findings"])
    assert AuditEvent.objects.filter(action="summary.promote", object_id=str(drifting.pk)).exists()


def test_a_clean_version_needs_no_acknowledgement(archive, active):
    clean = crafted(archive, active.text, summary_id="sum_clean")
    drift.check_summary_drift(clean.pk)
    assert open_findings(clean) == []
    status, body = api_promote(clean)
    assert status == 200, body
    assert not AuditEvent.objects.filter(action="summary.acknowledge_drift").exists()


def test_a_dismissed_case_no_longer_blocks_but_a_resolved_one_does(login, case, drifting):
    reviewer = login("reviewer").user
    drift.update_drift_case(case.pk, {"status": "dismissed", "verdict": "the user allowed it later"}, reviewer)
    assert open_findings(drifting) == []
    drift.update_drift_case(case.pk, {"status": "open"}, reviewer)
    confirm(case, reviewer)
    drift.update_drift_case(case.pk, {"status": "resolved", "verdict": "fixed in another version"}, reviewer)
    assert {f["case"] for f in open_findings(drifting)} == {case.pk}  # its text still drifts


def test_the_api_refuses_a_bad_acknowledgement_body(case, drifting):
    status, body = api_promote(drifting, {"acknowledge_drift": "yes"})
    assert status == 422 and "acknowledge_drift" in body["detail"]


# --------------------------------------------------------------------------- the page


def test_the_page_lists_the_findings_and_asks_for_the_box(as_operator, case, drifting):
    html = html_of(as_operator.get(f"/summaries/{drifting.pk}/promote"))
    assert "Open drift findings" in html and f'href="/drift/{case.pk}/"' in html
    assert 'name="acknowledge_drift"' in html and "required" in html

    refused = as_operator.post(f"/summaries/{drifting.pk}/promote", headers=HX)
    assert refused.status_code == 409
    assert "tick the box" in html_of(refused)
    drifting.refresh_from_db()
    assert drifting.status == "draft"

    done = as_operator.post(f"/summaries/{drifting.pk}/promote", {"acknowledge_drift": "1"}, headers=HX)
    assert done.status_code == 200 and "You acknowledged" in html_of(done)
    assert AuditEvent.objects.filter(action="summary.acknowledge_drift", object_id=str(drifting.pk)).exists()


def test_the_page_without_findings_says_so_and_has_no_box(as_operator, archive, active):
    clean = crafted(archive, active.text, summary_id="sum_clean_page")
    drift.check_summary_drift(clean.pk)
    html = html_of(as_operator.get(f"/summaries/{clean.pk}/promote"))
    assert "found nothing open" in html and 'name="acknowledge_drift"' not in html


def test_the_page_is_in_chinese(as_operator, case, drifting):
    as_operator.cookies["django_language"] = "zh-hans"
    html = html_of(as_operator.get(f"/summaries/{drifting.pk}/promote"))
    assert "未解决的漂移发现" in html and "仍然采用此版本" in html


# --------------------------------------------------------------------------- the case form


def test_a_resolved_case_keeps_its_status_on_save(login, case):
    reviewer = login("reviewer")
    confirm(case, reviewer.user)
    drift.update_drift_case(case.pk, {"status": "resolved", "verdict": "fixed"}, reviewer.user)
    html = html_of(reviewer.get(f"/drift/{case.pk}/"))
    assert '<option value="resolved" selected>' in html
    assert '<option value="open"' not in html and 'value="reopen"' in html

    response = reviewer.post(f"/drift/{case.pk}/update", {"action": "status", "status": "resolved", "verdict": ""})
    case.refresh_from_db()
    assert response.status_code == 303 and case.status == "resolved"
    assert case.verdict == "fixed"  # an empty box with the status kept erases nothing

    reviewer.post(f"/drift/{case.pk}/update", {"action": "reopen"}, headers=HX)
    case.refresh_from_db()
    assert case.status == DriftCase.Status.OPEN


def test_flash_messages_say_what_happened(login, case):
    reviewer = login("reviewer")
    claimed = html_of(reviewer.post(f"/drift/{case.pk}/update", {"action": "claim"}, headers=HX))
    assert f"Assigned to {reviewer.user.username}." in claimed
    assert "No open case is left" not in claimed
    keep = {"action": "status", "status": "open", "verdict": "x"}
    saved = reviewer.post(f"/drift/{case.pk}/update", keep, headers=HX)
    assert "Verdict saved." in html_of(saved) and "No open case is left" not in html_of(saved)
    confirmed = reviewer.post(
        f"/drift/{case.pk}/update", {"action": "status", "status": "confirmed", "verdict": "it drifts"}, headers=HX
    )
    assert "Status changed to confirmed." in html_of(confirmed)
