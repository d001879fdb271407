"""Search within a session and within an archive: which message matched, a jump to it, and masked stays masked."""

from __future__ import annotations

import re
from html import unescape

import pytest

from console.models import Archive, Message
from console.services.sessions import ImportedSession, create_session
from tests.console.factories import SECRET, compress_now, html_of, sample_session

pytestmark = pytest.mark.django_db


@pytest.fixture
def with_secret():
    """The coding sample with a secret in message 6 (archived by a compression) and in the last message."""
    messages = Message.load(sample_session().keys())
    messages[6] = {"role": "user", "content": f"Use the key {SECRET} for the nightly export, please."}
    messages.append({"role": "user", "content": f"Again: the nightly export key is {SECRET}."})
    session = create_session(ImportedSession(key="search-me", messages=messages, metadata={}))
    run = compress_now(session)
    assert run.applied
    session.refresh_from_db()
    return session, Archive.objects.get(run=run)


def hits_of(page: str) -> list[tuple[str, str, str]]:
    block = page.split('class="search-results"', 1)[1].split("</ol>", 1)[0]
    return [
        (unescape(h), n, role)
        for h, n, role in re.findall(
            r'<a href="([^"]+)"><span class="mono">message (\d+)</span></a>\s*<span class="role">(\w+)</span>', block
        )
    ]


def test_the_session_page_finds_messages_and_jumps_to_the_one_that_matched(as_viewer, with_secret):
    session, _ = with_secret
    page = html_of(as_viewer.get(f"/sessions/{session.pk}/?q=nightly+export+key"))
    hits = hits_of(page)
    last = session.message_count - 1
    assert [(n, role) for _, n, role in hits] == [(str(last), "user")]
    href = hits[0][0]
    assert href.endswith(f"#m-{last}") and f"at={last}" in href
    # the jump: the window holding the message, scrolled to it (the browser keeps the fragment)
    response = as_viewer.get(href.split("#")[0])
    assert response.status_code == 302 and response["Location"].endswith(f"#m-{last}")
    window = html_of(as_viewer.get(response["Location"].split("#")[0]))
    assert f'id="m-{last}"' in window
    assert "1 message contains" in page
    assert "<mark>nightly export key</mark>" in page


def test_the_archive_page_finds_originals_and_highlights_the_one_it_jumps_to(as_viewer, with_secret):
    session, archive = with_secret
    assert archive.start <= 6 < archive.end
    page = html_of(as_viewer.get(f"/archives/{archive.pk}/?q=nightly+export"))
    hits = hits_of(page)
    assert ("6", "user") in [(n, role) for _, n, role in hits]
    href = next(h for h, n, _ in hits if n == "6")
    assert href.endswith("#a-6")
    target = html_of(as_viewer.get(href.split("#")[0]))
    assert re.search(r'<div class="archived targeted" data-nav>\s*<span class="index mono"[^>]*>6</span>', target)
    assert 'id="a-6"' in target


def test_search_is_masked_no_secret_found_or_shown(as_viewer, superuser, with_secret):
    session, archive = with_secret
    for url in (f"/sessions/{session.pk}/", f"/archives/{archive.pk}/"):
        assert "No message contains" in html_of(as_viewer.get(f"{url}?q={SECRET[:14]}"))
        found = html_of(as_viewer.get(f"{url}?q=nightly+export"))
        assert SECRET not in found and SECRET[:12] not in found
        # a reader who may reveal searches what is shown to everyone: the masked text
        assert "No message contains" in html_of(superuser.get(f"{url}?q={SECRET[:14]}&reveal=1"))


def test_an_empty_or_huge_search_is_harmless(as_viewer, with_secret):
    session, archive = with_secret
    assert 'class="search-results"' not in html_of(as_viewer.get(f"/sessions/{session.pk}/?q=+"))
    assert as_viewer.get(f"/archives/{archive.pk}/?q={'x' * 5000}").status_code == 200
