"""The JSON API contract: auth, every endpoint's success and error answers; a rejected request writes nothing.

Tasks run eagerly in-process here (the real-worker journey is in test_api_worker.py).
"""

from __future__ import annotations

import json

import pytest
from django.contrib.auth.models import Group, User
from django.test import Client, override_settings

from agent_compression import validate_messages
from console.apikeys import create_api_key
from console.celery import tasks_inline
from console.models import ApiKey, AuditEvent, CompressionRun, DriftCase, Message, Session, Summary
from tests import samples

SMALL_WINDOW = {"context_window_tokens": 4000}


def sample_messages() -> list[dict]:
    return samples.sample_messages(samples.CODING)


def issue_key(name: str, role: str) -> str:
    return create_api_key(name, role)[1]


class Api:
    """A client that speaks JSON with a bearer key."""

    def __init__(self, key: str | None = None) -> None:
        self.client = Client()
        self.headers = {"Authorization": f"Bearer {key}"} if key else {}

    def get(self, url: str, **params):
        return self.client.get(f"/api/v1{url}", params, headers=self.headers)

    def send(self, method: str, url: str, body=None, raw: bytes | None = None):
        # no body at all when there is none (as requests and curl send it), not the JSON ``null``
        data = raw if raw is not None else (json.dumps(body) if body is not None else b"")
        call = getattr(self.client, method)
        return call(f"/api/v1{url}", data=data, content_type="application/json", headers=self.headers)

    def post(self, url: str, body=None, raw: bytes | None = None):
        return self.send("post", url, body, raw)

    def patch(self, url: str, body=None):
        return self.send("patch", url, body)


@pytest.fixture
def eager(transactional_db):
    """Run Celery tasks in-process when the transaction that queued them commits (a real commit)."""
    with tasks_inline():
        yield


@pytest.fixture
def operator(django_db_blocker, request) -> Api:
    request.getfixturevalue("transactional_db" if "eager" in request.fixturenames else "db")
    return Api(issue_key("runtime", "operator"))


@pytest.fixture
def viewer(db) -> Api:
    return Api(issue_key("dashboard", "viewer"))


def counts() -> tuple[int, ...]:
    return (
        Session.objects.count(),
        Message.objects.count(),
        CompressionRun.objects.count(),
        Summary.objects.count(),
        AuditEvent.objects.count(),
    )


# --------------------------------------------------------------------------- auth


@pytest.mark.django_db
def test_it_answers_401_in_json_without_credentials():
    response = Api().get("/sessions")
    assert response.status_code == 401
    assert "Bearer" in response.json()["detail"]


@pytest.mark.django_db
def test_it_refuses_an_unknown_or_revoked_key(operator):
    assert Api("ccs_000000000000_nope").get("/sessions").status_code == 401
    ApiKey.objects.update(revoked_at="2026-01-01T00:00:00Z")
    response = operator.get("/sessions")
    assert response.status_code == 401
    assert "revoked" in response.json()["detail"]


@pytest.mark.django_db
def test_a_browser_session_works_and_needs_csrf_for_writes():
    user = User.objects.create_user("ops", password="pw")
    user.groups.add(Group.objects.get(name="operator"))
    client = Client(enforce_csrf_checks=True)
    client.force_login(user)
    assert client.get("/api/v1/sessions").status_code == 200
    response = client.post("/api/v1/sessions", json.dumps({"key": "s:1"}), content_type="application/json")
    assert response.status_code == 403
    assert not Session.objects.exists()


@pytest.mark.django_db
def test_a_viewer_reads_but_cannot_write(viewer, operator):
    assert (
        operator.post("/sessions", {"key": "s:1", "messages": [{"role": "user", "content": "hi"}]}).status_code == 201
    )
    assert viewer.get("/sessions/s:1").status_code == 200
    before = counts()
    for url, body in [
        ("/sessions", {"key": "s:2"}),
        ("/sessions/s:1/messages", {"messages": [{"role": "user", "content": "more"}]}),
        ("/sessions/s:1/compress", {}),
    ]:
        response = viewer.post(url, body)
        assert response.status_code == 403, url
        assert "may not" in response.json()["detail"]
    assert counts() == before


@pytest.mark.django_db
def test_the_openapi_schema_lists_the_contract(operator):
    response = Client().get("/api/v1/openapi.json")
    assert response.status_code == 200
    paths = response.json()["paths"]
    for path in [
        "/api/v1/sessions",
        "/api/v1/sessions/{key}",
        "/api/v1/sessions/{key}/messages",
        "/api/v1/sessions/{key}/compress",
        "/api/v1/sessions/{key}/archive/search",
        "/api/v1/runs/report",
        "/api/v1/runs/{run_id}",
        "/api/v1/runs/{run_id}/messages",
        "/api/v1/archives/{archive_id}",
        "/api/v1/archives/{archive_id}/summaries",
        "/api/v1/summaries/{summary_id}",
        "/api/v1/summaries/{summary_id}/promote",
        "/api/v1/drift-cases",
        "/api/v1/drift-cases/{case_id}",
    ]:
        assert path in paths, path
    assert Client().get("/api/v1/docs").status_code == 200


# --------------------------------------------------------------------------- sessions


@pytest.mark.django_db
def test_it_creates_reads_lists_and_searches_sessions(operator):
    messages = [{"role": "user", "content": "部署前先跑测试"}, {"role": "assistant", "content": "好的"}]
    response = operator.post(
        "/sessions", {"key": "wechat:abc", "messages": messages, "metadata": {"channel": "wechat"}}
    )
    assert response.status_code == 201, response.content
    assert response.json()["message_count"] == 2
    assert operator.post("/sessions", {"key": "slack:xyz"}).status_code == 201

    detail = operator.get("/sessions/wechat:abc").json()
    assert detail["messages"] == messages
    assert detail["version"] == 1
    assert detail["token_count"] > 0

    listed = operator.get("/sessions", q="wechat").json()
    assert listed["count"] == 1
    assert [s["key"] for s in listed["items"]] == ["wechat:abc"]
    assert operator.get("/sessions").json()["count"] == 2

    response = operator.post("/sessions", {"key": "wechat:abc"})
    assert response.status_code == 409
    assert "already exists" in response.json()["detail"]
    assert operator.get("/sessions/nope:1").status_code == 404


@pytest.mark.django_db
@pytest.mark.parametrize(
    ("body", "status", "detail"),
    [
        (b'{"key": "s:1", "messages": [', 400, "not valid JSON"),
        ({"key": "s:1", "messages": [{"role": "wizard", "content": "x"}]}, 422, "message 0: unknown role 'wizard'"),
        (
            {"key": "s:1", "messages": [{"role": "tool", "content": "x"}]},
            422,
            "message 0: a tool result without tool_call_id",
        ),
        (
            {"key": "s:1", "messages": [{"role": "assistant", "content": None, "tool_calls": "ls"}]},
            422,
            "tool_calls must be a non-empty list",
        ),
        ({"key": "s:1", "messages": "hello"}, 422, "messages"),
        ({"key": "s:1", "messages": [{"role": "user", "content": "a\x00b"}]}, 422, "messages[0].content: contains a"),
        ({"key": "s:\x00"}, 422, "key: contains a NUL"),
        ({"messages": []}, 422, "key"),
        ({"key": "a/b"}, 422, "must not contain '/'"),
        ({"key": "s:1", "context_window_tokens": 10}, 422, "context_window_tokens"),
        ({"key": "s:1", "last_consolidated": 5}, 422, "last_consolidated"),
    ],
)
def test_bad_input_gets_a_clear_error_and_writes_nothing(operator, body, status, detail):
    before = counts()
    response = operator.post("/sessions", raw=body) if isinstance(body, bytes) else operator.post("/sessions", body)
    assert response.status_code == status, response.content
    assert response["Content-Type"].startswith("application/json")
    assert detail in response.json()["detail"]
    assert counts() == before


@pytest.mark.django_db
def test_a_payload_over_the_limit_is_413_not_500(operator):
    body = {"key": "s:big", "messages": [{"role": "user", "content": "x" * 5000}]}
    with override_settings(DATA_UPLOAD_MAX_MEMORY_SIZE=2048):
        response = operator.post("/sessions", body)
    assert response.status_code == 413
    assert "limit of 2048 bytes" in response.json()["detail"]
    assert not Session.objects.exists()


@pytest.mark.django_db
def test_html_and_scripts_are_stored_and_returned_verbatim_as_json(operator):
    evil = '<script>alert(1)</script><img src=x onerror="alert(2)">'
    operator.post("/sessions", {"key": "s:evil", "messages": [{"role": "user", "content": evil}]})
    response = operator.get("/sessions/s:evil")
    assert response["Content-Type"].startswith("application/json")
    assert response.json()["messages"][0]["content"] == evil


@pytest.mark.django_db
def test_appends_are_versioned(operator):
    operator.post("/sessions", {"key": "s:1", "messages": [{"role": "user", "content": "one"}]})
    response = operator.post("/sessions/s:1/messages", {"messages": [{"role": "assistant", "content": "two"}]})
    assert response.status_code == 200
    assert response.json()["version"] == 2
    assert response.json()["message_count"] == 2

    before = counts()
    stale = operator.post(
        "/sessions/s:1/messages", {"messages": [{"role": "user", "content": "three"}], "expected_version": 1}
    )
    assert stale.status_code == 409
    assert "version 2, not 1" in stale.json()["detail"]
    broken = operator.post("/sessions/s:1/messages", {"messages": [{"role": "user"}]})
    assert broken.status_code == 422
    assert "message 2" in broken.json()["detail"]  # numbered as in the session
    assert operator.post("/sessions/nope/messages", {"messages": [{"role": "user", "content": "x"}]}).status_code == 404
    assert counts() == before
    assert operator.post("/sessions/s:1/messages", {"messages": []}).status_code == 422


# --------------------------------------------------------------------------- runs, archives, summaries


@pytest.fixture
def compressed(operator, eager):
    """A sample session compressed once through the API (tasks run in-process)."""
    operator.post("/sessions", {"key": "job:1", "messages": sample_messages(), "context_window_tokens": 4000})
    response = operator.post("/sessions/job:1/compress", {"focus_topic": "export"})
    assert response.status_code == 202, response.content
    return response.json()["run_id"]


@pytest.mark.django_db
def test_compress_runs_the_pipeline_and_the_run_tells_all(operator, compressed):
    run = operator.get(f"/runs/{compressed}").json()
    assert run["status"] == "succeeded", run
    assert run["trigger"] == "api"
    assert run["applied"] and run["was_compressed"]
    assert run["tokens_after"] < run["tokens_before"]
    assert [s["name"] for s in run["stages"]] == ["prune", "boundaries", "archive", "summarize", "assemble", "validate"]
    assert run["summary"]["status"] == "active"
    assert run["summary"]["provenance"]["generator"] == "extractive"
    assert run["summary"]["provenance"]["focus_topic"] == "export"
    assert run["summary"]["drift_checked_at"]

    output = operator.get(f"/runs/{compressed}/messages").json()["messages"]
    assert validate_messages(output) == []
    assert operator.get("/sessions/job:1").json()["messages"] == output

    archive = operator.get(f"/archives/{run['archive_id']}").json()
    original = sample_messages()
    assert archive["verified"] is True
    assert archive["messages"] == original[archive["start"] : archive["end"]]
    assert AuditEvent.objects.filter(action="run.queue").count() == 1


@pytest.mark.django_db
def test_a_second_compress_request_joins_the_run_in_flight(operator, db):
    operator.post("/sessions", {"key": "s:1", "messages": [{"role": "user", "content": "hi"}]})
    first = operator.post("/sessions/s:1/compress", {})  # not eager: stays queued
    second = operator.post("/sessions/s:1/compress", {"focus_topic": "other"})
    assert first.json()["created"] is True
    assert second.json() == {**first.json(), "created": False}
    assert CompressionRun.objects.count() == 1


@pytest.mark.django_db
def test_compress_refuses_bad_config(operator):
    operator.post("/sessions", {"key": "s:1"})
    response = operator.post("/sessions/s:1/compress", {"config": {"trigger_ratio": 7}})
    assert response.status_code == 422
    assert "trigger_ratio" in response.json()["detail"]
    response = operator.post("/sessions/s:1/compress", {"config": {"no_such_field": 1}})
    assert response.status_code == 422
    assert not CompressionRun.objects.exists()


@pytest.mark.django_db
def test_run_messages_wait_for_the_run(operator):
    operator.post("/sessions", {"key": "s:1", "messages": [{"role": "user", "content": "hi"}]})
    run_id = operator.post("/sessions/s:1/compress", {}).json()["run_id"]
    response = operator.get(f"/runs/{run_id}/messages")
    assert response.status_code == 409
    assert "queued" in response.json()["detail"]
    assert operator.get("/runs/999999").status_code == 404


@pytest.mark.django_db
def test_archive_search_finds_archived_originals(operator, compressed):
    response = operator.get("/sessions/job:1/archive/search", q="statement timeout")
    assert response.status_code == 200
    hits = response.json()["hits"]
    assert hits, "the archived segment mentions the timeout"
    archive_id = operator.get(f"/runs/{compressed}").json()["archive_id"]
    archive = operator.get(f"/archives/{archive_id}").json()
    for hit in hits:
        assert hit["archive_id"] == archive_id
        assert archive["start"] <= hit["message_index"] < archive["end"]
        assert "statement timeout" in hit["snippet"].lower()
    assert operator.get("/sessions/job:1/archive/search", q=" ").status_code == 422


@pytest.mark.django_db
def test_a_tampered_archive_is_an_error_not_silence(operator, compressed):
    archive_id = operator.get(f"/runs/{compressed}").json()["archive_id"]
    from console.models import Archive

    key = Archive.objects.get(pk=archive_id).message_keys[0]
    Message.objects.filter(sha256=key).update(data={"role": "user", "content": "forged"})
    response = operator.get(f"/archives/{archive_id}")
    assert response.status_code == 500
    assert "does not match its sha256" in response.json()["detail"]


@pytest.mark.django_db
def test_resummarize_then_promote(operator, compressed, eager):
    run = operator.get(f"/runs/{compressed}").json()
    response = operator.post(
        f"/archives/{run['archive_id']}/summaries", {"summarizer": "extractive", "focus_topic": "batch size"}
    )
    assert response.status_code == 202, response.content
    new_id = response.json()["id"]
    assert response.json()["status"] == "pending"
    summary = operator.get(f"/summaries/{new_id}").json()
    assert summary["status"] == "draft", summary
    assert summary["parent_id"] == run["summary"]["id"]
    assert summary["provenance"]["focus_topic"] == "batch size"

    response = operator.post(f"/summaries/{new_id}/promote")
    assert response.status_code == 200, response.content
    live = operator.get("/sessions/job:1").json()["messages"]
    assert any(summary["summary_id"] in str(m.get("content")) for m in live)
    assert not any(run["summary"]["summary_id"] in str(m.get("content")) for m in live)
    assert operator.get(f"/summaries/{run['summary']['id']}").json()["status"] == "superseded"
    assert validate_messages(live) == []
    assert AuditEvent.objects.filter(action="summary.promote", object_id=str(new_id)).exists()


@pytest.mark.django_db
def test_resummarize_refuses_unknown_summarizers_and_versions(operator, compressed):
    archive_id = operator.get(f"/runs/{compressed}").json()["archive_id"]
    before = counts()
    for body, detail in [
        ({"summarizer": "magic"}, "unknown summarizer 'magic'"),
        ({"summarizer": "extractive", "prompt_version": "v0"}, "no prompt version 'v0'"),
        ({"summarizer": "openai"}, "no model endpoint is configured"),
    ]:
        response = operator.post(f"/archives/{archive_id}/summaries", body)
        assert response.status_code == 422
        assert detail in response.json()["detail"]
    assert counts() == before
    assert operator.post("/archives/999999/summaries", {"summarizer": "extractive"}).status_code == 404


@pytest.mark.django_db
def test_promote_is_409_when_the_old_summary_left_the_live_history(operator, compressed, eager):
    run = operator.get(f"/runs/{compressed}").json()
    new_id = operator.post(f"/archives/{run['archive_id']}/summaries", {"summarizer": "extractive"}).json()["id"]
    session = Session.objects.get(key="job:1")
    keys = session.keys()
    session.replace_from(keys, keys[:2])  # rewritten: the summary message is gone
    version = session.version
    response = operator.post(f"/summaries/{new_id}/promote")
    assert response.status_code == 409
    assert "no longer in the live history" in response.json()["detail"]
    session.refresh_from_db()
    assert session.version == version
    assert operator.get(f"/summaries/{new_id}").json()["status"] == "draft"


@pytest.mark.django_db
def test_report_stores_an_in_process_compression(operator):
    original = sample_messages()
    from agent_compression import CompressionConfig, Compressor

    result = Compressor(CompressionConfig(context_window_tokens=4000)).compress(original)
    operator.post("/sessions", {"key": "rt:1", "messages": original})
    body = {
        "session_key": "rt:1",
        "input_messages": original,
        "output_messages": result.messages,
        "archive_messages": result.archive.messages,
        "summary_text": result.summary_text,
        "provenance": {"generator": "extractive", "model": None},
    }
    response = operator.post("/runs/report", body)
    assert response.status_code == 201, response.content
    run = response.json()
    assert run["trigger"] == "reported" and run["applied"] is True
    assert run["summary"]["status"] == "active"
    assert operator.get("/sessions/rt:1").json()["messages"] == result.messages

    before = counts()
    bad = operator.post("/runs/report", {**body, "archive_messages": [{"role": "user", "content": "never said"}]})
    assert bad.status_code == 422
    assert "contiguous" in bad.json()["detail"]
    bad = operator.post("/runs/report", {**body, "provenance": {"generator": "x", "secret_sauce": 1}})
    assert bad.status_code == 422
    assert counts() == before


# --------------------------------------------------------------------------- drift cases


@pytest.fixture
def drift_case(compressed) -> DriftCase:
    summary = Summary.objects.get(status="active")
    return DriftCase.objects.create(
        summary=summary,
        session=summary.archive.session,
        severity="high",
        findings=[{"kind": "constraint_inverted", "severity": "high", "evidence": {"original": "a", "summary": "b"}}],
    )


@pytest.mark.django_db
def test_drift_cases_are_listed_read_and_reviewed(operator, drift_case):
    reviewer = User.objects.create_user("rita")
    reviewer.groups.add(Group.objects.get(name="reviewer"))
    client = Client()
    client.force_login(reviewer)

    listed = operator.get("/drift-cases", status="open").json()
    assert [c["id"] for c in listed["items"]] == [drift_case.pk]
    assert operator.get("/drift-cases", severity="low").json()["count"] == 0

    # an operator is not a reviewer
    denied = operator.patch(f"/drift-cases/{drift_case.pk}", {"status": "confirmed", "verdict": "inverted"})
    assert denied.status_code == 403

    def patch(body):
        return client.patch(f"/api/v1/drift-cases/{drift_case.pk}", json.dumps(body), content_type="application/json")

    response = patch({"status": "resolved"})
    assert response.status_code == 409
    assert "can become" in response.json()["detail"]
    response = patch({"status": "confirmed"})
    assert response.status_code == 422
    assert "needs a verdict" in response.json()["detail"]
    response = patch({"status": "confirmed", "verdict": "the summary inverts 先不要", "assignee": "rita"})
    assert response.status_code == 200, response.content
    assert response.json()["status"] == "confirmed"
    assert response.json()["assignee"] == "rita"
    response = patch({"comment": "re-summarized and promoted", "quote": "先不要修改部署脚本"})
    assert response.json()["comments"][0]["quote"] == "先不要修改部署脚本"
    assert patch({"assignee": "ghost"}).status_code == 422

    detail = operator.get(f"/drift-cases/{drift_case.pk}").json()
    assert detail["verdict"] == "the summary inverts 先不要"
    actions = list(AuditEvent.objects.filter(object_type="driftcase").values_list("action", flat=True))
    assert sorted(actions) == ["drift_case.comment", "drift_case.update"]


@pytest.mark.django_db
def test_the_api_docs_load_swagger_from_our_static_files_not_a_cdn():
    html = Client().get("/api/v1/docs").content.decode()
    assert "/static/ninja/swagger-ui-bundle.js" in html
    assert "cdn." not in html.lower()  # (a CSRF token may hold "cdn")


@pytest.mark.django_db
@pytest.mark.parametrize(
    ("method", "url", "status", "detail"),
    [
        ("get", "/api/v1/nope", 404, "no API endpoint GET /api/v1/nope"),
        ("get", "/api/v1/runs/abc", 404, "/api/v1/docs"),
        ("delete", "/api/v1/sessions", 405, "DELETE is not allowed"),
    ],
)
def test_errors_django_answers_itself_are_json_under_the_api(operator, method, url, status, detail):
    response = getattr(operator.client, method)(url, headers=operator.headers)
    assert response.status_code == status
    assert detail in response.json()["detail"]


@pytest.mark.django_db
def test_a_real_sized_session_fits_under_the_default_limit(operator):
    """Django's default 2.5 MB body limit would refuse this; the configured limit (64 MiB) takes it whole."""
    output = "2026-11-28 INFO row written\n" * 300_000  # about 8 MB of tool output
    messages = [
        {"role": "user", "content": "dump the log"},
        {"role": "assistant", "content": None, "tool_calls": [_call("c1")]},
        {"role": "tool", "tool_call_id": "c1", "content": output},
    ]
    response = operator.post("/sessions", {"key": "s:big", "messages": messages})
    assert response.status_code == 201, response.content[:200]
    assert operator.get("/sessions/s:big").json()["messages"][2]["content"] == output


def _call(call_id: str) -> dict:
    return {"id": call_id, "type": "function", "function": {"name": "terminal", "arguments": '{"cmd": "cat log"}'}}


@pytest.mark.django_db
def test_a_drifted_model_summary_opens_a_drift_case_by_itself(operator, eager, fake_openai, settings):
    """The model inverts the user's "do not change infra/terraform"; the case opens without anyone asking."""
    settings.OPENAI_BASE_URL, settings.OPENAI_API_KEY = fake_openai.base_url, "test"
    settings.SUMMARY_MAX_RETRIES = 0
    fake_openai.script("drift")
    operator.post("/sessions", {"key": "job:drift", "messages": sample_messages(), "context_window_tokens": 4000})
    run = operator.get(f"/runs/{operator.post('/sessions/job:drift/compress', {}).json()['run_id']}").json()
    assert run["status"] == "succeeded", run
    summary = operator.get(f"/summaries/{run['summary']['id']}").json()
    assert summary["provenance"]["generator"] == "openai"
    kinds = {f["kind"] for f in summary["drift_findings"]}
    assert {"constraint_inverted", "constraint_dropped"} & kinds, summary["drift_findings"]

    cases = operator.get("/drift-cases", session="job:drift").json()["items"]
    assert len(cases) == 1 and cases[0]["status"] == "open" and cases[0]["severity"] == "high"
    assert cases[0]["summary_id"] == summary["id"]
    finding = cases[0]["findings"][0]
    assert finding["evidence"]["original"] and finding["message_index"] is not None
    assert AuditEvent.objects.filter(action="drift_case.open", object_id=str(cases[0]["id"])).exists()
