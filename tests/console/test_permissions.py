"""The role matrix (viewer, operator, reviewer, admin), enforced alike by the pages and the API."""

from __future__ import annotations

import json
from typing import Any

import pytest
from django.contrib.auth.models import Group, User
from django.test import Client

from console.apikeys import create_api_key
from console.models import DriftCase, Summary
from console.roles import ROLE_PERMISSIONS

#: what each role may do; the tests below check every cell, by page and by API
MATRIX = {
    #            read   open   review promote resummarize audit
    "viewer": (True, False, False, False, False, False),
    "operator": (True, True, False, True, True, False),
    "reviewer": (True, True, True, False, False, False),
    "admin": (True, True, True, True, True, True),
}
ACTIONS = ("read", "open", "review", "promote", "resummarize", "audit")


def allowed(role: str, action: str) -> bool:
    return MATRIX[role][ACTIONS.index(action)]


def test_the_matrix_covers_every_role():
    assert set(MATRIX) == set(ROLE_PERMISSIONS)


@pytest.fixture
def case(archive, active) -> DriftCase:
    return DriftCase.objects.create(
        summary=active,
        session=archive.session,
        severity="high",
        findings=[{"kind": "constraint_inverted", "severity": "high", "evidence": {"original": "a", "summary": "b"}}],
    )


@pytest.fixture
def draft(archive, active) -> Summary:
    return Summary.objects.create(
        archive=archive, text=active.text, status="draft", summary_id="sum_perm_draft", provenance={}
    )


def page_attempts(case: DriftCase, draft: Summary, active: Summary) -> dict[str, tuple[str, str, dict[str, Any]]]:
    quote = active.text.splitlines()[0].lstrip("# ")
    return {
        "read": ("get", f"/drift/{case.pk}/", {}),
        "open": ("post", f"/summaries/{active.pk}/open-case", {"quote": quote, "kind": "other", "severity": "low"}),
        "review": ("post", f"/drift/{case.pk}/update", {"action": "claim"}),
        "promote": ("post", f"/summaries/{draft.pk}/promote", {}),
        "resummarize": ("post", f"/archives/{draft.archive_id}/resummarize", {"summarizer": "bogus"}),
        "audit": ("get", "/audit/", {}),
    }


@pytest.mark.parametrize("role", list(MATRIX))
@pytest.mark.parametrize("action", ACTIONS)
def test_pages_enforce_the_matrix(login, case, draft, active, role, action):
    method, url, data = page_attempts(case, draft, active)[action]
    client = login(role)

    response = getattr(client, method)(url, data)

    if allowed(role, action):
        assert response.status_code != 403, (role, action)
        assert response.status_code in (200, 303, 422), (role, action, response.status_code)
    else:
        assert response.status_code == 403, (role, action, response.status_code)


@pytest.mark.parametrize("role", list(MATRIX))
@pytest.mark.parametrize("action", ["read", "open", "review", "promote", "resummarize"])
def test_the_api_enforces_the_matrix(db, case, draft, active, role, action):
    client = Client()
    headers = {"Authorization": f"Bearer {create_api_key(f'key-{role}', role)[1]}"}
    quote = active.text.splitlines()[0].lstrip("# ")
    method, url, body = {
        "read": ("get", f"/drift-cases/{case.pk}", None),
        "open": ("post", "/drift-cases", {"summary": active.pk, "quote": quote, "kind": "other", "severity": "low"}),
        "review": ("patch", f"/drift-cases/{case.pk}", {"claim": True}),
        "promote": ("post", f"/summaries/{draft.pk}/promote", {}),
        "resummarize": ("post", f"/archives/{draft.archive_id}/summaries", {"summarizer": "bogus"}),
    }[action]
    if method == "get":
        response = client.get(f"/api/v1{url}", headers=headers)
    else:
        call = getattr(client, method)
        response = call(f"/api/v1{url}", json.dumps(body), content_type="application/json", headers=headers)

    if allowed(role, action):
        assert response.status_code in (200, 201, 202, 422), (role, action, response.status_code, response.content)
    else:
        assert response.status_code == 403, (role, action, response.status_code)
        assert "your role may not" in response.json()["detail"]


def test_a_reviewer_who_is_also_an_operator_may_promote(login, draft):
    client = login("reviewer")
    client.user.groups.add(Group.objects.get(name="operator"))
    assert client.post(f"/summaries/{draft.pk}/promote").status_code == 303
    draft.refresh_from_db()
    assert draft.status == "active"


def test_a_comment_through_the_api_records_mentions(db, case):
    User.objects.create_user("mei").groups.add(Group.objects.get(name="reviewer"))
    headers = {"Authorization": f"Bearer {create_api_key('rev', 'reviewer')[1]}"}
    response = Client().post(
        f"/api/v1/drift-cases/{case.pk}/comments",
        json.dumps({"body": "@mei 请看一下", "quote": "b"}),
        content_type="application/json",
        headers=headers,
    )
    assert response.status_code == 201 and response.json()["mentions"] == ["mei"]
    detail = Client().get(f"/api/v1/drift-cases/{case.pk}", headers=headers).json()
    assert detail["comments"][0]["mentions"] == ["mei"] and detail["kinds"] == ["constraint_inverted"]
