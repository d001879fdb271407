"""The database goes away: pages and the API answer 503 with Retry-After, not 500.

The outage is this process's connection pointed somewhere nothing answers (a closed port for PostgreSQL,
a folder that does not exist for SQLite); the shared database itself is never stopped.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from django.contrib.auth.models import User
from django.db import connection
from django.test import Client

from console.apikeys import create_api_key
from tests.faults.conftest import free_port

pytestmark = [pytest.mark.faults, pytest.mark.django_db(transaction=True)]


@pytest.fixture
def database_down() -> Iterator[None]:
    saved = dict(connection.settings_dict)
    connection.close()
    if connection.vendor == "sqlite":
        connection.settings_dict["NAME"] = "/nonexistent-folder/console.sqlite3"
    else:
        connection.settings_dict["HOST"], connection.settings_dict["PORT"] = "127.0.0.1", str(free_port())
        connection.settings_dict.setdefault("OPTIONS", {})["connect_timeout"] = 2
    try:
        yield
    finally:
        connection.close()
        connection.settings_dict.clear()
        connection.settings_dict.update(saved)


@pytest.fixture
def clients() -> dict[str, Any]:
    key = create_api_key("outage-runtime", "operator")[1]
    browser = Client(raise_request_exception=False)
    browser.force_login(User.objects.create_user("outage-admin", is_staff=True, is_superuser=True))
    return {"key": key, "browser": browser}


def test_a_database_outage_answers_503_with_retry_after_for_pages_and_the_api(clients, database_down):
    api = Client(raise_request_exception=False, headers={"Authorization": f"Bearer {clients['key']}"})
    answers = {
        "api read": api.get("/api/v1/sessions"),
        "api write": api.post("/api/v1/sessions", {"key": "down:1", "messages": []}, content_type="application/json"),
        "page": clients["browser"].get("/"),
        "login page post": Client(raise_request_exception=False).post("/login/", {"username": "x", "password": "y"}),
    }

    for name, response in answers.items():
        assert response.status_code == 503, (name, response.status_code, response.content[:500])
        assert int(response["Retry-After"]) > 0, name
    assert answers["api write"].json()["detail"].startswith("the database is unavailable")
    assert b"Service unavailable" in answers["page"].content
    health = Client(raise_request_exception=False).get("/healthz")
    assert health.status_code == 503


def test_the_service_answers_again_once_the_database_is_back(clients):
    api = Client(headers={"Authorization": f"Bearer {clients['key']}"})
    assert api.get("/api/v1/sessions").status_code == 200
    assert clients["browser"].get("/").status_code == 200
