"""The audit log page (filters, paging, links, escaping, permissions) and the admin's read-only audit events."""

from __future__ import annotations

import re
from datetime import datetime, timedelta
from typing import Any

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from console.audit import audit
from console.models import Archive, AuditEvent, CompressionRun, DriftCase, Summary
from tests.console.factories import HX, SECRET, html_of

NOON = timezone.make_aware(datetime(2026, 3, 10, 12, 0))


def event(action: str = "session.create", actor: str = "alice", obj: str = "session:1", **fields: Any) -> AuditEvent:
    object_type, object_id = obj.split(":")
    fields.setdefault("created_at", NOON)
    return AuditEvent.objects.create(
        actor_label=actor, action=action, object_type=object_type, object_id=object_id, **fields
    )


def shown_ids(html: str) -> list[int]:
    """The events on the page, in order."""
    return [int(pk) for pk in re.findall(r'<tr id="e-(\d+)"', html)]


@pytest.fixture
def admin(login):
    return login("admin")


# --------------------------------------------------------------------------- permission


def test_it_shows_the_log_to_the_admin_role_newest_first(admin):
    old = event("session.create", created_at=NOON - timedelta(days=2))
    new = event("drift_case.update", obj="driftcase:4", created_at=NOON)
    middle = event("run.queue", obj="compressionrun:9", created_at=NOON - timedelta(days=1))

    response = admin.get("/audit/")

    assert response.status_code == 200
    html = html_of(response)
    assert shown_ids(html) == [new.pk, middle.pk, old.pk]
    assert "drift_case.update" in html and "alice" in html
    when = '<time datetime="2026-03-10T12:00:00+00:00" title="10 Mar 2026, 12:00:00 UTC">10 Mar 2026, 12:00</time>'
    assert when in html
    assert 'aria-current="page"' in html and "Audit log" in html


@pytest.mark.parametrize("role", ["viewer", "operator", "reviewer", ""])
def test_it_refuses_every_other_role(login, role):
    event()
    response = login(role).get("/audit/")
    assert response.status_code == 403
    assert b"alice" not in response.content


def test_it_shows_the_log_to_a_superuser(superuser):
    event()
    assert superuser.get("/audit/").status_code == 200


def test_it_sends_anonymous_visitors_to_log_in(client, db):
    response = client.get("/audit/")
    assert response.status_code == 302 and "/login/" in response["Location"]


def test_it_offers_nothing_that_changes_an_event(admin):
    event(after={"x": 1})
    html = html_of(admin.get("/audit/"))
    forms = re.findall(r"<form[^>]*>", html)
    assert all('method="post"' not in f or "/i18n/setlang/" in f or "/logout/" in f for f in forms), forms
    assert admin.post("/audit/").status_code == 405


# --------------------------------------------------------------------------- filters


def test_it_filters_by_the_exact_actor_name(admin):
    bob = event(actor="bob")
    event(actor="bobby")
    event(actor="system")

    html = html_of(admin.get("/audit/", {"actor": "BOB"}))

    assert shown_ids(html) == [bob.pk]
    assert 'value="BOB"' in html and "Clear filters" in html


def test_it_filters_by_object_type_and_id(admin):
    case_12 = event("drift_case.update", obj="driftcase:12")
    case_3 = event("drift_case.comment", obj="driftcase:3", created_at=NOON - timedelta(hours=1))
    event("session.create", obj="session:12")

    assert shown_ids(html_of(admin.get("/audit/", {"object": "drift_case:12"}))) == [case_12.pk]
    assert shown_ids(html_of(admin.get("/audit/", {"object": "drift_case"}))) == [case_12.pk, case_3.pk]
    assert shown_ids(html_of(admin.get("/audit/", {"object": "driftcase:3"}))) == [case_3.pk]


def test_it_understands_run_as_the_object_type_of_a_compression_run(admin):
    run = event("run.queue", obj="compressionrun:5")
    event("session.compress", obj="session:5")
    assert shown_ids(html_of(admin.get("/audit/", {"object": "run:5"}))) == [run.pk]


def test_it_filters_by_action_prefix(admin):
    update = event("drift_case.update", obj="driftcase:1")
    comment = event("drift_case.comment", obj="driftcase:1", created_at=NOON - timedelta(minutes=1))
    event("summary.promote", obj="summary:1")

    assert shown_ids(html_of(admin.get("/audit/", {"action": "drift_case."}))) == [update.pk, comment.pk]
    assert shown_ids(html_of(admin.get("/audit/", {"action": "drift_case.comment"}))) == [comment.pk]


def test_it_suggests_the_actions_and_actors_present(admin):
    event("summary.promote", actor="carol")
    html = html_of(admin.get("/audit/"))
    assert '<option value="summary.promote">' in html and '<option value="carol">' in html


def test_it_filters_by_an_inclusive_date_range(admin):
    first = event(created_at=NOON - timedelta(days=2))
    second = event(created_at=NOON - timedelta(days=1))
    third = event(created_at=NOON)

    response = admin.get("/audit/", {"since": "2026-03-08", "until": "2026-03-09"})
    assert shown_ids(html_of(response)) == [second.pk, first.pk]
    assert shown_ids(html_of(admin.get("/audit/", {"since": "2026-03-10"}))) == [third.pk]
    assert shown_ids(html_of(admin.get("/audit/", {"until": "2026-03-08"}))) == [first.pk]


def test_it_ignores_a_date_that_does_not_parse(admin):
    only = event()
    response = admin.get("/audit/", {"since": "yesterday", "until": "2026-13-45"})
    assert response.status_code == 200
    assert shown_ids(html_of(response)) == [only.pk]


def test_it_says_when_no_event_matches(admin):
    event()
    html = html_of(admin.get("/audit/", {"actor": "nobody"}))
    assert shown_ids(html) == [] and "No event matches these filters." in html


def test_it_answers_an_htmx_request_with_the_results_only(admin):
    only = event(actor="bob")
    event(actor="eve")
    response = admin.get("/audit/", {"actor": "bob"}, headers=HX)
    html = html_of(response)
    assert html.lstrip().startswith('<div id="results"')
    assert shown_ids(html) == [only.pk] and "<form" not in html
    assert "HX-Request" in response["Vary"]


# --------------------------------------------------------------------------- paging


def test_it_shows_fifty_events_a_page_and_keeps_the_filters_in_its_links(admin):
    AuditEvent.objects.bulk_create(
        AuditEvent(
            actor_label="bob",
            action="run.queue",
            object_type="compressionrun",
            object_id=str(i),
            created_at=NOON - timedelta(minutes=i),
        )
        for i in range(120)
    )
    event(actor="eve")

    first = html_of(admin.get("/audit/", {"actor": "bob"}))
    last = html_of(admin.get("/audit/", {"actor": "bob", "page": 3}))

    assert len(shown_ids(first)) == 50 and len(shown_ids(last)) == 20
    assert "120 events" in first and "page 1 of 3" in first
    assert 'href="?actor=bob&amp;page=2"' in first
    everything = set(shown_ids(first)) | set(shown_ids(html_of(admin.get("/audit/", {"actor": "bob", "page": 2}))))
    assert len(everything | set(shown_ids(last))) == 120
    assert ">run 119<" in last  # the oldest comes last


def test_it_runs_as_many_queries_for_100_events_as_for_10(admin):
    def queries() -> int:
        with CaptureQueriesContext(connection) as captured:
            assert admin.get("/audit/").status_code == 200
        return len(captured)

    def events(count: int) -> None:
        for i in range(count):
            obj = ["session", "driftcase", "compressionrun", "message", "apikey"][i % 5]
            event(obj=f"{obj}:{i}", before={"status": "open"}, after={"status": "confirmed"})

    events(10)
    ten = queries()
    events(90)
    assert queries() == ten


# --------------------------------------------------------------------------- rows


def test_it_links_each_event_to_its_object(admin, archive: Archive, active: Summary):
    user = admin.user
    session, run = archive.session, archive.run
    case = DriftCase.objects.create(summary=active, session=session, findings=[], severity="high")
    for obj in (session, run, archive, active, case):
        audit(user, "test.touch", obj)
    AuditEvent.objects.create(
        actor_label="x", action="secrets.reveal", object_type="message", object_id="ab" * 32, created_at=NOON
    )
    AuditEvent.objects.create(actor_label="x", action="api_key.create", object_type="apikey", object_id="7")

    html = html_of(admin.get("/audit/"))

    assert f'<a href="/sessions/{session.pk}/">session {session.key}</a>' in html
    assert f'<a href="/runs/{run.pk}/">run {run.pk}</a>' in html
    assert f'<a href="/archives/{archive.pk}/">archive {archive.pk}</a>' in html
    assert f'<a href="/summaries/{active.pk}/">summary {active.pk}</a>' in html
    assert f'<a href="/drift/{case.pk}/">drift case {case.pk}</a>' in html
    assert f'<a href="/messages/{"ab" * 32}/">message {"ab" * 6}</a>' in html
    assert '<td class="object">API key 7</td>' in html  # no page for an API key


def test_it_checks_that_compressing_is_audited_with_a_link_to_the_session(admin, compressed_run: CompressionRun):
    html = html_of(admin.get("/audit/", {"action": "session.compress"}))
    assert len(shown_ids(html)) == 1
    assert f'href="/sessions/{compressed_run.session_id}/"' in html


def test_it_shows_what_changed_and_the_whole_json(admin):
    event(
        "drift_case.update",
        obj="driftcase:2",
        before={"status": "open", "assignee": None, "verdict": ""},
        after={"status": "confirmed", "assignee": None, "verdict": "the summary says deploy"},
    )
    html = html_of(admin.get("/audit/"))
    summary = re.search(r"<summary>(.*?)</summary>", html, re.S)
    assert summary is not None
    assert '<span class="field">status</span>: open → confirmed' in summary.group(1)
    assert '<span class="field">verdict</span>: — → the summary says deploy' in summary.group(1)  # empty: a dash
    assert "changed a drift case&#x27;s review" in html and 'title="drift_case.update"' in html  # words, code kept
    assert "assignee" not in summary.group(1)  # unchanged
    assert "&quot;assignee&quot;: null" in html  # in the whole JSON
    assert "Before" in html and "After" in html


def test_it_escapes_html_inside_before_and_after(admin):
    event(before={"verdict": "<b>bold</b>"}, after={"verdict": "<script>alert(1)</script>", "<img src=x>": 1})
    html = html_of(admin.get("/audit/"))
    assert "<script>alert(1)</script>" not in html and "<img src=x>" not in html and "<b>bold</b>" not in html
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in html and "&lt;img src=x&gt;" in html


def test_it_masks_secrets_in_before_and_after(admin):
    event(after={"focus_topic": f"use {SECRET} for the export"})
    html = html_of(admin.get("/audit/"))
    assert SECRET not in html and "[secret:api_key:" in html


def test_it_shows_a_dash_for_an_event_without_before_or_after(admin):
    event()
    html = html_of(admin.get("/audit/"))
    assert "<details" not in html and "—" in html


# --------------------------------------------------------------------------- the admin


def test_the_admin_site_lists_events_but_cannot_delete_them(superuser):
    row = event(after={"x": 1})

    listing = superuser.get("/admin/console/auditevent/")
    deleted = superuser.post(f"/admin/console/auditevent/{row.pk}/delete/", {"post": "yes"})
    bulk = superuser.post("/admin/console/auditevent/", {"action": "delete_selected", "_selected_action": [row.pk]})

    assert listing.status_code == 200 and "session.create" in html_of(listing)
    assert 'name="action"' not in html_of(listing)  # no bulk actions at all
    assert deleted.status_code == 403
    assert bulk.status_code in (200, 302)
    assert AuditEvent.objects.filter(pk=row.pk).exists()


def test_the_admin_site_cannot_change_or_add_events(superuser):
    row = event(after={"x": 1})

    viewed = superuser.get(f"/admin/console/auditevent/{row.pk}/change/")
    changed = superuser.post(
        f"/admin/console/auditevent/{row.pk}/change/",
        {"actor_label": "mallory", "action": "nothing", "object_type": "session", "object_id": "1"},
    )
    added = superuser.post("/admin/console/auditevent/add/", {"actor_label": "mallory", "action": "x"})

    assert viewed.status_code == 200 and 'name="actor_label"' not in html_of(viewed)  # view only
    assert changed.status_code == 403 and added.status_code == 403
    row.refresh_from_db()
    assert row.actor_label == "alice" and not AuditEvent.objects.filter(actor_label="mallory").exists()


def test_it_says_changes_in_words_and_in_chinese(admin):
    event("drift_case.comment", obj="driftcase:2", after={"comment": 4, "mentions": []})
    event("summary.resummarize", obj="summary:3", after={"model": None, "generator": "extractive"})
    html = html_of(admin.get("/audit/"))
    assert "commented on a drift case" in html and "re-summarized an archive" in html
    assert "mentions</span>: —" in html and "model</span>: —" in html and "summarizer</span>: extractive" in html
    assert ": null" not in html.split("<pre")[0] and "[]" not in html.split("<pre")[0]
    admin.cookies["django_language"] = "zh-hans"
    html = html_of(admin.get("/audit/"))
    assert "评论了漂移案例" in html and "提及</span>: —" in html and "模型</span>: —" in html
