"""The summary page (provenance label, facts, drift), re-summarize progress, and promote with confirmation."""

from __future__ import annotations

import re
from typing import Any

import pytest
from django.db import connection
from django.test import Client
from django.test.utils import CaptureQueriesContext

from agent_compression.summary_message import parse_summary_message
from console.models import Archive, AuditEvent, Message, Session, Summary
from console.services import reported
from console.services.drift import check_summary_drift
from console.services.summaries import execute_resummarize, request_resummarize
from tests.console.factories import HX, SECRET, html_of


@pytest.fixture
def draft(archive: Archive, login) -> Summary:
    """A re-summarize of the archive, finished by a worker (in-process): a draft version."""
    summary = request_resummarize(archive.pk, summarizer="extractive", focus_topic="batch size", user=login().user)
    assert execute_resummarize(summary.pk) == Summary.Status.DRAFT
    summary.refresh_from_db()
    return summary


def crafted(archive: Archive, text: str = "## Decisions\n- keep going", **fields: Any) -> Summary:
    """A summary row written directly (rows are immutable, so crafted texts are made at creation)."""
    fields.setdefault("status", Summary.Status.DRAFT)
    fields.setdefault("summary_id", f"sum_test{Summary.objects.count():08d}")
    fields.setdefault("provenance", {"generator": "extractive", "trigger": "resummarize"})
    return Summary.objects.create(archive=archive, text=text, **fields)


def live_summary_ids(session: Session) -> list[str]:
    ids = []
    for data in Message.load(session.keys()):
        parsed = parse_summary_message(data)
        if parsed:
            ids.append(parsed[0].get("id"))
    return ids


# --------------------------------------------------------------------------- summary page


def test_it_shows_a_summary_with_its_provenance_label(as_viewer, archive, active):
    response = as_viewer.get(f"/summaries/{active.pk}/")

    html = html_of(response)
    assert response.status_code == 200
    assert 'class="provenance-title"' in html
    assert 'class="provenance"' in html
    assert "extractive" in html and active.provenance["prompt_version"] in html
    assert "offline (no endpoint)" in html
    assert f'href="/archives/{archive.pk}/"' in html
    assert f"messages {archive.start}–{archive.end - 1} ({archive.end - archive.start} archived)" in html
    tokens = active.provenance
    assert tokens["input_tokens"] > 0  # the extractive summarizer reads the whole segment
    assert f"{tokens['input_tokens']:,} → {tokens['output_tokens']:,}" in html  # grouped by thousands
    assert "trigger: API" in html  # the fixture's run came through the API trigger
    assert "none (first version)" in html
    assert "Focus topic" in html and ">none<" in html
    assert f'href="/sessions/{archive.session_id}/"' in html
    # the text, rendered as Markdown
    assert "<h2>Decisions</h2>" in html


def test_it_shows_every_provenance_field_for_a_reported_summary_with_few(as_viewer):
    messages = [
        {"role": "user", "content": "hello"},
        {"role": "assistant", "content": "first answer"},
        {"role": "user", "content": "先不要修改部署脚本"},
        {"role": "assistant", "content": "ok"},
        {"role": "user", "content": "and now?"},
    ]
    run = reported.record_reported_run(
        session_key="rt:1",
        input_messages=messages,
        output_messages=[messages[0], {"role": "user", "content": "summary"}, messages[-1]],
        archive_messages=messages[1:4],
        summary_text="The user said not to modify the deploy script.",
        provenance={"model": "in-house-7b"},
    )
    summary = Summary.objects.get(run=run)

    html = html_of(as_viewer.get(f"/summaries/{summary.pk}/"))

    for label in (
        "Generator",
        "Endpoint",
        "Prompt",
        "Focus topic",
        "Source archive",
        "Tokens",
        "Created",
        "Parent",
        "Status",
    ):
        assert f"<dt>{label}</dt>" in html, label
    label = html[html.index('class="provenance"') : html.index("</section>", html.index('class="provenance"'))]
    assert "reported" in label and "in-house-7b" in label
    assert "unknown" in label  # the prompt version nobody reported
    assert "— → —" in label  # tokens in and out
    assert "by the system" in label and "trigger: reported" in label
    assert 'class="provenance-title"' in label


def test_it_shows_a_failed_summary_with_its_error_and_what_to_do(as_operator, archive, active):
    failed = crafted(
        archive,
        text="",
        status=Summary.Status.FAILED,
        error="RuntimeError: HTTP 500 from the model endpoint",
        provenance={"generator": "openai", "model": "gpt-x", "trigger": "resummarize"},
        parent=active,
    )

    html = html_of(as_operator.get(f"/summaries/{failed.pk}/"))

    assert "The summarizer failed; nothing was changed." in html
    assert "Try again, or pick another summarizer." in html
    assert "RuntimeError: HTTP 500 from the model endpoint" in html
    assert 'class="provenance-title"' in html
    assert "gpt-x" in html and "trigger: re-summarize" in html
    assert f'href="/summaries/{active.pk}/"' in html  # the parent
    assert f'href="/summaries/{failed.pk}/promote"' not in html  # nothing to promote


def test_it_shows_a_pending_summary_that_refreshes_itself(as_operator, archive):
    pending = request_resummarize(archive.pk, summarizer="extractive", user=as_operator.user)

    html = html_of(as_operator.get(f"/summaries/{pending.pk}/"))

    assert "waiting for a worker" in html
    assert f'hx-get="/summaries/{pending.pk}/progress"' in html and 'hx-trigger="every 1s"' in html
    assert '<noscript><meta http-equiv="refresh" content="2"></noscript>' in html


def test_it_sanitizes_the_markdown_of_a_summary(as_viewer, archive):
    summary = crafted(
        archive,
        text=(
            "## Decisions\n- <script>alert('x')</script>\n- <img src=x onerror=alert(1)>\n"
            '- [click me](javascript:alert(2))\n- <a href="#" onclick="steal()">hi</a>\n'
        ),
    )

    html = html_of(as_viewer.get(f"/summaries/{summary.pk}/"))
    body = html[html.index('class="summary-text') :]
    body = body[: body.index("</article>")]

    assert "<script" not in body
    assert not re.search(r"<img\b", body)
    assert not re.search(r"<[^>]+\bon\w+=", body), "an event handler attribute survived"
    assert "javascript:" not in body
    assert ">click me</a>" in body  # the link text stays, without its href
    assert "&lt;script&gt;" in body  # shown as text


def test_it_masks_secrets_and_gates_reveal(as_operator, superuser, archive):
    summary = crafted(
        archive,
        text=f"Use the key {SECRET} to call the API.",
        facts=[{"kind": "identifier", "text": SECRET, "source_index": archive.start, "role": "user"}],
    )

    html = html_of(as_operator.get(f"/summaries/{summary.pk}/"))
    assert SECRET not in html
    assert "[secret:" in html
    assert "Reveal secrets" not in html
    assert as_operator.get(f"/summaries/{summary.pk}/?reveal=1").status_code == 403

    revealed = html_of(superuser.get(f"/summaries/{summary.pk}/?reveal=1"))
    assert SECRET in revealed
    assert AuditEvent.objects.filter(action="secrets.reveal", object_id=str(summary.pk)).exists()
    assert "Reveal secrets" in html_of(superuser.get(f"/summaries/{summary.pk}/"))


def test_it_links_pinned_facts_to_the_message_they_came_from(as_viewer, compressed_run, archive, active):
    inside = next(f for f in active.facts if f["kind"] == "constraint")
    assert archive.start <= inside["source_index"] < archive.end
    summary = crafted(
        archive,
        facts=[
            inside,
            {"kind": "path", "text": "README.md", "source_index": archive.end + 2, "role": "user"},
            {"kind": "constraint", "text": "an old promise", "source_index": None, "role": "summary"},
        ],
    )

    html = html_of(as_viewer.get(f"/summaries/{summary.pk}/"))

    i = inside["source_index"]
    assert f'href="/archives/{archive.pk}/?at={i}#a-{i}"' in html
    j = archive.end + 2
    assert f'href="/runs/{compressed_run.pk}/?at=in-{j}#in-{j}"' in html
    assert "carried over from an earlier summary" in html
    assert "Try BATCH=5000, but don&#x27;t deploy; just run the job locally." in html
    # the archive page has the anchor the fact links to
    assert f'id="a-{i}"' in html_of(as_viewer.get(f"/archives/{archive.pk}/?at={i}"))


def test_it_lists_drift_findings_and_cases_of_a_summary(as_viewer, archive, active):
    drifting = crafted(archive, text=active.text.replace("but don't deploy; just run the job locally", "deploy it now"))
    findings = check_summary_drift(drifting.pk)
    inverted = next(f for f in findings if f["kind"] == "constraint_inverted")

    html = html_of(as_viewer.get(f"/summaries/{drifting.pk}/"))

    assert "constraint inverted" in html
    assert 'class="badge sev-high"' in html
    assert "Try BATCH=5000, but don&#x27;t deploy; just run the job locally." in html  # the original side
    assert "Try BATCH=5000, and deploy it now." in html or "deploy it now" in html  # the summary side
    i = inverted["message_index"]
    assert f'href="/archives/{archive.pk}/?at={i}#a-{i}"' in html
    assert "Drift cases" in html and "Case #" in html and ">open<" in html and "unassigned" in html


def test_it_says_when_drift_was_not_checked_yet(as_viewer, archive):
    summary = crafted(archive)
    html = html_of(as_viewer.get(f"/summaries/{summary.pk}/"))
    assert "Not checked yet" in html and "check-limits" not in html


def test_a_clean_check_says_what_it_cannot_judge(as_viewer, archive, active):
    """No finding is not a clearance: on real model summaries the check misses most invented causes and states
    and most mix-ups of who did what (bench/drift_real.py), and the page says so, in both languages."""
    assert check_summary_drift(active.pk) == []
    html = html_of(as_viewer.get(f"/summaries/{active.pk}/"))
    assert "no drift finding against the archived originals" in html
    assert "It catches few invented causes, invented states of the work or mix-ups of who did what" in html
    zh = html_of(as_viewer.get(f"/summaries/{active.pk}/", HTTP_ACCEPT_LANGUAGE="zh-hans"))
    assert "未报告漂移" in zh and "编造的原因" in zh


def test_it_lists_the_versions_of_the_archive_and_the_actions(as_operator, as_viewer, archive, active, draft):
    html = html_of(as_operator.get(f"/summaries/{draft.pk}/"))

    assert f'href="/summaries/{active.pk}/"' in html and "v1" in html and "v2" in html
    assert f'href="/summaries/{draft.pk}/promote"' in html
    assert f'href="/archives/{archive.pk}/compare?a={active.pk}&amp;b={draft.pk}"' in html
    assert "Compare with the active version" in html
    assert f'href="/archives/{archive.pk}/#resummarize"' in html
    assert "batch size" in html  # the draft's focus topic

    viewer = html_of(as_viewer.get(f"/summaries/{draft.pk}/"))
    assert f'href="/summaries/{draft.pk}/promote"' not in viewer
    assert f'href="/archives/{archive.pk}/#resummarize"' not in viewer


def test_it_answers_the_summary_fragment_to_htmx(as_viewer, active):
    response = as_viewer.get(f"/summaries/{active.pk}/", headers=HX)

    html = html_of(response)
    assert response.status_code == 200
    assert "<html" not in html
    assert html.lstrip().startswith('<div id="summary-page">')
    assert 'class="provenance-title"' in html
    assert "HX-Request" in response["Vary"]


def test_it_refuses_people_without_the_view_permission(login, client, active):
    assert login("").get(f"/summaries/{active.pk}/").status_code == 403
    response = client.get(f"/summaries/{active.pk}/")
    assert response.status_code == 302 and "/login/" in response["Location"]
    assert login("viewer").get("/summaries/999999/").status_code == 404


def test_it_reads_a_summary_page_in_constant_queries(as_viewer, archive, active):
    def queries() -> int:
        with CaptureQueriesContext(connection) as ctx:
            assert as_viewer.get(f"/summaries/{active.pk}/").status_code == 200
        return len(ctx.captured_queries)

    few = queries()
    for _ in range(5):
        crafted(archive, parent=active, created_by=as_viewer.user)
    assert queries() == few


# --------------------------------------------------------------------------- progress


def test_it_polls_a_pending_re_summarize_until_it_is_done(as_operator, archive, active):
    pending = request_resummarize(archive.pk, summarizer="extractive", user=as_operator.user)
    url = f"/summaries/{pending.pk}/progress"

    queued = as_operator.get(url, headers=HX)
    assert queued.status_code == 200
    assert "waiting for a worker" in html_of(queued)
    assert 'hx-trigger="every 1s"' in html_of(queued)

    Summary.objects.filter(pk=pending.pk).update(stage="running")
    assert "Summarizing" in html_of(as_operator.get(url, headers=HX))

    Summary.objects.filter(pk=pending.pk).update(stage="queued")
    execute_resummarize(pending.pk)
    done = as_operator.get(url, headers=HX)

    html = html_of(done)
    assert done.status_code == 286
    assert "New version ready." in html
    assert 'hx-trigger="every 1s"' not in html
    assert f'href="/archives/{archive.pk}/compare?a={active.pk}&amp;b={pending.pk}"' in html
    assert f'href="/summaries/{pending.pk}/"' in html
    assert "summaryChanged" in done["HX-Trigger"]


def test_it_redirects_the_progress_url_without_htmx(as_viewer, active):
    response = as_viewer.get(f"/summaries/{active.pk}/progress")
    assert response.status_code == 302 and response["Location"] == f"/summaries/{active.pk}/"


def test_it_shows_a_failed_re_summarize_with_its_error(as_operator, archive, model):
    model.script("500")
    pending = request_resummarize(archive.pk, summarizer="openai", user=as_operator.user)

    assert execute_resummarize(pending.pk) == Summary.Status.FAILED
    done = as_operator.get(f"/summaries/{pending.pk}/progress", headers=HX)

    html = html_of(done)
    assert done.status_code == 286
    assert "The re-summarize failed." in html
    assert "The summarizer failed; nothing was changed. Try again, or pick another summarizer." in html
    assert "500" in html
    page = html_of(as_operator.get(f"/summaries/{pending.pk}/"))
    assert "The summarizer failed; nothing was changed." in page and "500" in page
    assert "127.0.0.1" in page  # the endpoint host in the provenance label


def test_it_refuses_progress_to_people_without_the_view_permission(login, active):
    assert login("").get(f"/summaries/{active.pk}/progress", headers=HX).status_code == 403


# --------------------------------------------------------------------------- promote


def test_it_previews_what_a_promote_would_change(as_operator, archive, active, draft):
    session = archive.session
    session.refresh_from_db()
    response = as_operator.get(f"/summaries/{draft.pk}/promote")

    html = html_of(response)
    assert response.status_code == 200
    assert session.key in html
    position, _ = session.live_summary_index({active.summary_id})
    assert active.summary_id in html
    assert re.search(r"goes from \d+ to \d+ tokens", html)
    assert f'The active version <span class="mono">{active.summary_id}</span> becomes superseded' in html
    assert f"from version {session.version} to {session.version + 1}" in html
    assert "audit entry" in html
    assert re.search(r'<button type="submit" class="primary"\s*>Promote this version', html)
    assert f"The live summary message at position {position} is replaced by this version." in html

    fragment = as_operator.get(f"/summaries/{draft.pk}/promote", headers=HX)
    assert "<html" not in html_of(fragment) and "is replaced by this version" in html_of(fragment)


def test_it_promotes_a_draft_with_htmx(as_operator, archive, active, draft):
    response = as_operator.post(f"/summaries/{draft.pk}/promote", headers=HX)

    html = html_of(response)
    session = Session.objects.get(pk=archive.session_id)
    assert response.status_code == 200, html
    assert f"Promoted: session {session.key} version {session.version}" in html
    assert "summaryPromoted" in response["HX-Trigger"]
    ids = live_summary_ids(session)
    assert draft.summary_id in ids and active.summary_id not in ids
    draft.refresh_from_db()
    active.refresh_from_db()
    assert (draft.status, active.status) == (Summary.Status.ACTIVE, Summary.Status.SUPERSEDED)
    event = AuditEvent.objects.get(action="summary.promote", object_id=str(draft.pk))
    assert event.actor == as_operator.user


def test_it_promotes_without_javascript_and_says_so(as_operator, archive, draft):
    response = as_operator.post(f"/summaries/{draft.pk}/promote")

    assert response.status_code == 303
    assert response["Location"] == f"/summaries/{draft.pk}/"
    html = html_of(as_operator.get(response["Location"]))
    assert "Promoted: session" in html and archive.session.key in html
    assert AuditEvent.objects.filter(action="summary.promote", object_id=str(draft.pk)).exists()


def test_it_refuses_a_promote_to_viewers_and_strangers(as_viewer, login, client, archive, draft):
    version = Session.objects.get(pk=archive.session_id).version

    assert as_viewer.get(f"/summaries/{draft.pk}/promote").status_code == 200
    assert "Promoting needs the operator role." in html_of(as_viewer.get(f"/summaries/{draft.pk}/promote"))
    assert as_viewer.post(f"/summaries/{draft.pk}/promote").status_code == 403
    assert as_viewer.post(f"/summaries/{draft.pk}/promote", headers=HX).status_code == 403
    assert login("").get(f"/summaries/{draft.pk}/promote").status_code == 403
    assert login("").post(f"/summaries/{draft.pk}/promote").status_code == 403
    anonymous = client.post(f"/summaries/{draft.pk}/promote")
    assert anonymous.status_code == 302 and "/login/" in anonymous["Location"]

    draft.refresh_from_db()
    assert draft.status == Summary.Status.DRAFT
    assert Session.objects.get(pk=archive.session_id).version == version
    assert not AuditEvent.objects.filter(action="summary.promote").exists()


def test_it_refuses_a_promote_without_the_csrf_token(login, draft):
    operator = login("operator")
    strict = Client(enforce_csrf_checks=True)
    strict.force_login(operator.user)

    assert strict.post(f"/summaries/{draft.pk}/promote").status_code == 403
    draft.refresh_from_db()
    assert draft.status == Summary.Status.DRAFT


def test_it_answers_409_when_the_live_summary_message_is_gone(as_operator, archive, draft):
    session = Session.objects.get(pk=archive.session_id)
    keys = session.keys()
    session.replace_from(keys, keys[:2])  # rewritten: the summary message left the live history
    version = session.version

    preview = html_of(as_operator.get(f"/summaries/{draft.pk}/promote"))
    assert "This cannot be promoted now." in preview
    assert re.search(r'<button type="submit" class="primary"\s+disabled', preview)

    response = as_operator.post(f"/summaries/{draft.pk}/promote", headers=HX)

    html = html_of(response)
    assert response.status_code == 409
    assert "<html" not in html
    assert (
        "Nothing was changed; the session was compressed again since — compress or re-summarize the newer archive."
        in html
    )
    assert "no longer in the live history" in html
    session.refresh_from_db()
    assert session.version == version
    draft.refresh_from_db()
    assert draft.status == Summary.Status.DRAFT
    assert not AuditEvent.objects.filter(action="summary.promote").exists()

    full = as_operator.post(f"/summaries/{draft.pk}/promote")
    assert full.status_code == 409 and "<html" in html_of(full) and "Not promoted" in html_of(full)


def test_it_does_not_offer_to_promote_the_active_version(as_operator, active):
    preview = html_of(as_operator.get(f"/summaries/{active.pk}/promote"))

    assert "only a draft or superseded version can be promoted" in preview
    assert re.search(r'<button type="submit" class="primary"\s+disabled', preview)
    response = as_operator.post(f"/summaries/{active.pk}/promote", headers=HX)
    assert response.status_code == 409 and "Nothing was changed." in html_of(response)
