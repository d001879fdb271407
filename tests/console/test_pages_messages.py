"""/messages/<sha256>/: one stored message in full, what "show the rest" loads on every page."""

from __future__ import annotations

import pytest

from console.models import AuditEvent, Message
from console.services.sessions import ImportedSession, create_session

pytestmark = pytest.mark.django_db

SECRET = "sk-proj-" + "a1B2c3D4e5" * 4
LONG = "先不要修改部署脚本。<script>alert(1)</script>\n" + "line of tool output\n" * 400 + f"key {SECRET} END"


@pytest.fixture
def message() -> Message:
    create_session(
        ImportedSession(key="t:1", messages=[{"role": "tool", "tool_call_id": "c1", "content": LONG}], metadata={})
    )
    return Message.objects.get()


def test_it_shows_the_whole_message_escaped_and_masked(message, as_viewer):
    response = as_viewer.get(f"/messages/{message.sha256}/")
    html = response.content.decode()
    assert response.status_code == 200
    assert "<html" in html and "END" in html  # a whole page, all of the content
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in html and "<script>alert(1)" not in html
    assert "[secret:" in html and SECRET not in html


def test_it_answers_htmx_with_the_body_fragment_for_its_anchor(message, as_viewer):
    response = as_viewer.get(f"/messages/{message.sha256}/?anchor=in-7", headers={"HX-Request": "true"})
    html = response.content.decode()
    assert response.status_code == 200
    assert html.lstrip().startswith('<div class="msg-body" id="body-in-7">')
    assert "<html" not in html and "END" in html
    assert response["Vary"] and "HX-Request" in response["Vary"]


def test_it_reveals_secrets_only_with_the_permission_and_audits_it(message, as_viewer, login):
    assert as_viewer.get(f"/messages/{message.sha256}/?reveal=1").status_code == 403
    admin = login("viewer", perms=("console.reveal_secrets",))
    html = admin.get(f"/messages/{message.sha256}/?reveal=1").content.decode()
    assert SECRET in html
    event = AuditEvent.objects.get(action="secrets.reveal")
    assert event.object_id == message.sha256 and event.actor == admin.user


def test_it_refuses_users_without_a_role_and_sends_strangers_to_log_in(message, login, client):
    assert login("").get(f"/messages/{message.sha256}/").status_code == 403
    response = client.get(f"/messages/{message.sha256}/")
    assert response.status_code == 302 and response["Location"].startswith("/login/")


def test_it_answers_404_for_an_unknown_message(as_viewer):
    assert as_viewer.get(f"/messages/{'0' * 64}/").status_code == 404


def test_image_and_audio_parts_are_not_silently_dropped_from_the_page(as_viewer):
    # content_text keeps only the text parts: the voice note and the photo were invisible on every page
    content = [
        {"type": "text", "text": "Voice note attached"},
        {"type": "image_url", "image_url": {"url": "data:image/png;base64,AAAA"}},
        {"type": "input_audio", "input_audio": {"data": "AAAA", "format": "wav"}},
    ]
    create_session(ImportedSession(key="t:2", messages=[{"role": "user", "content": content}], metadata={}))
    message = Message.objects.get()
    html = as_viewer.get(f"/messages/{message.sha256}/").content.decode()
    assert '<span class="attachment mono">image</span>' in html
    assert '<span class="attachment mono">audio</span>' in html
    assert "base64,AAAA" not in html
    html = as_viewer.get(f"/messages/{message.sha256}/", headers={"Accept-Language": "zh-hans"}).content.decode()
    assert "图片" in html and "音频" in html
