import pytest
from django.contrib.auth.models import User

from console.services import ImportedSession, create_session


@pytest.fixture
def viewer_client(client):
    user = User.objects.create_user("viewer1", password="pw-viewer-1")
    client.force_login(user)
    return client


@pytest.mark.django_db
def test_it_lists_sessions_with_counts(viewer_client):
    create_session(
        ImportedSession(
            key="wechat:abc", messages=[{"role": "user", "content": "你好"}], metadata={"channel": "wechat"}
        )
    )
    response = viewer_client.get("/")
    html = response.content.decode()
    assert response.status_code == 200
    assert "wechat:abc" in html
    assert ">1<" in html  # message count


@pytest.mark.django_db
def test_it_searches_by_key(viewer_client):
    for key in ("wechat:one", "slack:two"):
        create_session(ImportedSession(key=key, messages=[{"role": "user", "content": "hi"}], metadata={}))
    html = viewer_client.get("/", {"q": "slack"}).content.decode()
    assert "slack:two" in html
    assert "wechat:one" not in html


@pytest.mark.django_db
def test_it_escapes_html_in_session_keys(viewer_client):
    create_session(ImportedSession(key="x:<script>alert(1)</script>", messages=[], metadata={}))
    html = viewer_client.get("/").content.decode()
    assert "<script>alert(1)</script>" not in html
    assert "&lt;script&gt;" in html


@pytest.mark.django_db
def test_it_shows_chinese_interface(viewer_client):
    viewer_client.cookies["django_language"] = "zh-hans"
    html = viewer_client.get("/").content.decode()
    assert "会话" in html
