"""Login is required everywhere but the login page and /healthz; roles are groups."""

import pytest
from django.contrib.auth.models import Group, User

from console.roles import ROLE_PERMISSIONS


@pytest.mark.django_db
@pytest.mark.parametrize("url", ["/", "/admin/"])
def test_it_sends_anonymous_users_to_login(client, url):
    response = client.get(url)
    assert response.status_code == 302
    assert "/login/" in response["Location"]


@pytest.mark.django_db
def test_it_serves_the_login_page_anonymously(client):
    response = client.get("/login/")
    assert response.status_code == 200
    assert b'name="password"' in response.content


@pytest.mark.django_db
def test_it_logs_in_and_out(client):
    alice = User.objects.create_user("alice", password="correct horse battery")
    alice.groups.add(Group.objects.get(name="viewer"))  # the sessions list needs console.view_session
    response = client.post("/login/", {"username": "alice", "password": "correct horse battery"})
    assert response.status_code == 302
    assert client.get("/").status_code == 200
    client.post("/logout/")
    assert client.get("/").status_code == 302


@pytest.mark.django_db
def test_it_rejects_a_wrong_password(client):
    User.objects.create_user("alice", password="correct horse battery")
    response = client.post("/login/", {"username": "alice", "password": "wrong"})
    assert response.status_code == 200
    assert b'role="alert"' in response.content


@pytest.mark.django_db
def test_it_creates_role_groups_with_their_permissions():
    for role, perms in ROLE_PERMISSIONS.items():
        group = Group.objects.get(name=role)
        names = {f"{p.content_type.app_label}.{p.codename}" for p in group.permissions.all()}
        assert names == set(perms)
    viewer = User.objects.create_user("v")
    viewer.groups.add(Group.objects.get(name="viewer"))
    operator = User.objects.create_user("o")
    operator.groups.add(Group.objects.get(name="operator"))
    assert viewer.has_perm("console.view_session")
    assert not viewer.has_perm("console.compress_session")
    assert operator.has_perm("console.compress_session")
    assert not operator.has_perm("console.review_drift")


@pytest.mark.django_db
def test_it_switches_language_without_login(client):
    response = client.post("/i18n/setlang/", {"language": "zh-hans", "next": "/login/"})
    assert response.status_code == 302
    page = client.get("/login/")
    assert "登录" in page.content.decode()
