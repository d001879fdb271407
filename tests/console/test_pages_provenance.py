"""Issue 16: the provenance label answers an auditor, promotions keep when a summary was made, audit wording."""

from __future__ import annotations

import re
from datetime import UTC

import pytest
from django.contrib.auth.models import User

from agent_compression.summary_message import parse_summary_message
from console.models import Archive, AuditEvent, Message, Session, Summary
from console.services.drift import check_summary_drift
from console.services.summaries import (
    execute_resummarize,
    promote_summary,
    promotion_preview,
    request_resummarize,
)
from tests.console.factories import html_of

pytestmark = pytest.mark.django_db


@pytest.fixture
def draft(archive: Archive, login) -> Summary:
    summary = request_resummarize(archive.pk, summarizer="extractive", focus_topic="batch size", user=login().user)
    assert execute_resummarize(summary.pk) == Summary.Status.DRAFT
    summary.refresh_from_db()
    return summary


def label_of(html: str) -> str:
    start = html.index('class="provenance"')
    return html[start : html.index("</section>", start)]


def live_header(session: Session, summary_id: str) -> dict[str, str]:
    for data in Message.load(session.keys()):
        parsed = parse_summary_message(data)
        if parsed and parsed[0].get("id") == summary_id:
            return parsed[0]
    raise AssertionError(f"{summary_id} is not in the live history")


def test_the_label_answers_an_auditor(as_viewer, compressed_run, archive, active):
    check_summary_drift(active.pk)
    active.refresh_from_db()
    label = label_of(html_of(as_viewer.get(f"/summaries/{active.pk}/")))
    # input tokens: the extractive summarizer reads the whole segment
    assert active.provenance["input_tokens"] > 0
    assert f"{active.provenance['input_tokens']:,} → {active.provenance['output_tokens']:,}" in label
    # no prompt hash for a summarizer without a prompt, said so
    assert "— (no prompt: extractive)" in label
    # the archive's checksum
    assert "<dt>Archive checksum</dt>" in label and f'title="{archive.sha256}"' in label
    assert archive.sha256[:16] in label
    # the config the run used (the fixture's run had a 4,000-token window)
    assert "<dt>Config</dt>" in label
    assert "window 4,000" in label and "trigger 2,800" in label
    config = active.provenance["config"]
    assert f"summary at most {config['summary_max_tokens']:,} · tail {config['tail_tokens']:,}" in label
    assert f"(budget {active.provenance['budget_tokens']:,}" in label  # what the summarizer was given
    assert 'overrides: <span class="mono">context_window_tokens<' in label
    # when the drift check ran
    assert "<dt>Drift check</dt>" in label and active.drift_checked_at.strftime("%Y-%m-%d") in label
    # how it got live: the run put it there
    assert "<dt>Live since</dt>" in label and f"run #{compressed_run.pk}" in label


def test_the_label_is_titled_provenance_not_a_warning(as_viewer, active):
    html = html_of(as_viewer.get(f"/summaries/{active.pk}/"))
    label = label_of(html)
    assert re.search(r'<h2 class="provenance-title" id="provenance-\d+">Provenance</h2>', label)
    assert "provenance-notice" not in label  # the amber "⚑ REFERENCE MATERIAL" banner


def test_a_promotion_records_who_and_when_and_keeps_when_the_summary_was_made(as_operator, archive, active, draft):
    preview = promotion_preview(draft)
    session = promote_summary(draft.pk, user=as_operator.user)
    written = session.entries.get(position=preview.position).message.tokens
    assert preview.new_tokens == written  # the preview counts the message promoting writes
    draft.refresh_from_db()
    assert draft.promoted_by == as_operator.user and draft.promoted_at is not None
    header = live_header(session, draft.summary_id)
    assert header["created"] == draft.created_at.astimezone(UTC).isoformat(timespec="seconds")
    assert header.get("history")  # the numbering of the message it replaced is kept
    label = label_of(html_of(as_operator.get(f"/summaries/{draft.pk}/")))
    assert f"promoted by {as_operator.user.get_username()}" in label
    assert draft.promoted_at.strftime("%Y-%m-%d") in label


def test_the_label_of_a_summary_without_a_run_config_or_check_says_so(as_viewer, draft):
    label = label_of(html_of(as_viewer.get(f"/summaries/{draft.pk}/")))
    assert "<dt>Live since</dt>" in label and "not in the live session" in label
    assert "<dt>Drift check</dt>" in label


# --------------------------------------------------------------------------- audit wording


def test_a_promotion_audit_event_says_what_happened(superuser, archive, active, draft):
    promote_summary(draft.pk, user=User.objects.get(username="root"))
    event = AuditEvent.objects.get(action="summary.promote", object_id=str(draft.pk))
    assert event.after["live_summary"] == draft.summary_id  # not dropped: the diff read as a removal
    assert (event.before["summary_version"], event.after["summary_version"]) == (1, 2)
    html = html_of(superuser.get("/audit/"))
    row = html[html.index(f'id="e-{event.pk}"') :]
    row = row[: row.index("</tr>")]
    assert f"promoted v2 ({draft.summary_id}) replacing v1 ({active.summary_id})" in row
    assert "→ null" not in row


def test_an_old_promotion_event_does_not_read_as_a_removal(superuser, archive, active):
    old = AuditEvent.objects.create(
        actor_label="root",
        action="summary.promote",
        object_type="summary",
        object_id=str(active.pk),
        before={"status": "draft", "live_summary": "sum_0123456789abcdef"},
        after={"status": "active", "session": archive.session.key, "position": 3, "version": 2},
    )
    html = html_of(superuser.get("/audit/"))
    row = html[html.index(f'id="e-{old.pk}"') :]
    row = row[: row.index("</tr>")]
    assert "→ null" not in row
    assert "replacing sum_0123456789abcdef" in row
