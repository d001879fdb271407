"""Every ``#N`` and pinned fact of a summary links to the archived original it names, after a second
compression too (lines carried from the first summary), on the summary, run and drift case pages."""

from __future__ import annotations

import re
from html import unescape

import pytest
from django.test import Client

from agent_compression.facts import history_indexes
from agent_compression.messages import content_text
from console.display import link_references, mask_unless_revealed, render_markdown
from console.models import Archive, CompressionRun, DriftCase, Message, Summary, searchable_text
from console.services.sessions import append_messages
from tests.console.factories import compress_now, html_of, sample_session

LINK = re.compile(r'<a class="ref" href="([^"]+)"[^>]*>#(\d+)</a>')
BARE = re.compile(r"(?<![&\w#])#(\d+)(?!\w)")


def more_turns(n: int) -> list[dict[str, str]]:
    out = []
    for i in range(n):
        out.append({"role": "user", "content": f"Step {i}: keep /srv/app/config-{i}.yaml as it is and check the logs."})
        out.append({"role": "assistant", "content": f"Checked step {i}: " + "the log shows nothing unusual. " * 40})
    return out


@pytest.fixture
def twice(db) -> tuple[CompressionRun, CompressionRun]:
    """The coding sample compressed, appended to, and compressed again (the second summary carries lines)."""
    session = sample_session()
    first = compress_now(session)
    assert first.applied, first.error
    append_messages(session.key, more_turns(12))
    second = compress_now(session)
    assert second.applied and hasattr(second, "archive"), second.error
    return first, second


def text_without_tags(html: str) -> str:
    return unescape(re.sub(r"<[^>]+>", "", html))


def original_at(client: Client, href: str) -> tuple[str, str]:
    """The archive page ``href`` lands on: the element its fragment names, and that message's text."""
    page = html_of(client.get(href))
    anchor = href.rsplit("#", 1)[1]
    m = re.search(rf'<article class="msg[^"]*" id="{anchor}">(.*?)</article>', page, re.S)
    assert m, f"{href}: no message with id {anchor}"
    return anchor, text_without_tags(m.group(1))


def page_role(client: Client, href: str) -> str:
    anchor = href.rsplit("#", 1)[1]
    page = html_of(client.get(href))
    return page.split(f'id="{anchor}"', 1)[1].split("</header>", 1)[0]


def test_link_references_touches_text_only_and_stays_sanitized():
    html = render_markdown('See #3 and [#4](https://e.x "a>b #5"), `x #6`, &#39; #7x <script>#8</script>')
    out = str(link_references(html, lambda n: f"/archives/1/?at={n}#a-{n}"))
    assert '<a class="ref" href="/archives/1/?at=3#a-3"' in out
    assert 'href="/archives/1/?at=4' not in out and 'href="/archives/1/?at=5' not in out  # inside a link: left alone
    assert "#a-6" in out and "#a-8" in out  # code and escaped text are text
    assert "#a-7" not in out and "<script>" not in out
    assert str(link_references(html, lambda n: None)).count('class="ref"') == 0


def test_every_reference_on_the_summary_page_lands_on_its_original(as_viewer, twice):
    _, second = twice
    archive = Archive.objects.get(run=second)
    summary = archive.summaries.get(status=Summary.Status.ACTIVE)
    page = html_of(as_viewer.get(f"/summaries/{summary.pk}/"))
    text = page.split('aria-label="Summary text">', 1)[1].split("</article>", 1)[0]

    links = LINK.findall(text)
    assert links, text[:2000]
    assert not BARE.findall(LINK.sub("", text)), "a #N left as plain text"
    earlier = set()
    for href, n in links:
        anchor, shown = original_at(as_viewer, unescape(href))
        target = Archive.objects.get(pk=int(href.split("/")[2]))
        earlier.add(target.pk != archive.pk)
        index = int(anchor.removeprefix("a-"))
        assert history_index_of(target, index) == int(n), (n, href)
        original = Message.load([target.message_keys[index - target.start]])[0]
        expected = " ".join(mask_unless_revealed(content_text(original)).split())[:40]
        assert expected in " ".join(shown.split()), (n, href)
        assert f">{original['role']}<" in page_role(as_viewer, unescape(href))
    # lines carried from the first summary link to the first archive
    assert earlier == {True, False}, links


def history_index_of(archive: Archive, index: int) -> int | None:
    """The history index (the ``#N`` numbering) of message ``index`` of ``archive``'s run input."""
    return history_indexes(Message.load(archive.message_keys), archive.start)[index - archive.start]


def test_pinned_facts_link_to_their_originals_after_a_second_compression(as_viewer, twice):
    _, second = twice
    archive = Archive.objects.get(run=second)
    summary = archive.summaries.get(status=Summary.Status.ACTIVE)
    page = html_of(as_viewer.get(f"/summaries/{summary.pk}/"))
    facts = re.findall(
        r'<q class="verbatim">(.*?)</q>\s*<a class="source" href="([^"]+)">message #(\d+)</a>', page, re.S
    )
    assert len(facts) == len(summary.facts)
    carried = 0
    for quote, href, n in facts:
        href = unescape(href)
        if href.startswith("/runs/"):
            continue  # the run's tail: shown on the run diff
        anchor, _ = original_at(as_viewer, href)  # the page has the message the link names
        target = Archive.objects.get(pk=int(href.split("/")[2]))
        carried += target.pk != archive.pk
        index = int(anchor.removeprefix("a-"))
        assert history_index_of(target, index) == int(n), (quote, href)
        original = Message.load([target.message_keys[index - target.start]])[0]
        full = " ".join(mask_unless_revealed(searchable_text(original)).split()).replace('\\"', '"')
        if not full.startswith(("(duplicate result", "[pruned]")):  # pruned by the first run: the text is gone
            assert " ".join(unescape(quote).split())[:30] in full, (quote, href)
    assert carried, "no fact of the second summary links to the first archive"


def test_the_drift_case_page_links_references_too(as_reviewer, twice):
    _, second = twice
    archive = Archive.objects.get(run=second)
    summary = archive.summaries.get(status=Summary.Status.ACTIVE)
    case = DriftCase.objects.create(session=archive.session, summary=summary, severity="high", findings=[])
    page = html_of(as_reviewer.get(f"/drift/{case.pk}/"))
    text = page.split('aria-label="Summary text">', 1)[1].split("</article>", 1)[0]
    assert LINK.findall(text) and not BARE.findall(LINK.sub("", text))


# --------------------------------------------------------------------------- the run diff


def test_the_run_diff_shows_the_archived_originals_beside_the_summary_with_links_in_the_page(as_viewer, twice):
    _, second = twice
    archive = Archive.objects.get(run=second)
    page = html_of(as_viewer.get(f"/runs/{second.pk}/"))

    block = page.split('class="darchive', 1)[1].split('<div class="dfold', 1)[0]
    count = archive.end - archive.start
    assert f"Show the {count} archived originals beside the summary" in block
    for index in range(archive.start, archive.end):
        assert f'id="orig-{index}"' in block
    summary_text = block.split('aria-label="Summary text">', 1)[1].split("</div>", 1)[0]
    links = LINK.findall(summary_text)
    assert links and not BARE.findall(LINK.sub("", summary_text))
    in_page = [(h, n) for h, n in links if h.startswith("#")]
    away = [(unescape(h), n) for h, n in links if not h.startswith("#")]
    assert in_page and away  # this archive's originals in the page, the carried ones on the first archive's page
    for href, n in in_page:
        index = int(href.removeprefix("#orig-"))
        assert f'id="{href[1:]}"' in block
        assert history_index_of(archive, index) == int(n)
    for href, _n in away:
        assert href.startswith("/archives/") and int(href.split("/")[2]) != archive.pk


def test_archived_originals_in_the_run_diff_are_masked(as_viewer, db):
    from console.services.sessions import ImportedSession, create_session
    from tests.console.factories import SECRET

    session = sample_session()
    messages = Message.load(session.keys())
    messages[6] = {"role": "user", "content": f"use the key {SECRET} for the export, then #2 again"}
    masked = create_session(ImportedSession(key="masked-diff", messages=messages, metadata={}))
    run = compress_now(masked)
    archive = Archive.objects.get(run=run)
    assert archive.start <= 6 < archive.end
    page = html_of(as_viewer.get(f"/runs/{run.pk}/"))
    assert 'id="orig-6"' in page and "use the key" in page
    assert SECRET not in page and SECRET[:12] not in page


def test_the_compare_page_links_references_of_both_versions(as_viewer, twice):
    from console.services.summaries import execute_resummarize, request_resummarize

    _, second = twice
    archive = Archive.objects.get(run=second)
    draft = request_resummarize(archive.pk, summarizer="extractive", user=None)
    assert execute_resummarize(draft.pk) == Summary.Status.DRAFT
    page = html_of(as_viewer.get(f"/archives/{archive.pk}/compare"))
    assert len(LINK.findall(page)) >= 10
