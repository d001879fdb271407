"""Pages: text the database cannot hold (NUL) in a URL or form is a 400 naming it, huge page numbers are
clamped; neither is a 500 (issue 14, item 7). Run on PostgreSQL in CI, which refuses NUL in text."""

from __future__ import annotations

import pytest
from django.contrib.auth.models import Group, User

from console.models import AuditEvent, DriftCase, Session
from tests.console.test_api_input import world  # noqa: F401 (fixture)

BIG = str(10**30)


@pytest.mark.parametrize(
    ("url", "named"),
    [
        ("/?q=%00", "'q'"),
        ("/?channel=a%00", "'channel'"),
        ("/?status=%00", "'status'"),
        ("/drift/?session=%00", "'session'"),
        ("/drift/?assignee=%00", "'assignee'"),
        ("/audit/?actor=%00", "'actor'"),
        ("/audit/?object=%00", "'object'"),
        ("/audit/?action=%00", "'action'"),
        ("/drift/export.jsonl?session=%00", "'session'"),
        ("/?%00=1", "'\\\\u0000'"),
        ("/messages/%00/", "URL path"),
    ],
)
def test_a_nul_character_in_a_page_url_is_a_400_naming_it(superuser, url, named):
    response = superuser.get(url)
    assert response.status_code == 400
    text = response.content.decode()
    assert "contains a NUL character" in text and named in text


def test_a_nul_character_in_a_posted_form_field_is_a_400_and_changes_nothing(world, db):  # noqa: F811
    reviewer = User.objects.create_user("rita", password="pw")
    reviewer.groups.add(Group.objects.get(name="reviewer"))
    from django.test import Client

    client = Client()
    client.force_login(reviewer)
    before = AuditEvent.objects.count()
    response = client.post(f"/drift/{world['case']}/update", {"action": "assign", "assignee": "a\x00b"})
    assert response.status_code == 400
    assert "form field 'assignee'" in response.content.decode()
    assert DriftCase.objects.get(pk=world["case"]).assignee is None
    assert AuditEvent.objects.count() == before


@pytest.mark.parametrize(
    "url",
    [
        f"/?page={BIG}",
        "/?page=1e400",
        "/?page=-5",
        f"/drift/?page={BIG}",
        f"/audit/?page={BIG}",
        f"/dashboard/?days={BIG}",
        "/archives/{archive}/?page=" + BIG,
        "/archives/{archive}/?at=" + BIG,
        "/archives/{archive}/?at=-" + BIG,
        "/sessions/{session}/?start=" + BIG + "&at=" + BIG,
        "/sessions/{session}/?start=-" + BIG,
    ],
)
def test_huge_page_numbers_are_clamped_not_a_server_error(superuser, world, url):  # noqa: F811
    ids = world | {"session": Session.objects.get(key="w:1").pk}
    response = superuser.get(url.format(**ids))
    assert response.status_code in (200, 302), (url, response.status_code)
