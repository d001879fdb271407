"""Input validated at the door: every request the attack of issue 14 answered with a 500 (or accepted against
the schema) is a 4xx naming the field, and writes nothing."""

from __future__ import annotations

import json
from io import StringIO
from pathlib import Path
from urllib.parse import quote

import pytest
from django.contrib.auth.models import Group, User
from django.core.management import CommandError, call_command
from django.test import Client
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from console.errors import InvalidInput
from console.models import AuditEvent, CompressionRun, DriftCase, DriftComment, Message, Session, Summary
from console.services import reported
from console.services.validation import check_key, check_messages, key_problem, unstorable
from tests.console.test_api import Api, issue_key

USER = {"role": "user", "content": "deploy after the tests pass"}


def counts() -> tuple[int, ...]:
    return (
        Session.objects.count(),
        Message.objects.count(),
        CompressionRun.objects.count(),
        Summary.objects.count(),
        DriftCase.objects.count(),
        DriftComment.objects.count(),
        AuditEvent.objects.count(),
    )


@pytest.fixture
def operator(db) -> Api:
    return Api(issue_key("runtime", "operator"))


@pytest.fixture
def reviewer(db) -> Api:
    return Api(issue_key("review-bot", "reviewer"))


@pytest.fixture
def world(db) -> dict[str, int]:  # also the fuzz test's data
    """A session with a reported run, its archive and summary, and a drift case on that summary."""
    history = [
        {"role": "system", "content": "you are a coding agent"},
        {"role": "user", "content": "do not modify the deploy script"},
        {"role": "assistant", "content": "understood"},
        {"role": "user", "content": "now run the tests"},
    ]
    run = reported.record_reported_run(
        session_key="w:1",
        input_messages=history,
        output_messages=[history[0], {"role": "user", "content": "[summary] keep deploy.sh"}, history[3]],
        archive_messages=history[1:3],
        summary_text="The user asked not to modify the deploy script.",
    )
    summary = Summary.objects.get(archive__run=run)
    case = DriftCase.objects.create(summary=summary, session=run.session, severity="high", findings=[])
    return {"archive": summary.archive_id, "summary": summary.pk, "case": case.pk, "run": run.pk}


def refused(response, status: int, detail: str) -> dict:
    assert response.status_code == status, response.content
    assert response["Content-Type"].startswith("application/json")
    body = response.json()
    assert detail in body["detail"], body["detail"]
    return body


NUL = "a\x00b"

# (method, url, body, detail): NUL in every field other than message bodies and keys
NUL_CASES = [
    ("post", "/sessions", {"key": "n:1", "metadata": {"channel": NUL}}, "metadata.channel: contains a NUL"),
    ("post", "/sessions", {"key": "n:1", "metadata": {NUL: 1}}, "the key contains a NUL"),
    ("post", "/sessions/w:1/compress", {"focus_topic": NUL}, "focus_topic: contains a NUL"),
    ("post", "/archives/{archive}/summaries", {"summarizer": "extractive", "model": NUL}, "model: contains a NUL"),
    (
        "post",
        "/runs/report",
        {"session_key": "n:2", "input_messages": [USER], "output_messages": [USER], "summary_text": NUL},
        "summary_text: contains a NUL",
    ),
    (
        "post",
        "/runs/report",
        {"session_key": "n:2", "input_messages": [USER], "output_messages": [USER], "provenance": {"model": NUL}},
        "provenance.model: contains a NUL",
    ),
    ("post", "/drift-cases", {"summary": "{summary}", "quote": "deploy", "note": NUL}, "note: contains a NUL"),
    ("patch", "/drift-cases/{case}", {"verdict": NUL, "status": "confirmed"}, "verdict: contains a NUL"),
    ("patch", "/drift-cases/{case}", {"comment": NUL}, "comment: contains a NUL"),
    ("post", "/drift-cases/{case}/comments", {"body": NUL}, "body: contains a NUL"),
    ("post", "/drift-cases/{case}/comments", {"body": "ok", "quote": NUL}, "quote: contains a NUL"),
]


def _fill(value, ids: dict[str, int]):
    if isinstance(value, str) and value.startswith("{") and value.endswith("}"):
        return ids[value[1:-1]]
    if isinstance(value, dict):
        return {k: _fill(v, ids) for k, v in value.items()}
    return value


@pytest.mark.parametrize(("method", "url", "body", "detail"), NUL_CASES)
def test_a_nul_character_in_any_field_is_a_422_naming_it_and_writes_nothing(
    operator, reviewer, world, method, url, body, detail
):
    client = reviewer if "drift-cases/" in url else operator
    before = counts()
    response = client.send(method, url.format(**world), _fill(body, world))
    refused(response, 422, detail)
    assert counts() == before


@pytest.mark.parametrize(
    ("url", "params", "detail"),
    [
        ("/sessions", {"q": NUL}, "query parameter 'q': contains a NUL"),
        ("/drift-cases", {"session": NUL}, "query parameter 'session': contains a NUL"),
        ("/drift-cases", {"assignee": NUL}, "query parameter 'assignee': contains a NUL"),
        ("/audit-events", {"actor": NUL}, "query parameter 'actor': contains a NUL"),
        ("/audit-events", {"object": NUL}, "query parameter 'object': contains a NUL"),
        ("/sessions/w:1/archive/search", {"q": NUL}, "query parameter 'q': contains a NUL"),
    ],
)
def test_a_nul_character_in_a_query_parameter_is_a_422(operator, world, url, params, detail):
    before = counts()
    refused(operator.get(url, **params), 422, detail)
    assert counts() == before


@pytest.mark.parametrize(
    ("method", "url"),
    [
        ("get", "/sessions/a%00b"),
        ("post", "/sessions/a%00b/messages"),
        ("post", "/sessions/a%00b/compress"),
        ("get", "/sessions/a%00b/archive/search?q=x"),
    ],
)
def test_a_nul_character_in_a_path_key_is_a_422(operator, world, method, url):
    before = counts()
    body = {"messages": [USER]} if url.endswith("messages") else {}
    response = (
        operator.send(method, url, body)
        if method == "post"
        else operator.client.get(f"/api/v1{url}", headers=operator.headers)
    )
    refused(response, 422, "contains a NUL")
    assert counts() == before


@pytest.mark.parametrize(
    ("url", "raw", "detail"),
    [
        (
            "/sessions",
            '{"key": "u:1", "messages": [{"role": "user", "content": "a\\ud800b"}]}',
            "messages[0].content: contains a lone surrogate (\\ud800)",
        ),
        (
            "/sessions",
            '{"key": "u:1", "messages": [{"role": "assistant", "content": null, "tool_calls": [{"id": "c1", '
            '"type": "function", "function": {"name": "ls", "arguments": "a\\ud800b"}}]}]}',
            "messages[0].tool_calls[0].function.arguments: contains a lone surrogate",
        ),
        ("/sessions", '{"key": "u:1", "metadata": {"who": "a\\ud800b"}}', "metadata.who: contains a lone"),
        ("/sessions", '{"key": "a\\ud800b"}', "key: contains a lone surrogate"),
        ("/drift-cases/{case}/comments", '{"body": "a\\ud800b"}', "body: contains a lone surrogate"),
    ],
)
def test_a_lone_surrogate_is_a_422_and_writes_nothing(operator, reviewer, world, url, raw, detail):
    client = reviewer if "drift-cases" in url else operator
    before = counts()
    refused(client.post(url.format(**world), raw=raw.encode()), 422, detail)
    assert counts() == before


def test_a_valid_surrogate_pair_is_one_character_and_accepted(operator):
    raw = b'{"key": "emoji:1", "messages": [{"role": "user", "content": "ok \\ud83d\\ude00"}]}'
    assert operator.post("/sessions", raw=raw).status_code == 201
    assert Session.objects.get(key="emoji:1").messages()[0]["content"] == "ok \U0001f600"


@pytest.mark.parametrize("depth", [65, 400, 100_000])
def test_deep_nesting_is_refused_without_a_recursion_error(operator, depth):
    before = counts()
    raw = '{"key": "d:1", "metadata": {"x": ' + "[" * depth + "]" * depth + "}}"
    response = operator.post("/sessions", raw=raw.encode())
    assert response.status_code in (400, 422), response.content
    assert "nested deeper than 64 levels" in response.json()["detail"]
    assert counts() == before


def test_deep_nesting_in_messages_is_refused_by_check_messages_too():
    """Commands (import) call check_messages without the API's parser: it must not recurse either."""
    deep: list = []
    for _ in range(100_000):
        deep = [deep]
    with pytest.raises(InvalidInput, match=r"message 0.content\[0\]\[0\]\[0\]…\[0\]\[0\]: nested deeper than 64"):
        check_messages([{"role": "user", "content": deep}])
    assert unstorable({"a": [[[]]]}, max_depth=3) == "a[0][0]: nested deeper than 3 levels"


@pytest.mark.parametrize(
    "raw",
    [b'{"key": "s:1", "metadata": {"x": NaN}}', b'{"key": "s:1", "metadata": {"x": 1e999}}', b"\xff\xfe{}"],
)
def test_what_is_not_json_is_a_400(operator, raw):
    refused(operator.post("/sessions", raw=raw), 400, "")
    assert not Session.objects.exists()


def test_a_body_that_is_not_sent_as_json_is_a_415(operator):
    response = operator.client.post(
        "/api/v1/sessions", data=json.dumps({"key": "t:1"}), content_type="text/plain", headers=operator.headers
    )
    refused(response, 415, "Content-Type: application/json")
    assert not Session.objects.exists()


@pytest.mark.parametrize(
    ("url", "params"),
    [
        ("/sessions", {"page": str(10**20)}),
        ("/sessions", {"page": str(2**63)}),
        ("/sessions", {"page": "0"}),
        ("/sessions", {"page_size": str(10**6)}),
        ("/drift-cases", {"page": str(10**20)}),
        ("/audit-events", {"page": str(10**20)}),
        ("/audit-events", {"since": "yesterday"}),
        ("/drift-cases", {"status": "bogus"}),
        ("/drift-cases", {"status": "all"}),
        ("/drift-cases", {"severity": "urgent"}),
        ("/drift-cases", {"kind": "nonsense"}),
        ("/sessions/w:1/archive/search", {"q": "x", "limit": "100000"}),
    ],
)
def test_out_of_range_or_unknown_query_values_are_a_422(operator, world, url, params):
    body = refused(operator.get(url, **params), 422, "")
    assert list(params)[0] in body["detail"]


def test_a_page_past_the_end_is_empty_not_an_error(operator, world):
    response = operator.get("/sessions", page="1000000")
    assert response.status_code == 200
    assert response.json()["items"] == []


@pytest.mark.parametrize(
    ("raw", "detail"),
    [
        (b'"x"', "the request body must be a JSON object, not a string"),
        (b"[null, null]", "the request body must be a JSON object, not an array"),
        (b"null", "not null"),
        (b"7", "not a number"),
        (b'{"wait": "soon"}', "wait: Input should be a valid number"),
        (b'{"wait": true}', "wait: Input should be a valid number"),
        (b'{"focus_topic": 5}', "focus_topic: Input should be a valid string"),
        (b'{"surprise": 1}', "surprise: Extra inputs are not permitted"),
    ],
)
def test_compress_with_a_body_that_is_not_its_schema_is_a_422_and_queues_nothing(operator, world, raw, detail):
    before = counts()
    refused(operator.post("/sessions/w:1/compress", raw=raw), 422, detail)
    assert counts() == before


@pytest.mark.parametrize(
    ("config", "detail"),
    [
        ({"context_window_tokens": 1e30}, "config.context_window_tokens"),
        ({"context_window_tokens": 10**30}, "config.context_window_tokens"),
        ({"context_window_tokens": True}, "config.context_window_tokens"),
        ({"trigger_ratio": 7}, "config.trigger_ratio"),
        ({"no_such_option": 1}, "config.no_such_option"),
    ],
)
def test_a_config_override_out_of_bounds_is_a_422(operator, world, config, detail):
    before = counts()
    refused(operator.post("/sessions/w:1/compress", {"config": config}), 422, detail)
    assert counts() == before


def test_a_config_override_within_bounds_queues_a_run(operator, world):
    response = operator.post("/sessions/w:1/compress", {"config": {"context_window_tokens": 4000}})
    assert response.status_code == 202, response.content
    assert CompressionRun.objects.get(pk=response.json()["run_id"]).config == {"context_window_tokens": 4000}


@pytest.mark.parametrize(
    ("body", "detail"),
    [
        ({"key": "b:1", "last_consolidated": False}, "last_consolidated: Input should be a valid integer"),
        ({"key": "b:1", "last_consolidated": 1.0}, "last_consolidated"),
        ({"key": "b:1", "context_window_tokens": "4000"}, "context_window_tokens"),
        ({"key": "b:1", "metadata": []}, "metadata"),
        ({"key": 7}, "key"),
        ({"key": "b:1", "unknown": 1}, "unknown"),
    ],
)
def test_a_session_body_of_the_wrong_types_is_a_422(operator, body, detail):
    refused(operator.post("/sessions", body), 422, detail)
    assert not Session.objects.exists()


@pytest.mark.parametrize(
    ("body", "detail"),
    [
        ({"claim": "yes"}, "claim: Input should be a valid boolean"),
        ({"claim": 1}, "claim: Input should be a valid boolean"),
        ({"status": "bogus"}, "status: unknown status 'bogus'; one of: open, confirmed"),
        ({"assignee": 5}, "assignee: Input should be a valid string"),
        ({"unknown": True}, "unknown: Extra inputs are not permitted"),
    ],
)
def test_a_case_patch_of_the_wrong_types_is_a_422_and_changes_nothing(reviewer, world, body, detail):
    before = counts()
    refused(reviewer.patch(f"/drift-cases/{world['case']}", body), 422, detail)
    case = DriftCase.objects.get(pk=world["case"])
    assert case.assignee is None and case.status == "open"
    assert counts() == before


def test_a_drift_case_of_an_unknown_kind_or_severity_is_a_422(operator, world):
    for body in ({"kind": "spooky"}, {"severity": "urgent"}, {"summary": True}):
        payload = {"summary": world["summary"], "quote": "deploy script"} | body
        refused(operator.post("/drift-cases", payload), 422, list(body)[0])
    assert not DriftCase.objects.exclude(pk=world["case"]).exists()


# --------------------------------------------------------------------------- session keys

BAD_KEYS = [
    ("../x/y", "'/'"),
    ("a/b", "'/'"),
    ("..", "'..'"),
    ("tab\there", "U+0009"),
    ("line\nbreak", "U+000A"),
    ("deploy \u202egnirts\u202c", "U+202E (RIGHT-TO-LEFT OVERRIDE)"),
    ("dep\u200bloy", "U+200B (ZERO WIDTH SPACE)"),
    ("\ufeffbom", "U+FEFF"),
    (" padded", "whitespace"),
    ("k" * 256, "at most 255"),
]


@pytest.mark.parametrize(("key", "detail"), BAD_KEYS)
def test_post_sessions_refuses_a_key_no_endpoint_can_reach_or_that_hides_characters(operator, key, detail):
    before = counts()
    refused(operator.post("/sessions", {"key": key, "messages": [USER]}), 422, detail)
    assert counts() == before


@pytest.mark.parametrize(("key", "detail"), BAD_KEYS)
def test_runs_report_refuses_the_same_keys_and_creates_no_session(operator, key, detail):
    body = {"session_key": key, "input_messages": [USER], "output_messages": [USER]}
    before = counts()
    refused(operator.post("/runs/report", body), 422, detail)
    assert counts() == before


@pytest.mark.parametrize(("key", "detail"), BAD_KEYS[:8])
def test_the_import_command_refuses_the_same_keys(db, tmp_path: Path, key, detail):
    path = tmp_path / "s.json"
    path.write_text(json.dumps({"key": key, "messages": [USER]}), encoding="utf-8")
    out, err = StringIO(), StringIO()
    with pytest.raises(CommandError, match="could not be imported"):
        call_command("import_sessions", str(path), stdout=out, stderr=err)
    assert detail in out.getvalue() + err.getvalue()
    assert not Session.objects.exists()


def test_the_key_validator_accepts_keys_people_use(operator):
    for key in ["wechat:wxid_123", "slack:T01-x", "部署:会话 1", "a.b@c+d", "émoji🙂", "import:my file"]:
        assert check_key(key) == key
        assert operator.post("/sessions", {"key": key}).status_code == 201, key
        assert operator.get(f"/sessions/{key}").status_code == 200, key


def test_a_session_whose_old_key_has_a_tab_can_still_be_read(operator):
    """Keys are checked when a session is created; one stored before stays reachable."""
    Session.objects.create(key="old\tkey")
    assert operator.get("/sessions/old%09key").status_code == 200


@pytest.mark.django_db
def test_a_browser_session_gets_the_same_answers():
    user = User.objects.create_user("ops", password="pw")
    user.groups.add(Group.objects.get(name="operator"))
    client = Client()
    client.force_login(user)
    response = client.post("/api/v1/sessions", b'"x"', content_type="application/json")
    refused(response, 422, "must be a JSON object")


@pytest.mark.django_db
@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(key=st.text(min_size=1, max_size=40))
def test_every_key_the_validator_accepts_is_reachable_at_its_url(key):
    """The validator and the URL routes agree: an accepted key is one path segment that leads back to it."""
    if key_problem(key) is not None:
        return
    Session.objects.get_or_create(key=key)
    reader, created = User.objects.get_or_create(username="reader")
    if created:
        reader.groups.add(Group.objects.get(name="viewer"))
    client = Client()
    client.force_login(reader)
    response = client.get(f"/api/v1/sessions/{quote(key, safe='')}")
    assert response.status_code == 200, (key, response.content)
    assert response.json()["key"] == key
