"""The dashboard's cost and latency of summarizer calls, the runs behind its charts, and its downloads."""

from __future__ import annotations

import json
import re

import pytest
from django.contrib.auth.models import User
from django.core.exceptions import ImproperlyConfigured

from console.models import AuditEvent, CompressionRun
from console.services.dashboard import call_cost, percentile, summarizer_calls
from console.services.sessions import ImportedSession, create_session
from console.settings import env_prices
from tests.console.factories import SECRET, html_of
from tests.console.test_pages_dashboard import day, make_run, make_session, make_summary


def sample_session(key: str):
    """A session with a secret in a message."""
    messages = [{"role": "user", "content": f"deploy with {SECRET}"}, {"role": "assistant", "content": "ok"}]
    return create_session(ImportedSession(key=key, messages=messages, metadata={}))


PRICES = {"gpt-x": {"input": 0.5, "output": 1.5}}


def openai(model: str, tokens_in: int, tokens_out: int, latency: float) -> dict:
    return {
        "generator": "openai",
        "model": model,
        "prompt_version": "v1",
        "input_tokens": tokens_in,
        "output_tokens": tokens_out,
        "latency_ms": latency,
    }


# --------------------------------------------------------------------------- the setting


def test_prices_come_from_json_and_bad_values_are_refused(monkeypatch):
    monkeypatch.setenv("SUMMARIZER_PRICES", '{"gpt-x": {"input": 0.5, "output": 1.5}, "m2": {"output": 2}}')
    assert env_prices("SUMMARIZER_PRICES") == {
        "gpt-x": {"input": 0.5, "output": 1.5},
        "m2": {"input": 0.0, "output": 2.0},
    }
    monkeypatch.setenv("SUMMARIZER_PRICES", "")
    assert env_prices("SUMMARIZER_PRICES") == {}
    for raw, message in [
        ("{nope", "is not JSON"),
        ("[1]", "must be a JSON object"),
        ('{"m": 3}', "must map to"),
        ('{"m": {"input": 1, "cached": 2}}', "must map to"),
        ('{"m": {"input": -1}}', "is not a number >= 0"),
        ('{"m": {"input": "1"}}', "is not a number >= 0"),
    ]:
        monkeypatch.setenv("SUMMARIZER_PRICES", raw)
        with pytest.raises(ImproperlyConfigured, match=message):
            env_prices("SUMMARIZER_PRICES")


# --------------------------------------------------------------------------- the numbers


def test_percentiles_and_a_calls_cost():
    assert percentile([], 50) is None
    assert percentile([30, 10, 20], 50) == 20
    assert percentile(list(range(1, 101)), 95) == 95
    assert call_cost("openai", "gpt-x", 2000, 1000, PRICES) == pytest.approx(2.5)  # 2 × 0.5 + 1 × 1.5
    assert call_cost("extractive", None, 5000, 900, PRICES) == 0.0
    assert call_cost("openai", "unknown-model", 10, 10, PRICES) is None


@pytest.mark.django_db
def test_cost_per_day_and_model_and_latency_per_model():
    s = make_session()
    make_summary(s, day(0), provenance=openai("gpt-x", 2000, 1000, 100))
    make_summary(s, day(0), provenance=openai("gpt-x", 1000, 0, 300))
    make_summary(s, day(2), provenance=openai("gpt-x", 0, 2000, 200))
    make_summary(s, day(1), provenance=openai("other", 500, 500, 50))  # no price
    make_summary(
        s, day(1), provenance={"generator": "extractive", "model": None, "input_tokens": 9000, "latency_ms": 2}
    )
    make_summary(s, day(40), provenance=openai("gpt-x", 100000, 0, 1))  # outside the period

    calls = summarizer_calls(7, prices=PRICES)

    rows = {(r.generator, r.model): r for r in calls.rows}
    gpt = rows[("openai", "gpt-x")]
    assert (gpt.calls, gpt.input_tokens, gpt.output_tokens) == (3, 3000, 3000)
    assert gpt.cost == pytest.approx(1.5 + 4.5)
    assert (gpt.p50_ms, gpt.p95_ms) == (200, 300)
    assert rows[("openai", "other")].cost is None and calls.unpriced_calls == 1
    assert rows[("extractive", None)].cost == 0.0
    assert calls.cost_by_day[-1] == pytest.approx(2.5 + 0.5)  # today
    assert calls.cost_by_day[-3] == pytest.approx(3.0)  # two days ago
    assert calls.cost_total == pytest.approx(6.0)


@pytest.mark.django_db
def test_the_dashboard_shows_cost_and_latency_and_links_bars_to_their_runs(as_viewer, settings):
    settings.SUMMARIZER_PRICES = PRICES
    s = make_session("test:costs")
    make_summary(s, day(0), provenance=openai("gpt-x", 2_000_000, 1000, 1234.5))
    failed = make_run(s, CompressionRun.Status.FAILED, day(1), error="boom")

    html = html_of(as_viewer.get("/dashboard/"))

    assert re.search(r'id="cost-total">1,001\.50<', html)  # 2,000 × 0.5 + 1 × 1.5, grouped
    assert ">2,000,000<" in html and ">1,234.5<" in html  # input tokens; p50 latency in ms
    yesterday = day(1).date().isoformat()
    assert f'<a href="/runs/?day={yesterday}&amp;status=failed"><rect class="seg s-failed"' in html
    assert 'href="/runs/?model=gpt-x&amp;generator=openai"' in html

    listed = html_of(as_viewer.get(f"/runs/?day={yesterday}&status=failed"))
    assert f'href="/runs/{failed.pk}/"' in listed and re.search(r'id="runs-total">\s*1 run\b', listed)
    assert f'href="/runs/{failed.pk}/"' not in html_of(as_viewer.get(f"/runs/?day={yesterday}&status=succeeded"))
    by_model = html_of(as_viewer.get("/runs/?model=gpt-x"))
    assert re.search(r'id="runs-total">\s*1 run\b', by_model) and f'href="/runs/{failed.pk}/"' not in by_model
    # the old address of a bar's runs still lands on them
    moved = as_viewer.get(f"/dashboard/runs/?day={yesterday}&status=failed")
    assert moved.status_code == 301 and moved["Location"] == f"/runs/?day={yesterday}&status=failed"


@pytest.mark.django_db
def test_the_runs_list_refuses_a_bad_day_or_status(as_viewer):
    response = as_viewer.get("/runs/?day=yesterday&status=all")
    assert response.status_code == 400
    html = html_of(response)
    assert "day must be a date written YYYY-MM-DD, not &#x27;yesterday&#x27;" in html
    assert "unknown status &#x27;all&#x27;" in html


@pytest.mark.django_db
def test_the_dashboard_groups_digits_in_chinese(as_viewer, settings):
    settings.SUMMARIZER_PRICES = PRICES
    make_summary(make_session(), day(0), provenance=openai("gpt-x", 2_000_000, 1000, 50))
    html = html_of(as_viewer.get("/dashboard/", HTTP_ACCEPT_LANGUAGE="zh-hans"))
    assert "摘要器调用：费用与延迟" in html and ">2,000,000<" in html


# --------------------------------------------------------------------------- downloads


@pytest.mark.django_db
def test_a_session_downloads_as_export_session_writes_it_masked(as_viewer):
    session = sample_session(key="test:export")
    response = as_viewer.get(f"/exports/session?session={session.pk}")

    assert response.status_code == 200
    assert response["Content-Disposition"] == 'attachment; filename="session-test_export.json"'
    data = json.loads(response.content)
    assert data["format"] == "compression-console/session-export" and data["session"]["key"] == "test:export"
    assert SECRET not in response.content.decode()
    assert as_viewer.get(f"/sessions/{session.pk}/export.json?reveal=1").status_code == 403
    assert as_viewer.get("/exports/session?session=x").status_code == 400
    assert as_viewer.get("/exports/session?session=999999").status_code == 404


@pytest.mark.django_db
def test_a_revealed_download_needs_the_permission_and_is_audited_as_the_user(superuser):
    session = sample_session(key="test:reveal")
    response = superuser.get(f"/sessions/{session.pk}/export.json?reveal=1")

    assert response.status_code == 200 and SECRET in response.content.decode()
    event = AuditEvent.objects.get(action="secrets.reveal", object_id=str(session.pk))
    assert event.actor == User.objects.get(is_superuser=True)
    assert event.after == {"download": "console download"}


@pytest.mark.django_db
def test_the_dashboard_offers_both_downloads(as_viewer, superuser):
    session = make_session("test:listed")
    html = html_of(as_viewer.get("/dashboard/"))
    assert 'action="/exports/session"' in html and f'<option value="{session.pk}">test:listed</option>' in html
    assert 'href="/drift/export.jsonl"' in html
    assert 'name="reveal"' not in html  # a viewer may not reveal
    assert 'name="reveal"' in html_of(superuser.get("/dashboard/"))
