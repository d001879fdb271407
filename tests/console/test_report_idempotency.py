"""POST /runs/report with an Idempotency-Key: a repeat answers the stored run, at once or later, never stores twice."""

from __future__ import annotations

import json
import threading
import urllib.request
from typing import Any

import pytest

from agent_compression import CompressionConfig, Compressor
from console.apikeys import create_api_key
from console.models import CompressionRun, Session
from tests import samples
from tests.console.test_api import Api, counts


def report_body(key: str = "rt:idem") -> dict[str, Any]:
    messages = samples.sample_messages(samples.CODING)
    result = Compressor(CompressionConfig(context_window_tokens=4000)).compress(messages)
    assert result.archive is not None
    return {
        "session_key": key,
        "input_messages": messages,
        "output_messages": result.messages,
        "archive_messages": result.archive.messages,
        "summary_text": result.summary_text,
    }


def post(api: Api, body: dict[str, Any], key: str | None) -> Any:
    headers = {**api.headers, **({"Idempotency-Key": key} if key is not None else {})}
    return api.client.post("/api/v1/runs/report", json.dumps(body), content_type="application/json", headers=headers)


@pytest.fixture
def runtime(db) -> Api:
    return Api(create_api_key("runtime", "operator")[1])


def test_it_answers_a_repeated_key_with_the_run_it_stored(runtime):
    body = report_body()
    first = post(runtime, body, "k-1")
    assert first.status_code == 201, first.content
    assert "Idempotent-Replayed" not in first.headers
    before = counts()

    again = post(runtime, body, "k-1")

    assert again.status_code == 201
    assert again.headers["Idempotent-Replayed"] == "true"
    assert again.json()["id"] == first.json()["id"]
    assert counts() == before
    assert CompressionRun.objects.get().idempotency_key == "k-1"


def test_it_refuses_a_key_sent_again_with_another_report(runtime):
    body = report_body()
    assert post(runtime, body, "k-2").status_code == 201
    before = counts()
    other = post(runtime, {**body, "summary_text": "Another summary."}, "k-2")
    assert other.status_code == 422
    assert "already used for another report" in other.json()["detail"]
    assert counts() == before


def test_keys_belong_to_their_caller(runtime):
    other = Api(create_api_key("other-runtime", "operator")[1])
    assert post(runtime, report_body("rt:a"), "shared-key").status_code == 201
    answer = post(other, report_body("rt:b"), "shared-key")
    assert answer.status_code == 201 and "Idempotent-Replayed" not in answer.headers
    assert CompressionRun.objects.filter(idempotency_key="shared-key").count() == 2


@pytest.mark.parametrize("key", ["", "has space", "x" * 256, "naïve"])
def test_it_refuses_a_malformed_key_and_writes_nothing(runtime, key):
    before = counts()
    answer = post(runtime, report_body(), key)
    assert answer.status_code == 422
    assert "Idempotency-Key" in answer.json()["detail"]
    assert counts() == before


def test_without_a_key_each_report_is_a_new_run(runtime):
    assert post(runtime, report_body("rt:1"), None).status_code == 201
    assert post(runtime, report_body("rt:2"), None).status_code == 201
    assert CompressionRun.objects.filter(idempotency_key="").count() == 2


def test_a_failed_report_leaves_its_key_free(runtime):
    body = report_body()
    refused = post(runtime, {**body, "archive_messages": [{"role": "user", "content": "never said"}]}, "k-3")
    assert refused.status_code == 422
    assert post(runtime, body, "k-3").status_code == 201


def send_together(url: str, api_key: str, body: bytes, idempotency_key: str) -> list[tuple[int, Any, str | None]]:
    """POST the same report twice at the same moment (two threads released together)."""
    start = threading.Barrier(2)
    answers: list[tuple[int, Any, str | None]] = []

    def send() -> None:
        request = urllib.request.Request(
            f"{url}/api/v1/runs/report",
            data=body,
            headers={
                "Authorization": f"Bearer {api_key}",
                "Content-Type": "application/json",
                "Idempotency-Key": idempotency_key,
            },
        )
        start.wait()
        with urllib.request.urlopen(request, timeout=30) as response:
            answers.append((response.status, json.load(response), response.headers.get("Idempotent-Replayed")))

    threads = [threading.Thread(target=send) for _ in range(2)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(60)
    return answers


def test_two_requests_with_the_same_key_at_once_store_one_run(live_server, transactional_db):
    key = create_api_key("runtime", "operator")[1]
    Session.objects.create(key="rt:existing")  # one race on a session both create, one on a session that exists
    for name in ("new", "existing"):
        answers = send_together(live_server.url, key, json.dumps(report_body(f"rt:{name}")).encode(), name)
        assert sorted(status for status, _, _ in answers) == [201, 201], name
        assert answers[0][1]["id"] == answers[1][1]["id"], name
        assert sorted(str(replayed) for _, _, replayed in answers) == ["None", "true"], name
        assert CompressionRun.objects.filter(idempotency_key=name).count() == 1, name
