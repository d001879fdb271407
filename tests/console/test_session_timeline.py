"""The session timeline: message numbers and timestamps, "show the rest" counts what is left, and the
summary versions and promotions of the session's archives."""

from __future__ import annotations

import re

import pytest

from console.display import PREVIEW_CHARS, message_view
from console.models import Summary
from console.services.sessions import ImportedSession, create_session
from console.services.summaries import execute_resummarize, promote_summary, request_resummarize
from tests.console.factories import html_of

pytestmark = pytest.mark.django_db


@pytest.fixture
def stamped():
    messages = [
        {"role": "system", "content": "You are a helper.", "timestamp": "2026-11-28T09:00:38"},
        {"role": "user", "content": "x" * (PREVIEW_CHARS + 896), "timestamp": "2026-11-28T09:01:02Z"},
        {"role": "assistant", "content": "done", "timestamp": "not a time"},
    ]
    return create_session(ImportedSession(key="stamped", messages=messages, metadata={}))


def test_the_timeline_shows_message_numbers_and_timestamps(as_viewer, stamped):
    page = html_of(as_viewer.get(f"/sessions/{stamped.pk}/"))
    for n in range(3):
        assert re.search(rf'<a class="anchor mono" href="#m-{n}"[^>]*>#{n}</a>', page), n
    # one date format, as everywhere (the ``|when`` filter); a time without a zone is UTC
    assert (
        '<time datetime="2026-11-28T09:00:38+00:00" title="28 Nov 2026, 09:00:38 UTC">28 Nov 2026, 09:00</time>' in page
    )
    assert '<time datetime="2026-11-28T09:01:02+00:00"' in page
    assert '<span class="muted msg-time">not a time</span>' in page


def test_show_the_rest_counts_what_is_left_not_the_total(as_viewer, stamped):
    page = html_of(as_viewer.get(f"/sessions/{stamped.pk}/"))
    view = message_view("k", {"role": "user", "content": "x" * (PREVIEW_CHARS + 896)})
    assert view.rest_chars == 896 and view.full_chars == PREVIEW_CHARS + 896
    assert "Show the rest (896 characters)" in page
    assert f"Show the rest ({PREVIEW_CHARS + 896} characters)" not in page


def test_versions_and_promotions_appear_on_the_session_page(as_viewer, archive):
    draft = request_resummarize(archive.pk, summarizer="extractive", user=None)
    assert execute_resummarize(draft.pk) == Summary.Status.DRAFT
    promote_summary(draft.pk)
    page = html_of(as_viewer.get(f"/sessions/{archive.session_id}/"))
    section = page.split('id="summary-history"', 1)[1].split("</section>", 1)[0]
    assert "v2 became the live summary" in section and "(replacing v1)" in section
    assert "v2 written" in section and "v1 written" in section
    assert section.index("became the live summary") < section.index("v1 written")  # newest first
    draft.refresh_from_db()
    assert f'href="/summaries/{draft.pk}/"' in section and f'href="/archives/{archive.pk}/"' in section
