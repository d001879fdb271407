"""Filters say when a value is unknown: the API answers 422 naming the allowed values, the pages show an error
(and ignore the value) instead of silently listing nothing."""

from __future__ import annotations

import pytest
from django.test import Client

from console.apikeys import create_api_key
from console.models import DriftCase, Summary
from console.services import drift
from tests.console.factories import html_of

pytestmark = pytest.mark.django_db


@pytest.fixture
def api() -> dict[str, str]:
    return {"Authorization": f"Bearer {create_api_key('auditor', 'admin')[1]}"}


@pytest.fixture
def cases(active: Summary) -> list[DriftCase]:
    made = [drift.open_case(active.pk, quote="Decisions", kind="other", severity="low", note="", user=None)]
    made.append(drift.open_case(active.pk, quote="Decisions", kind="other", severity="high", note="", user=None))
    return made


@pytest.mark.parametrize(
    ("url", "params", "named"),
    [
        ("/api/v1/drift-cases", {"status": "bogus"}, "one of: open, confirmed, dismissed, resolved"),
        ("/api/v1/drift-cases", {"status": "all"}, "one of: open, confirmed, dismissed, resolved"),
        ("/api/v1/drift-cases", {"severity": "urgent"}, "one of: low, medium, high"),
        ("/api/v1/drift-cases", {"kind": "bogus"}, "one of: "),
        ("/api/v1/drift-cases", {"mentions": "you"}, "mentions"),
        ("/api/v1/drift-cases", {"assignee": "nobody"}, "no user 'nobody'"),
        ("/api/v1/audit-events", {"object": "bogus:3"}, "one of: "),
        ("/api/v1/audit-events", {"since": "yesterday"}, "since"),
    ],
)
def test_the_api_refuses_unknown_filter_values(api, url, params, named):
    response = Client().get(url, params, headers=api)
    assert response.status_code == 422, response.content
    assert named in response.json()["detail"]


def test_the_api_lists_every_status_without_a_status(api, cases):
    drift.update_drift_case(cases[0].pk, {"status": "dismissed", "verdict": "fine"}, None)
    every = Client().get("/api/v1/drift-cases", headers=api).json()
    assert every["count"] == 2
    assert Client().get("/api/v1/drift-cases", {"status": "open"}, headers=api).json()["count"] == 1
    aliases = Client().get("/api/v1/audit-events", {"object": "case"}, headers=api)
    assert aliases.status_code == 200 and aliases.json()["count"] >= 2


def test_the_queue_page_says_which_value_it_ignored(as_reviewer, cases):
    response = as_reviewer.get("/drift/", {"severity": "urgent", "status": "everything"})
    html = html_of(response)
    assert response.status_code == 200 and 'class="form-error filter-problems"' in html
    assert "has no value “urgent”" in html and "high, medium, low" in html
    assert "has no value “everything”" in html and "open, confirmed, dismissed, resolved, all" in html
    assert all(f'href="/drift/{c.pk}/' in html for c in cases), "ignored, not turned into an empty list"
    assert "filter-problems" not in html_of(as_reviewer.get("/drift/", {"severity": "high"}))


def test_the_sessions_and_audit_pages_say_so_too(superuser, archive):
    html = html_of(superuser.get("/", {"compressed": "maybe", "sort": "size"}))
    assert "has no value “maybe”" in html and "yes, no" in html and "has no value “size”" in html
    html = html_of(superuser.get("/audit/", {"since": "last week", "object": "widget"}))
    assert "“last week” is not a valid" in html and "has no value “widget”" in html
    assert "filter-problems" not in html_of(superuser.get("/audit/", {"object": "run", "since": "2026-01-01"}))


def test_the_queue_in_chinese_explains_it_in_chinese(as_reviewer, cases):
    html = html_of(as_reviewer.get("/drift/", {"severity": "urgent"}, headers={"Accept-Language": "zh-hans"}))
    assert "urgent" in html and "has no value" not in html and "被忽略" in html
