"""The archive page (checksum, originals, versions), re-summarize from it, and compare two versions."""

from __future__ import annotations

import re
from typing import Any

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from agent_compression.messages import messages_sha256
from agent_compression.prompt import PROMPT_VERSION
from console.models import Archive, AuditEvent, CompressionRun, Message, Session, Summary
from console.services.drift import check_summary_drift
from console.services.sessions import ImportedSession, create_session
from console.services.summaries import execute_resummarize
from tests.console.factories import HX, SECRET, compress_now, html_of, sample_session


def make_archive(messages: list[dict[str, Any]], start: int = 0, key: str = "t:archive") -> Archive:
    """An archive of ``messages`` (a stored, checksummed range of a reported run's input), written directly."""
    history = [{"role": "user", "content": f"head {i}"} for i in range(start)] + messages
    session = create_session(ImportedSession(key=key, messages=history, metadata={}))
    keys = Message.store(history)
    run = CompressionRun.objects.create(
        session=session, trigger=CompressionRun.Trigger.REPORTED, status="succeeded", input_keys=keys
    )
    return Archive.objects.create(
        session=session,
        run=run,
        start=start,
        end=start + len(messages),
        message_keys=keys[start:],
        sha256=messages_sha256(messages),
    )


def resummarize_form(**fields: str) -> dict[str, str]:
    return {"summarizer": "extractive", "model": "", "focus_topic": "", "prompt_version": ""} | fields


# --------------------------------------------------------------------------- archive page


def test_it_shows_an_archive_with_its_originals_and_versions(as_operator, compressed_run, archive, active):
    response = as_operator.get(f"/archives/{archive.pk}/")

    html = html_of(response)
    assert response.status_code == 200
    assert f'href="/sessions/{archive.session_id}/"' in html
    assert f'href="/runs/{compressed_run.pk}/"' in html
    assert f"messages {archive.start}–{archive.end - 1} of the run's input" in html
    assert archive.sha256 in html
    assert "✓ verified" in html
    for index in range(archive.start, archive.end):
        assert f'id="a-{index}"' in html
    assert f'id="a-{archive.end}"' not in html and f'id="a-{archive.start - 1}"' not in html
    assert "Try BATCH=5000, but don&#x27;t deploy; just run the job locally." in html
    # the versions table, with the compare selection and the re-summarize form
    assert f'href="/summaries/{active.pk}/"' in html
    assert f'<input type="radio" name="a" value="{active.pk}"' in html
    assert f'action="/archives/{archive.pk}/compare"' in html
    assert f'action="/archives/{archive.pk}/resummarize"' in html
    assert 'name="csrfmiddlewaretoken"' in html
    assert 'class="provenance-title"' in html  # provenance label of each version


def test_it_shows_the_archive_to_viewers_without_the_actions(as_viewer, archive, active):
    from console.services.summaries import request_resummarize

    draft = request_resummarize(archive.pk, summarizer="extractive")
    execute_resummarize(draft.pk)

    html = html_of(as_viewer.get(f"/archives/{archive.pk}/"))

    assert "✓ verified" in html
    assert f'action="/archives/{archive.pk}/resummarize"' not in html
    assert "Re-summarizing needs the operator role." in html
    assert f'href="/summaries/{draft.pk}/promote"' not in html
    before = Summary.objects.count()
    assert as_viewer.post(f"/archives/{archive.pk}/resummarize", resummarize_form()).status_code == 403
    assert as_viewer.post(f"/archives/{archive.pk}/resummarize", resummarize_form(), headers=HX).status_code == 403
    assert Summary.objects.count() == before


def test_it_offers_promote_per_version_to_operators(as_operator, archive, active):
    from console.services.summaries import request_resummarize

    draft = request_resummarize(archive.pk, summarizer="extractive")
    execute_resummarize(draft.pk)

    html = html_of(as_operator.get(f"/archives/{archive.pk}/"))

    assert f'href="/summaries/{draft.pk}/promote"' in html
    assert f'hx-get="/summaries/{draft.pk}/promote"' in html and 'hx-target="#promote-region"' in html
    assert f'href="/summaries/{active.pk}/promote"' not in html  # already active


def test_it_refuses_the_archive_to_people_without_the_view_permission(login, client, archive):
    assert login("").get(f"/archives/{archive.pk}/").status_code == 403
    assert login("").post(f"/archives/{archive.pk}/resummarize", resummarize_form()).status_code == 403
    response = client.get(f"/archives/{archive.pk}/")
    assert response.status_code == 302 and "/login/" in response["Location"]
    assert login("viewer").get("/archives/999999/").status_code == 404


def test_it_shows_a_checksum_mismatch_without_failing(as_viewer, archive):
    Archive.objects.filter(pk=archive.pk).update(sha256="0" * 64)  # save() refuses: rows are immutable

    response = as_viewer.get(f"/archives/{archive.pk}/")

    html = html_of(response)
    assert response.status_code == 200
    assert "✓ verified" not in html
    assert "Mismatch: the stored originals do not match this archive's checksum." in html
    assert 'class="checksum bad" role="alert"' in html
    assert "does not match its sha256" in html
    assert f'id="a-{archive.start}"' in html  # what is stored is still listed
    assert "Try BATCH=5000" in html


def test_it_shows_an_archive_whose_messages_are_missing(as_viewer, archive):
    lost = "f" * 64
    Archive.objects.filter(pk=archive.pk).update(message_keys=[*archive.message_keys[:-1], lost])

    response = as_viewer.get(f"/archives/{archive.pk}/")

    html = html_of(response)
    assert response.status_code == 200
    assert "is incomplete" in html and "Mismatch" in html
    assert f"This message ({lost[:12]}…) is missing from storage." in html
    assert f'id="a-{archive.end - 1}"' in html


def test_it_escapes_html_and_masks_secrets_in_archived_messages(as_operator, superuser):
    archive = make_archive(
        [
            {"role": "user", "content": "<script>alert('x')</script><img src=x onerror=alert(1)>"},
            {"role": "assistant", "content": f"the key is {SECRET}"},
        ],
        start=2,
    )

    html = html_of(as_operator.get(f"/archives/{archive.pk}/"))

    assert "<script>alert" not in html and "<img src=x" not in html
    assert "&lt;script&gt;alert(&#x27;x&#x27;)&lt;/script&gt;" in html
    assert SECRET not in html and "[secret:" in html
    assert "✓ verified" in html
    assert as_operator.get(f"/archives/{archive.pk}/?reveal=1").status_code == 403
    assert SECRET in html_of(superuser.get(f"/archives/{archive.pk}/?reveal=1"))
    assert AuditEvent.objects.filter(action="secrets.reveal", object_type="archive").exists()


def test_it_pages_through_a_long_archive(as_viewer):
    archive = make_archive([{"role": "user", "content": f"message number {i}"} for i in range(450)], start=5)

    first = html_of(as_viewer.get(f"/archives/{archive.pk}/"))
    assert 'id="a-5"' in first and 'id="a-54"' in first and 'id="a-55"' not in first  # 50 a page
    assert "Page 1 of 9" in first
    assert f'rel="next" href="/archives/{archive.pk}/?page=2#originals"' in first

    second = html_of(as_viewer.get(f"/archives/{archive.pk}/?at=300"))
    assert 'id="a-300"' in second and 'id="a-255"' in second and 'id="a-254"' not in second
    assert "Page 6 of 9" in second and 'rel="prev"' in second

    fragment = as_viewer.get(f"/archives/{archive.pk}/?page=9", headers=HX | {"HX-Target": "archive-messages"})
    html = html_of(fragment)
    assert html.lstrip().startswith('<div id="archive-messages">')
    assert 'id="a-454"' in html and 'id="a-405"' in html and "message number 449" in html
    assert "Summary versions" not in html and "<html" not in html


def test_it_loads_one_page_of_originals_in_constant_queries(as_viewer):
    small = make_archive([{"role": "user", "content": f"a {i}"} for i in range(3)], key="t:small")
    big = make_archive([{"role": "user", "content": f"b {i}"} for i in range(300)], key="t:big")

    def queries(archive: Archive) -> int:
        with CaptureQueriesContext(connection) as ctx:
            assert as_viewer.get(f"/archives/{archive.pk}/").status_code == 200
        return len(ctx.captured_queries)

    assert queries(big) == queries(small)


def test_it_answers_archive_regions_to_htmx(as_viewer, archive, active):
    versions = as_viewer.get(f"/archives/{archive.pk}/", headers=HX | {"HX-Target": "summary-versions"})
    html = html_of(versions)
    assert html.lstrip().startswith('<div id="summary-versions"')
    assert f'href="/summaries/{active.pk}/"' in html and 'id="a-' not in html
    assert 'hx-trigger="summaryPromoted from:body, summaryChanged from:body"' in html
    assert "HX-Target" in versions["Vary"]

    page = html_of(as_viewer.get(f"/archives/{archive.pk}/", headers=HX))
    assert "<html" not in page and '<div id="archive-page">' in page and "✓ verified" in page


# --------------------------------------------------------------------------- re-summarize


def test_it_queues_a_re_summarize_and_polls_it_with_htmx(as_operator, archive, active):
    response = as_operator.post(
        f"/archives/{archive.pk}/resummarize",
        resummarize_form(focus_topic="deploy script"),
        headers=HX | {"HX-Target": "resummarize"},
    )

    html = html_of(response)
    assert response.status_code == 200, html
    pending = Summary.objects.get(status=Summary.Status.PENDING)
    assert pending.archive_id == archive.pk and pending.parent_id == active.pk
    assert pending.provenance["focus_topic"] == "deploy script"
    assert pending.created_by == as_operator.user
    assert AuditEvent.objects.filter(action="summary.resummarize", object_id=str(pending.pk)).exists()
    assert html.lstrip().startswith('<div id="resummarize">')
    assert f'hx-get="/summaries/{pending.pk}/progress"' in html and 'hx-trigger="every 1s"' in html
    assert "waiting for a worker" in html
    assert "summaryChanged" in response["HX-Trigger"]

    execute_resummarize(pending.pk)
    done = as_operator.get(f"/summaries/{pending.pk}/progress", headers=HX)
    assert done.status_code == 286
    assert f'href="/archives/{archive.pk}/compare?a={active.pk}&amp;b={pending.pk}"' in html_of(done)
    pending.refresh_from_db()
    assert pending.status == Summary.Status.DRAFT and pending.text


def test_it_re_summarizes_without_javascript(as_operator, archive):
    response = as_operator.post(f"/archives/{archive.pk}/resummarize", resummarize_form())

    pending = Summary.objects.get(status=Summary.Status.PENDING)
    assert response.status_code == 303
    assert response["Location"] == f"/summaries/{pending.pk}/"
    page = html_of(as_operator.get(response["Location"]))
    assert '<meta http-equiv="refresh" content="2">' in page and "waiting for a worker" in page


@pytest.mark.parametrize(
    ("fields", "message"),
    [
        ({"summarizer": "openai"}, "no model endpoint is configured"),
        ({"summarizer": "extractive", "model": "gpt-4o"}, "the extractive summarizer uses no model"),
        ({"summarizer": "extractive", "prompt_version": PROMPT_VERSION}, "has no prompt version"),
        ({"summarizer": "magic"}, "Select a valid choice"),
    ],
)
def test_it_answers_422_with_the_form_when_a_re_summarize_is_refused(as_operator, archive, settings, fields, message):
    settings.OPENAI_BASE_URL = ""
    settings.OPENAI_API_KEY = ""
    before = Summary.objects.count()

    response = as_operator.post(
        f"/archives/{archive.pk}/resummarize", resummarize_form(**fields), headers=HX | {"HX-Target": "resummarize"}
    )

    html = html_of(response)
    assert response.status_code == 422
    assert html.lstrip().startswith('<div id="resummarize">')
    assert message in html.replace("&#x27;", "'")
    assert Summary.objects.count() == before

    full = as_operator.post(f"/archives/{archive.pk}/resummarize", resummarize_form(**fields))
    assert full.status_code == 422 and "<html" in html_of(full) and message in html_of(full).replace("&#x27;", "'")
    assert "✓ verified" in html_of(full)


def test_it_shows_a_re_summarize_that_failed_at_the_model(as_operator, archive, model):
    model.script("500")

    response = as_operator.post(
        f"/archives/{archive.pk}/resummarize",
        resummarize_form(summarizer="openai", model="fake-model"),
        headers=HX | {"HX-Target": "resummarize"},
    )
    assert response.status_code == 200
    pending = Summary.objects.get(status=Summary.Status.PENDING)
    execute_resummarize(pending.pk)

    done = as_operator.get(f"/summaries/{pending.pk}/progress", headers=HX)

    html = html_of(done)
    assert done.status_code == 286
    assert "The re-summarize failed." in html and "nothing was changed" in html
    assert "HTTP 500" in html
    assert len(model.requests) == 1


# --------------------------------------------------------------------------- compare


@pytest.fixture
def drifting(archive: Archive, active: Summary) -> Summary:
    """A second version whose text inverts the user's constraint, with a fact of its own; drift checked."""
    summary = Summary.objects.create(
        archive=archive,
        parent=active,
        summary_id="sum_drifting000001",
        status=Summary.Status.DRAFT,
        text=active.text.replace("but don't deploy; just run the job locally", "and deploy it to production"),
        provenance={"generator": "openai", "model": "gpt-x", "trigger": "resummarize"},
        facts=[*active.facts[1:], {"kind": "path", "text": "deploy/prod.sh", "source_index": 7, "role": "user"}],
    )
    check_summary_drift(summary.pk)
    check_summary_drift(active.pk)
    summary.refresh_from_db()
    return summary


def test_it_compares_two_versions_side_by_side(as_viewer, archive, active, drifting):
    response = as_viewer.get(f"/archives/{archive.pk}/compare", {"a": active.pk, "b": drifting.pk})

    html = html_of(response)
    assert response.status_code == 200
    assert html.count('class="provenance-title"') == 2
    assert "gpt-x" in html and "extractive" in html
    # the difference leads: the changed section word by word, before the facts, findings and full texts
    assert re.search(r'<del class="diff">[^<]*but don&#x27;t', html)
    assert re.search(r'<ins class="diff">[^<]*production', html)
    assert html.index('id="text-diff"') < html.index('id="facts-diff"') < html.index('id="full-texts"')
    assert '<details class="compare-full" id="full-texts">' in html  # the full texts are collapsed
    assert re.search(r"\d+ sections? changed", html)
    # pinned facts: the constraint only in A, the new path only in B, the rest in both
    facts = html[html.index('id="facts-diff"') : html.index('id="findings-diff"')]
    only_a = facts[facts.index("only-a") : facts.index("only-b")]
    only_b = facts[facts.index("only-b") : facts.index('class="diff-group both"')]
    assert "Try BATCH=5000, but don&#x27;t deploy" in only_a
    assert "deploy/prod.sh" in only_b and "Try BATCH" not in only_b
    assert "jobs/export_nightly.py" in facts[facts.index('class="diff-group both"') :]
    # drift findings: the inversion is only in B
    findings = html[html.index('id="findings-diff"') :]
    assert "constraint inverted" in findings[findings.index("only-b") : findings.index('class="diff-group both"')]
    assert "constraint inverted" not in findings[findings.index("only-a") : findings.index("only-b")]


def test_it_compares_the_active_version_with_the_newest_by_default(as_operator, archive, active, drifting):
    html = html_of(as_operator.get(f"/archives/{archive.pk}/compare"))

    assert f'<option value="{active.pk}" selected>' in html
    assert f'<option value="{drifting.pk}" selected>' in html
    assert html.index(f'href="/summaries/{active.pk}/"') < html.index(f'href="/summaries/{drifting.pk}/"')
    # promote is offered for the version that is not active
    assert f'href="/summaries/{drifting.pk}/promote"' in html
    assert f'href="/summaries/{active.pk}/promote"' not in html


def test_it_compares_without_a_promote_button_for_viewers(as_viewer, archive, active, drifting):
    html = html_of(as_viewer.get(f"/archives/{archive.pk}/compare"))
    assert f'href="/summaries/{drifting.pk}/promote"' not in html


def test_it_refuses_to_compare_summaries_of_another_archive(as_viewer, archive, active):
    other = compress_now(sample_session(key="other:1"))
    foreign = Summary.objects.get(run=other)

    assert as_viewer.get(f"/archives/{archive.pk}/compare", {"a": active.pk, "b": foreign.pk}).status_code == 404
    assert as_viewer.get(f"/archives/{archive.pk}/compare", {"a": foreign.pk}).status_code == 404
    assert as_viewer.get(f"/archives/{archive.pk}/compare", {"a": "x"}).status_code == 404


def test_it_says_when_there_is_nothing_to_compare(as_viewer, archive, active):
    html = html_of(as_viewer.get(f"/archives/{archive.pk}/compare"))
    assert "This archive has only one summary version." in html


def test_it_shows_whole_lines_when_they_are_too_long_to_diff_by_word(as_viewer, archive, active, drifting, monkeypatch):
    monkeypatch.setattr("console.diff.words.MAX_WORD_DIFF_TOKENS", 5)

    html = html_of(as_viewer.get(f"/archives/{archive.pk}/compare", {"a": active.pk, "b": drifting.pk}))

    changed = html.split('class="legend')[0]
    assert re.search(r"<del class=\"diff\">[^<]*Try BATCH=5000, but don&#x27;t deploy[^<]*\n</del>", changed)
    assert re.search(r"<ins class=\"diff\">[^<]*and deploy it to production[^<]*\n</ins>", changed)
    assert html.count('class="summary-text markdown"') == 2


def test_it_masks_secrets_in_the_comparison(as_viewer, superuser, archive, active):
    secret = Summary.objects.create(
        archive=archive,
        summary_id="sum_secret00000001",
        status=Summary.Status.DRAFT,
        text=active.text + f"\n\nKey: {SECRET}",
        provenance={"generator": "extractive"},
    )

    html = html_of(as_viewer.get(f"/archives/{archive.pk}/compare", {"a": active.pk, "b": secret.pk}))

    assert SECRET not in html and "[secret:" in html
    assert as_viewer.get(f"/archives/{archive.pk}/compare", {"a": active.pk, "reveal": "1"}).status_code == 403
    assert SECRET in html_of(superuser.get(f"/archives/{archive.pk}/compare", {"b": secret.pk, "reveal": "1"}))


def test_it_answers_the_comparison_fragment_to_htmx(as_viewer, archive, active, drifting):
    response = as_viewer.get(f"/archives/{archive.pk}/compare", {"a": active.pk, "b": drifting.pk}, headers=HX)

    html = html_of(response)
    assert html.lstrip().startswith('<div id="compare-body">')
    assert "<html" not in html and '<del class="diff"' in html
    assert 'hx-trigger="summaryPromoted from:body"' in html


def test_it_refuses_the_comparison_to_people_without_the_view_permission(login, client, archive):
    assert login("").get(f"/archives/{archive.pk}/compare").status_code == 403
    response = client.get(f"/archives/{archive.pk}/compare")
    assert response.status_code == 302 and "/login/" in response["Location"]


def test_it_promotes_from_the_comparison_and_the_session_changes(as_operator, archive, active, drifting):
    preview = as_operator.get(f"/summaries/{drifting.pk}/promote", headers=HX)
    assert "is replaced by this version" in html_of(preview)

    response = as_operator.post(f"/summaries/{drifting.pk}/promote", {"acknowledge_drift": "1"}, headers=HX)

    assert response.status_code == 200
    session = Session.objects.get(pk=archive.session_id)
    assert any(drifting.summary_id in str(m.get("content")) for m in session.messages())
    html = html_of(as_operator.get(f"/archives/{archive.pk}/compare", {"a": active.pk, "b": drifting.pk}))
    assert f'href="/summaries/{active.pk}/promote"' in html  # now superseded: it can be promoted back
    assert f'href="/summaries/{drifting.pk}/promote"' not in html
