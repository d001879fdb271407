"""Mentions reach someone: a mentions view shows cases in any status, an unknown @name is refused, and only
people (not API keys) are offered or accepted as assignees."""

from __future__ import annotations

import json

import pytest
from django.contrib.auth.models import Group, User
from django.test import Client

from console.apikeys import create_api_key
from console.errors import InvalidInput
from console.models import AuditEvent, DriftCase, DriftComment
from console.roles import reviewers
from console.services import drift
from tests.console.factories import HX, html_of
from tests.console.test_pages_drift import case, confirm, drifting  # noqa: F401 (fixtures)

pytestmark = pytest.mark.django_db


def reviewer(name: str) -> User:
    user = User.objects.create_user(name, password="pw")
    user.groups.add(Group.objects.get(name="reviewer"))
    return user


def client_of(user: User) -> Client:
    client = Client()
    client.force_login(user)
    return client


def test_mentioning_me_still_finds_the_case_once_it_is_confirmed(case):  # noqa: F811
    rita, mei = reviewer("rita"), reviewer("mei")
    drift.add_comment(case, "@mei is this real?", "", rita)
    confirm(case, rita)
    html = html_of(client_of(mei).get("/drift/", {"mentions": "me"}))
    assert f'href="/drift/{case.pk}/' in html
    # an explicit status still narrows it
    narrowed = client_of(mei).get("/drift/", {"mentions": "me", "status": "open"})
    assert f'href="/drift/{case.pk}/' not in html_of(narrowed)
    # and the plain queue keeps its default: open cases
    assert f'href="/drift/{case.pk}/' not in html_of(client_of(mei).get("/drift/"))


def test_an_unknown_name_is_refused_and_nothing_is_written(case):  # noqa: F811
    rita = reviewer("rita")
    reviewer("mei")
    with pytest.raises(InvalidInput, match="@nobody"):
        drift.add_comment(case, "@mei and @nobody, look", "", rita)
    assert not DriftComment.objects.exists() and not AuditEvent.objects.filter(action="drift_case.comment").exists()

    response = client_of(rita).post(f"/drift/{case.pk}/comment", {"body": "ping @nobody", "quote": ""}, headers=HX)
    assert response.status_code == 422 and "@nobody" in html_of(response)
    assert "ping @nobody" in html_of(response), "the form keeps what was typed"
    assert not DriftComment.objects.exists()

    # a PATCH with a status change and a bad mention changes nothing at all
    key = create_api_key("rev", "reviewer")[1]
    response = Client().patch(
        f"/api/v1/drift-cases/{case.pk}",
        json.dumps({"status": "dismissed", "verdict": "fine", "comment": "@ghost see"}),
        content_type="application/json",
        headers={"Authorization": f"Bearer {key}"},
    )
    assert response.status_code == 422 and "@ghost" in response.json()["detail"]
    assert DriftCase.objects.get(pk=case.pk).status == "open" and not DriftComment.objects.exists()


def test_an_email_address_is_not_a_mention(case):  # noqa: F811
    comment = drift.add_comment(case, "mail ops@example.com about it", "", reviewer("rita"))
    assert not comment.mentions.exists()


def test_api_key_users_are_not_assignable(case):  # noqa: F811
    rita = reviewer("rita")
    key_row, _ = create_api_key("bot", "reviewer")
    assert key_row.user.has_perm("console.review_drift")
    assert list(reviewers().values_list("username", flat=True)) == ["rita"]
    with pytest.raises(InvalidInput, match="API key"):
        drift.update_drift_case(case.pk, {"assignee": "api:bot"}, rita)
    html = html_of(client_of(rita).get(f"/drift/{case.pk}/"))
    assert "api:bot" not in html and ">rita<" in html
    assert "api:bot" not in html_of(client_of(rita).get("/drift/"))
    with pytest.raises(InvalidInput, match="@api"):
        drift.add_comment(case, "@api:bot hello", "", rita)
