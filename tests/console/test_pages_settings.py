"""API keys in the console, the favicon, and the 403 and 404 pages inside the console's layout."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from django.conf import settings
from django.test import Client

from console.models import ApiKey, AuditEvent
from tests.console.factories import html_of

pytestmark = pytest.mark.django_db


def test_an_admin_creates_a_key_shown_once_and_it_works(superuser):
    response = superuser.post("/settings/api-keys/", {"action": "create", "name": "runtime-1", "role": "operator"})
    assert response.status_code == 303
    page = html_of(superuser.get("/settings/api-keys/"))
    key = re.search(r'<pre class="content mono" id="api-key-value">(ccs_[^<]+)</pre>', page).group(1)
    assert 'id="api-key-value"' not in html_of(superuser.get("/settings/api-keys/"))  # shown once
    row = ApiKey.objects.get(name="runtime-1")
    assert row.key_sha256 == ApiKey.digest(key) and row.user.groups.get().name == "operator"
    assert AuditEvent.objects.filter(action="api_key.create", object_id=str(row.pk)).exists()

    assert Client().get("/api/v1/sessions", headers={"Authorization": f"Bearer {key}"}).status_code == 200
    page = html_of(superuser.get("/settings/api-keys/"))
    assert "never" not in page.split(f'id="key-{row.pk}"')[1].split("</tr>")[0]  # last used: just now


def test_an_admin_revokes_a_key(superuser):
    superuser.post("/settings/api-keys/", {"action": "create", "name": "old-runtime", "role": "viewer"})
    page = html_of(superuser.get("/settings/api-keys/"))
    key = re.search(r'id="api-key-value">(ccs_[^<]+)<', page).group(1)
    assert 'data-confirm="Revoke the key old-runtime?' in page
    response = superuser.post("/settings/api-keys/", {"action": "revoke", "name": "old-runtime"}, follow=True)
    assert "API key old-runtime revoked." in html_of(response) and "revoked" in html_of(response)
    assert AuditEvent.objects.filter(action="api_key.revoke").exists()
    assert Client().get("/api/v1/sessions", headers={"Authorization": f"Bearer {key}"}).status_code == 401


def test_a_bad_name_or_role_is_refused_and_nothing_is_made(superuser):
    response = superuser.post("/settings/api-keys/", {"action": "create", "name": "has space", "role": "operator"})
    assert response.status_code == 422 and "may only hold letters" in html_of(response)
    response = superuser.post("/settings/api-keys/", {"action": "create", "name": "x", "role": "god"})
    assert response.status_code == 422
    assert not ApiKey.objects.exists()


def test_only_admins_manage_keys_and_others_get_a_403_inside_the_layout(login):
    for role in ("viewer", "operator", "reviewer"):
        response = login(role).get("/settings/api-keys/")
        assert response.status_code == 403
        html = html_of(response)
        assert '<nav aria-label="Main">' in html and "Your role may not do this" in html
        assert 'href="/settings/api-keys/"' not in html  # no link to what they may not open
    admin = login("admin")
    assert admin.get("/settings/api-keys/").status_code == 200
    assert 'href="/settings/api-keys/"' in html_of(admin.get("/"))


def test_the_404_page_is_inside_the_layout_in_both_languages(as_viewer):
    response = as_viewer.get("/sessions/999999/")
    assert response.status_code == 404
    html = html_of(response)
    assert '<nav aria-label="Main">' in html and "There is nothing at this address" in html
    assert 'href="/runs/"' in html
    as_viewer.cookies["django_language"] = "zh-hans"
    assert "此地址没有内容" in html_of(as_viewer.get("/no/such/page/"))


def test_every_page_links_the_favicon_and_it_exists(as_viewer):
    html = html_of(as_viewer.get("/"))
    href = re.search(r'<link rel="icon" href="([^"]+)" type="image/svg\+xml">', html).group(1)
    assert href.endswith("favicon.svg")
    assert (Path(settings.BASE_DIR) / "static" / "favicon.svg").read_text().startswith("<svg")
    response = Client().get("/favicon.ico")  # no login needed
    assert response.status_code == 301 and response["Location"].endswith("favicon.svg")


def test_every_page_carries_the_keyboard_help(as_viewer):
    html = html_of(as_viewer.get("/runs/"))
    assert '<dialog id="keyboard-help"' in html and "<kbd>/</kbd>" in html and "data-keyboard-help" in html
    as_viewer.cookies["django_language"] = "zh-hans"
    assert "键盘快捷键" in html_of(as_viewer.get("/runs/"))
