"""Every write endpoint of the API reads JSON only: a multipart, form, text or untyped body is a 415, never a 500.

The endpoints are read from the OpenAPI schema, so an endpoint added later is walked too. Each is also sent
the same body as JSON, to show the 415 comes from the content type and not from the endpoint itself.
"""

from __future__ import annotations

import json
import re
from typing import Any

import pytest
from django.test import Client

from console.api import api
from console.models import AuditEvent, Session, Webhook
from tests.console.test_api import issue_key

BOUNDARY = "PlantedBoundary7MA4YWxk"

#: (name, Content-Type header or None for none at all, body)
NOT_JSON: list[tuple[str, str | None, bytes]] = [
    (
        "multipart",
        f"multipart/form-data; boundary={BOUNDARY}",
        (
            f'--{BOUNDARY}\r\nContent-Disposition: form-data; name="key"\r\n\r\nct:1\r\n'
            f'--{BOUNDARY}\r\nContent-Disposition: form-data; name="file"; filename="a.json"\r\n'
            f'Content-Type: application/json\r\n\r\n{{"key": "ct:1"}}\r\n--{BOUNDARY}--\r\n'
        ).encode(),
    ),
    ("form", "application/x-www-form-urlencoded", b"key=ct%3A1&name=x"),
    ("text", "text/plain", b'{"key": "ct:1"}'),
    ("missing", None, b'{"key": "ct:1"}'),
]

WRITES = ("post", "put", "patch", "delete")


def write_operations() -> list[tuple[str, str]]:
    """(METHOD, path) of every write operation the API documents."""
    schema = api.get_openapi_schema(path_prefix="")
    return [(method.upper(), path) for path, ops in schema["paths"].items() for method in ops if method in WRITES]


def _filled(path: str) -> str:
    return re.sub(r"\{(\w+)\}", lambda m: "ct:1" if m.group(1) == "key" else "1", path)


def send(client: Client, method: str, path: str, content_type: str | None, body: bytes, key: str) -> Any:
    meta: dict[str, Any] = {"HTTP_AUTHORIZATION": f"Bearer {key}"}
    if content_type is None:
        # the test client would add one: build the request with no Content-Type header at all
        meta["CONTENT_TYPE"] = ""
        return client.generic(method, f"/api/v1{_filled(path)}", body, content_type="", **meta)
    return client.generic(method, f"/api/v1{_filled(path)}", body, content_type=content_type, **meta)


def test_the_walk_finds_the_write_endpoints():
    operations = write_operations()
    assert len(operations) >= 10, operations
    assert ("POST", "/sessions") in operations and ("DELETE", "/webhooks/{webhook_id}") in operations


@pytest.mark.parametrize(("name", "content_type", "body"), NOT_JSON, ids=[n for n, _, _ in NOT_JSON])
def test_every_write_endpoint_refuses_a_body_that_is_not_json_with_a_415(db, name, content_type, body):
    key = issue_key("ct-admin", "admin")
    client = Client(raise_request_exception=False)
    before = (Session.objects.count(), Webhook.objects.count(), AuditEvent.objects.count())
    wrong: dict[str, Any] = {}
    for method, path in write_operations():
        response = send(client, method, path, content_type, body, key)
        if response.status_code != 415 or not response["Content-Type"].startswith("application/json"):
            wrong[f"{method} {path}"] = (response.status_code, response.content[:200])
            continue
        assert "Content-Type: application/json" in response.json()["detail"]
    assert not wrong, f"not a JSON 415 for a {name} body: {wrong}"
    assert (Session.objects.count(), Webhook.objects.count(), AuditEvent.objects.count()) == before


def test_the_same_bodies_as_json_are_read(db):
    """The control: sent as JSON, no write endpoint answers 415 or 5xx (the refusal above is the type's)."""
    key = issue_key("ct-admin", "admin")
    client = Client(raise_request_exception=False)
    for method, path in write_operations():
        response = send(client, method, path, "application/json", json.dumps({"key": "ct:1"}).encode(), key)
        assert response.status_code != 415 and response.status_code < 500, (method, path, response.content[:300])


def test_a_write_without_a_body_needs_no_content_type(db):
    key = issue_key("ct-admin", "admin")
    client = Client(raise_request_exception=False)
    created = client.post(
        "/api/v1/webhooks",
        json.dumps({"name": "w", "url": "https://hooks.example.com/in", "events": ["run.failed"]}),
        content_type="application/json",
        headers={"Authorization": f"Bearer {key}"},
    )
    assert created.status_code == 201, created.content
    response = send(client, "DELETE", f"/webhooks/{created.json()['id']}", None, b"", key)
    assert response.status_code == 204, response.content
    assert not Webhook.objects.exists()
