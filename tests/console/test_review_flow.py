"""The review flow as annotation queues have it: the next case after a verdict, bulk claim / assign / dismiss
from the queue (all or none, one audit event per case changed), and a verdict on two summary versions."""

from __future__ import annotations

import json
from typing import Any
from unittest import mock

import pytest
from django.contrib.auth.models import Group, User
from django.test import Client

from console.apikeys import create_api_key
from console.errors import Conflict, InvalidInput
from console.models import Archive, AuditEvent, DriftCase, Notification, PairwiseReview, Summary
from console.services import drift, notifications
from tests.console.factories import HX, SECRET, html_of
from tests.console.test_pages_drift import crafted

pytestmark = pytest.mark.django_db


def person(name: str, role: str = "reviewer") -> User:
    user = User.objects.create_user(name, password="pw")
    user.groups.add(Group.objects.get(name=role))
    return user


def client_of(user: User) -> Client:
    client = Client()
    client.force_login(user)
    return client


@pytest.fixture
def cases(active: Summary) -> list[DriftCase]:
    """Four open cases opened by hand, oldest first (the queue lists them newest first)."""
    made = []
    for severity in ("low", "medium", "high", "low"):
        made.append(drift.open_case(active.pk, quote="Decisions", kind="other", severity=severity, note="", user=None))
    return made


def events(action: str = "drift_case.update") -> list[AuditEvent]:
    return list(AuditEvent.objects.filter(action=action).order_by("id"))


# --------------------------------------------------------------------------- bulk


def test_bulk_assign_writes_one_event_and_one_notification_per_case_changed(cases):
    rita, mei = person("rita"), person("mei")
    drift.update_drift_case(cases[0].pk, {"assignee": "mei"}, rita)  # already hers: left alone
    before = len(events())
    with mock.patch.object(notifications, "assigned", wraps=notifications.assigned) as assigned:
        changed = drift.bulk_update([c.pk for c in cases], "assign", rita, assignee="mei")
    assert sorted(c.pk for c in changed) == sorted(c.pk for c in cases[1:])
    new = events()[before:]
    assert sorted(int(e.object_id) for e in new) == sorted(c.pk for c in cases[1:]), "one event per case changed"
    assert all(e.after["assignee"] == "mei" and e.actor_label == "rita" for e in new)
    assert assigned.call_count == 3
    assert Notification.objects.filter(recipient=mei, kind="assignment").count() == 4
    assert set(DriftCase.objects.values_list("assignee__username", flat=True)) == {"mei"}


def test_bulk_is_all_or_nothing(cases):
    rita, mei = person("rita"), person("mei")
    drift.update_drift_case(cases[2].pk, {"claim": True}, mei)
    before = AuditEvent.objects.count()
    with pytest.raises(Conflict, match=f"case #{cases[2].pk}: mei holds this case"):
        drift.bulk_update([c.pk for c in cases], "claim", rita)
    assert AuditEvent.objects.count() == before
    assert not DriftCase.objects.filter(assignee=rita).exists(), "the cases before the refused one are not claimed"
    with pytest.raises(InvalidInput, match="needs a verdict"):
        drift.bulk_update([cases[0].pk], "dismiss", rita)
    with pytest.raises(InvalidInput, match="API key"):
        create_api_key("bot", "reviewer")
        drift.bulk_update([cases[0].pk], "assign", rita, assignee="api:bot")
    with pytest.raises(InvalidInput, match="select at least one"):
        drift.bulk_update([], "claim", rita)


def test_the_queue_dismisses_the_ticked_cases(cases):
    rita = person("rita")
    client = client_of(rita)
    queue = html_of(client.get("/drift/", {"severity": "low"}))
    assert 'id="bulk-form"' in queue and f'name="case" value="{cases[0].pk}" form="bulk-form"' in queue
    picked = [cases[0].pk, cases[3].pk]
    response = client.post(
        "/drift/bulk", {"case": picked, "action": "dismiss", "verdict": "noise", "queue": "severity=low"}
    )
    assert response.status_code == 303 and response["Location"] == "/drift/?severity=low"
    assert set(DriftCase.objects.filter(status="dismissed").values_list("pk", flat=True)) == set(picked)
    assert sorted(int(e.object_id) for e in events()) == sorted(picked)
    page = html_of(client.get(response["Location"]))
    assert "Dismissed 2 cases." in page
    # a refused batch says why and changes nothing
    response = client.post("/drift/bulk", {"case": [cases[1].pk], "action": "dismiss", "verdict": ""}, follow=True)
    assert "dismissing needs a verdict" in html_of(response) and DriftCase.objects.get(pk=cases[1].pk).status == "open"


def test_a_viewer_cannot_bulk_change(cases, as_viewer):
    assert as_viewer.post("/drift/bulk", {"case": [cases[0].pk], "action": "claim"}).status_code == 403
    assert 'id="bulk-form"' not in html_of(as_viewer.get("/drift/"))


def test_the_api_bulk_claims(cases):
    key = create_api_key("rev", "reviewer")[1]
    response = Client().post(
        "/api/v1/drift-cases/bulk",
        json.dumps({"cases": [cases[0].pk, cases[1].pk], "action": "claim"}),
        content_type="application/json",
        headers={"Authorization": f"Bearer {key}"},
    )
    assert response.status_code == 200, response.content
    assert [c["assignee"] for c in response.json()] == ["api:rev", "api:rev"]
    assert len(events()) == 2


# --------------------------------------------------------------------------- next case


def test_save_and_next_goes_to_the_next_open_case_of_the_filter(cases):
    rita = person("rita")
    client = client_of(rita)
    newest, low_older = cases[3], cases[0]  # both low; the queue lists newest first
    queue = html_of(client.get("/drift/", {"severity": "low"}))
    assert f'href="/drift/{newest.pk}/?severity=low"' in queue
    page = html_of(client.get(f"/drift/{newest.pk}/", {"severity": "low"}))
    assert f'href="/drift/{low_older.pk}/?severity=low" rel="next"' in page, "n follows rel=next"
    assert 'name="queue" value="severity=low"' in page
    data = {"action": "status", "status": "dismissed", "verdict": "fine", "then": "next", "queue": "severity=low"}
    response = client.post(f"/drift/{newest.pk}/update", data, headers=HX)
    assert response.status_code == 200 and response["HX-Redirect"] == f"/drift/{low_older.pk}/?severity=low"
    # the last open case of the filter: back to the queue, saying so
    data |= {"status": "confirmed"}
    response = client.post(f"/drift/{low_older.pk}/update", data)
    assert response.status_code == 303 and response["Location"] == "/drift/?severity=low"
    assert "No open case is left in this filter." in html_of(client.get(response["Location"]))


def test_a_plain_save_offers_the_next_case(cases):
    client = client_of(person("rita"))
    data = {"action": "status", "status": "dismissed", "verdict": "fine"}
    html = html_of(client.post(f"/drift/{cases[1].pk}/update", data, headers=HX))
    assert "Status changed to dismissed." in html and f'href="/drift/{cases[0].pk}/"' in html
    assert drift.next_open_case(cases[0], DriftCase.objects.all()) == cases[3], "wraps to the newest"


# --------------------------------------------------------------------------- pairwise


@pytest.fixture
def pair(archive: Archive, active: Summary) -> tuple[Summary, Summary]:
    return active, crafted(archive, active.text.replace("Decisions", "Choices"))


def test_a_pairwise_verdict_is_stored_audited_and_shown(pair, archive):
    a, b = pair
    rita = person("rita")
    client = client_of(rita)
    page = html_of(client.get(f"/archives/{archive.pk}/compare", {"a": a.pk, "b": b.pk}))
    assert 'id="pairwise"' in page and 'value="both_wrong"' in page
    data = {"a": a.pk, "b": b.pk, "verdict": "b_better", "note": "clearer decisions"}
    response = client.post(f"/archives/{archive.pk}/compare/review", data, headers=HX)
    assert response.status_code == 200 and "Your verdict is recorded." in html_of(response)
    review = PairwiseReview.objects.get()
    assert (review.a, review.b, review.verdict, review.reviewer) == (a, b, "b_better", rita)
    event = AuditEvent.objects.get(action="summary.pairwise_review")
    assert event.object_type == "archive" and event.after["verdict"] == "b_better"
    shown = html_of(client.get(f"/archives/{archive.pk}/compare", {"a": a.pk, "b": b.pk}))
    assert "B is better" in shown and "clearer decisions" in shown
    flipped = html_of(client.get(f"/archives/{archive.pk}/compare", {"a": b.pk, "b": a.pk}))
    assert "A is better" in flipped, "read the other way round, the same verdict favours A"


def test_a_secret_in_a_pairwise_note_is_masked(pair, archive):
    a, b = pair
    client = client_of(person("rita"))
    data = {"a": a.pk, "b": b.pk, "verdict": "same", "note": f"the key {SECRET} leaked in both"}
    assert SECRET not in html_of(client.post(f"/archives/{archive.pk}/compare/review", data, headers=HX))
    page = html_of(client.get(f"/archives/{archive.pk}/compare", {"a": a.pk, "b": b.pk}))
    assert "leaked in both" in page and SECRET not in page
    headers = {"Authorization": f"Bearer {create_api_key('rev', 'reviewer')[1]}"}
    listed = Client().get(f"/api/v1/archives/{archive.pk}/pairwise-reviews", headers=headers)
    assert "leaked in both" in listed.content.decode() and SECRET not in listed.content.decode()


def test_a_pairwise_verdict_is_refused_when_incomplete(pair, archive):
    a, b = pair
    client = client_of(person("rita"))
    response = client.post(f"/archives/{archive.pk}/compare/review", {"a": a.pk, "b": b.pk}, headers=HX)
    assert response.status_code == 422 and "Pick a verdict." in html_of(response)
    data = {"a": a.pk, "b": b.pk, "verdict": "both_wrong", "note": ""}
    response = client.post(f"/archives/{archive.pk}/compare/review", data, headers=HX)
    assert response.status_code == 422 and "say what both versions get wrong" in html_of(response)
    assert not PairwiseReview.objects.exists()
    viewer = client_of(person("vic", "viewer"))
    assert viewer.post(f"/archives/{archive.pk}/compare/review", data | {"note": "x"}).status_code == 403


def test_the_api_records_and_lists_pairwise_verdicts(pair, archive):
    a, b = pair
    headers: dict[str, Any] = {"Authorization": f"Bearer {create_api_key('rev', 'reviewer')[1]}"}
    url = f"/api/v1/archives/{archive.pk}/pairwise-reviews"
    body = {"a": a.pk, "b": b.pk, "verdict": "same", "note": ""}
    response = Client().post(url, json.dumps(body), content_type="application/json", headers=headers)
    assert response.status_code == 201, response.content
    assert response.json()["a"] == a.summary_id and response.json()["reviewer"] == "api:rev"
    bad = Client().post(url, json.dumps(body | {"verdict": "meh"}), content_type="application/json", headers=headers)
    assert bad.status_code == 422
    listed = Client().get(url, headers=headers).json()
    assert [r["verdict"] for r in listed] == ["same"]


def test_the_new_controls_are_translated(pair, archive, cases):
    a, b = pair
    client = client_of(person("rita"))
    zh = {"headers": {"Accept-Language": "zh-hans"}}
    pages = [
        html_of(client.get("/drift/", **zh)),
        html_of(client.get(f"/drift/{cases[0].pk}/", **zh)),
        html_of(client.get(f"/archives/{archive.pk}/compare", {"a": a.pk, "b": b.pk}, **zh)),
    ]
    english = ["With the selected cases", "Select all", "Save and next case", "Next open case", "Back to the queue"]
    english += ["Your verdict on this pair", "Which is better", "A is better", "Both are wrong", "Record verdict"]
    for text in english:
        assert not any(text in html for html in pages), text
    assert "对所选案例" in pages[0] and "保存并转到下一个" in pages[1] and "两个都有错" in pages[2]
