"""Throttling (issue 14, item 8): login lockout (django-axes), per-key API rate limits, and 401s per client IP."""

from __future__ import annotations

import pytest
from django.contrib.auth.models import User
from django.test import Client

from console.models import Session
from tests.console.test_api import Api, issue_key


@pytest.mark.django_db
def test_login_guessing_is_locked_out_within_ten_attempts(settings):
    User.objects.create_user("alice", password="the-right-one")
    client = Client()
    statuses = [client.post("/login/", {"username": "alice", "password": f"guess-{n}"}).status_code for n in range(10)]
    assert statuses[0] == 200  # the form again, with its error
    assert 429 in statuses, statuses
    locked_at = statuses.index(429)
    assert locked_at < settings.AXES_FAILURE_LIMIT + 1 <= 10
    # locked: even the right password is refused until the cool-off ends
    response = client.post("/login/", {"username": "alice", "password": "the-right-one"})
    assert response.status_code == 429
    assert "_auth_user_id" not in client.session
    text = response.content.decode()
    assert "Too many failed logins" in text and f"after {settings.AXES_FAILURE_LIMIT} wrong passwords" in text
    client.cookies["django_language"] = "zh-hans"
    assert "登录失败次数过多" in client.post("/login/", {"username": "alice", "password": "x"}).content.decode()


@pytest.mark.django_db
def test_a_lockout_is_per_user_and_a_good_login_still_works_for_others():
    User.objects.create_user("alice", password="the-right-one")
    User.objects.create_user("bob", password="bobs-password")
    client = Client()
    for n in range(10):
        client.post("/login/", {"username": "alice", "password": f"guess-{n}"})
    response = client.post("/login/", {"username": "bob", "password": "bobs-password"})
    assert response.status_code == 302
    assert Client().post("/login/", {"username": "bob", "password": "bobs-password"}).status_code == 302


@pytest.mark.django_db
def test_an_api_key_past_its_rate_gets_429_with_retry_after(settings):
    settings.API_RATE_LIMIT = "5/min"
    fast = Api(issue_key("fast", "viewer"))
    other = Api(issue_key("other", "viewer"))
    statuses = [fast.get("/sessions").status_code for _ in range(8)]
    assert statuses == [200] * 5 + [429] * 3
    response = fast.get("/sessions")
    assert response.status_code == 429
    assert int(response["Retry-After"]) > 0
    assert "too many requests" in response.json()["detail"]
    assert other.get("/sessions").status_code == 200  # per key, not for everyone


@pytest.mark.django_db
def test_a_throttled_write_writes_nothing(settings):
    settings.API_RATE_LIMIT = "1/min"
    operator = Api(issue_key("writer", "operator"))
    assert operator.post("/sessions", {"key": "t:1"}).status_code == 201
    assert operator.post("/sessions", {"key": "t:2"}).status_code == 429
    assert list(Session.objects.values_list("key", flat=True)) == ["t:1"]


@pytest.mark.django_db
def test_random_bearer_keys_are_throttled_per_client_ip(settings):
    settings.API_AUTH_FAILURE_LIMIT = "5/min"
    good = issue_key("good", "viewer")
    statuses = [Api(f"ccs_{n:012d}_guess").get("/sessions").status_code for n in range(8)]
    assert statuses == [401] * 5 + [429] * 3
    assert int(Api("ccs_x_y").get("/sessions")["Retry-After"]) > 0
    # a good key from that address (another client behind the same NAT) is never locked out by them
    assert [Api(good).get("/sessions").status_code for _ in range(3)] == [200] * 3
    assert Api("ccs_still_bad").get("/sessions").status_code == 429, "the bad keys stay throttled meanwhile"
    elsewhere = Client(REMOTE_ADDR="10.0.0.9")
    assert elsewhere.get("/api/v1/sessions", headers={"Authorization": f"Bearer {good}"}).status_code == 200
    assert elsewhere.get("/api/v1/sessions", headers={"Authorization": "Bearer ccs_a_b"}).status_code == 401


@pytest.mark.django_db
def test_a_valid_key_is_served_whatever_the_failures_from_its_address(settings):
    settings.API_AUTH_FAILURE_LIMIT = "20/min"
    good = Api(issue_key("shared-nat", "operator"))
    statuses = []
    for n in range(60):  # bad keys and the good one interleaved, all from 127.0.0.1
        statuses.append(Api(f"ccs_{n:012d}_guess").get("/sessions").status_code)
        response = good.post("/sessions", {"key": f"nat:{n}"}) if n % 10 == 0 else good.get("/sessions")
        assert response.status_code in (200, 201), (n, response.status_code, response.content[:200])
    assert statuses == [401] * 20 + [429] * 40
    assert Session.objects.filter(key__startswith="nat:").count() == 6


@pytest.mark.django_db
def test_password_spraying_is_throttled_per_address_across_usernames(settings):
    settings.LOGIN_ADDRESS_FAILURE_LIMIT = "20/h"
    for n in range(40):
        User.objects.create_user(f"user{n:02d}", password=f"their-own-{n}")
    sprayer = Client(REMOTE_ADDR="198.51.100.7")
    statuses = [
        sprayer.post("/login/", {"username": f"user{n:02d}", "password": "Winter2026!"}).status_code for n in range(40)
    ]
    assert statuses == [200] * 20 + [429] * 20, statuses  # each username failed once only: axes alone never locks
    # refused before the password is checked: the right one from that address is refused too, saying why
    response = sprayer.post("/login/", {"username": "user39", "password": "their-own-39"})
    assert response.status_code == 429 and "_auth_user_id" not in sprayer.session
    assert "from this address, for any account" in response.content.decode()
    # another address is not affected
    elsewhere = Client(REMOTE_ADDR="198.51.100.8")
    assert elsewhere.post("/login/", {"username": "user39", "password": "their-own-39"}).status_code == 302


@pytest.mark.django_db
def test_a_few_typos_from_a_shared_address_lock_no_one_out(settings):
    settings.LOGIN_ADDRESS_FAILURE_LIMIT = "20/h"
    office = "192.0.2.10"
    for n in range(10):
        User.objects.create_user(f"colleague{n}", password=f"right-{n}")
    for n in range(10):  # ten people behind one NAT, each mistypes once, then logs in
        client = Client(REMOTE_ADDR=office)
        assert client.post("/login/", {"username": f"colleague{n}", "password": "typo"}).status_code == 200
        assert client.post("/login/", {"username": f"colleague{n}", "password": f"right-{n}"}).status_code == 302


@pytest.mark.django_db
def test_a_spoofed_forwarded_for_does_not_escape_the_ip_throttle(settings):
    settings.API_AUTH_FAILURE_LIMIT = "3/min"
    statuses = [
        Client(HTTP_X_FORWARDED_FOR=f"203.0.113.{n}")
        .get("/api/v1/sessions", headers={"Authorization": f"Bearer ccs_{n}_x"})
        .status_code
        for n in range(5)
    ]
    assert statuses == [401] * 3 + [429] * 2
