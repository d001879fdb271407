"""Issue 16 on the pages: honest run outcomes on the run and session pages, the API's run status."""

from __future__ import annotations

from typing import Any

import pytest
from django.test import Client
from django.urls import reverse
from django.utils import timezone

from console.apikeys import create_api_key
from console.models import CompressionRun, Session
from console.services.sessions import ImportedSession, create_session
from tests.compression.builders import assistant, user
from tests.console.factories import compress_now, html_of

pytestmark = pytest.mark.django_db

Status = CompressionRun.Status


def tiny_session(key: str = "test:tiny") -> Session:
    return create_session(ImportedSession(key=key, messages=[user("hello"), assistant("hi"), user("bye")], metadata={}))


def finished_run(session: Session, status: str, **fields: Any) -> CompressionRun:
    now = timezone.now()
    defaults: dict[str, Any] = {"trigger": "manual", "started_at": now, "finished_at": now, "attempts": 1}
    return CompressionRun.objects.create(session=session, status=status, **(defaults | fields))


def test_the_session_page_lists_a_nothing_to_compress_run_as_such(as_viewer):
    session = tiny_session()
    run = compress_now(session)
    html = html_of(as_viewer.get(reverse("session", args=[session.pk])))
    assert f'id="run-{run.pk}"' in html
    assert '<span class="badge neutral">nothing to compress</span>' in html


def test_the_run_page_does_not_claim_savings_of_a_result_that_was_not_applied(as_viewer):
    """The 2 MB message in the protected head: prune counted it, then the history was left as it was."""
    stages = [
        {"name": "prune", "ms": 3.0, "counts": {"messages": 4, "pruned": 1, "tokens_saved": 519976}},
        {"name": "validate", "ms": 1.0, "counts": {"repaired": False}},
    ]
    warning = {"code": "nothing_to_compress", "message": "nothing to compress: no middle segment"}
    run = finished_run(
        tiny_session(),
        Status.NOTHING,
        stages=stages,
        tokens_before=520_400,
        tokens_after=520_400,
        warnings=[warning | {"params": {"reason": "no_middle"}}],
    )
    html = html_of(as_viewer.get(reverse("run", args=[run.pk])))
    stages_html = html[html.index('id="stages-title"') :]
    assert 'id="stages-not-applied"' in html and "Nothing was saved." in html
    assert 'tokens it would have saved</span> <span class="mono">519,976' in stages_html
    assert '<span class="muted">tokens saved</span>' not in stages_html
    assert "would have pruned" in stages_html
    assert "0 saved (0.0%)" in html  # the size box and the stages now agree


def test_the_run_page_words_an_applied_runs_counts_as_done(as_viewer):
    run = compress_now(tiny_session("test:applied-counts"))  # nothing: not applied
    assert not run.applied
    applied = finished_run(
        run.session,
        Status.SUCCEEDED,
        applied=True,
        was_compressed=True,
        stages=[{"name": "prune", "ms": 1.0, "counts": {"pruned": 2, "tokens_saved": 900}}],
        tokens_before=2000,
        tokens_after=1100,
    )
    html = html_of(as_viewer.get(reverse("run", args=[applied.pk])))
    assert 'id="stages-not-applied"' not in html
    assert '<span class="muted">tokens saved</span> <span class="mono">900' in html


def test_the_api_says_nothing_to_compress():
    session = tiny_session("test:api-nothing")
    run = compress_now(session)
    headers = {"Authorization": f"Bearer {create_api_key('runtime', 'operator')[1]}"}
    body = Client().get(f"/api/v1/runs/{run.pk}", headers=headers).json()
    assert body["status"] == "nothing" and body["was_compressed"] is False
    schema = Client().get("/api/v1/openapi.json").json()
    status = schema["components"]["schemas"]["RunOut"]["properties"]["status"]
    assert "nothing" in status["enum"]
