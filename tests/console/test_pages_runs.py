"""The run page (runs/<pk>/) and its diff (runs/<pk>/diff): who may see them, what they show, how fast."""

from __future__ import annotations

import re
from typing import Any

import pytest
from django.db import connection
from django.test import Client
from django.test.utils import CaptureQueriesContext
from django.urls import reverse
from django.utils import timezone

from agent_compression import ExtractiveSummarizer
from console.masking import mask_text
from console.models import Archive, AuditEvent, CompressionRun, Message, Session, Summary
from console.services import runs
from console.services.sessions import ImportedSession, create_session
from tests.compression.builders import FakeSummarizer, assistant, call, calls, result, system, user
from tests.compression.builders import session as coding_session

from .conftest import compress_now, sample_session, superuser_client

pytestmark = pytest.mark.django_db

Status = CompressionRun.Status
SECRET = "sk-proj-Zx9Wv8Ut7Sr6Qp5On4Ml3Kj2"
#: a small tail and almost no pruning protection: the crafted session's last tool call keeps its place in the
#: tail with its long arguments shortened, and the result after it is pruned
CRAFTED_CONFIG = {"context_window_tokens": 4000, "tail_tokens": 700, "prune_protect_tokens": 50}


def crafted_messages() -> list[dict[str, Any]]:
    """A coding session whose last write carries a secret and HTML in long arguments, and a script in its result."""
    messages = [system(), user("Fix the nightly export. Do not touch infra/terraform.")]
    for t in range(6):
        messages += [
            user(f"step {t}"),
            calls(call(f"c{t}", "read_file", path=f"src/m{t}.py")),
            result(f"c{t}", "line of code\n" * 400, "read_file"),
            assistant(f"m{t} ok"),
        ]
    # near the end: the shortened argument keeps its head and tail, and the diff shows what borders the cut
    content = "payload line\n" * 300 + f"<img src=x onerror=alert(1)> key={SECRET} " + "z" * 200
    messages += [
        user("write the fix"),
        calls(call("w1", "write_file", path="jobs/export.py", content=content)),
        result("w1", "<script>alert('pwned')</script>\n" + "wrote 1 file\n" * 200, "write_file"),
        assistant("done"),
        user("now run the tests <b>please</b>"),
    ]
    return messages


def crafted_run(key: str = "test:crafted") -> CompressionRun:
    session = create_session(ImportedSession(key=key, messages=crafted_messages(), metadata={}))
    run = compress_now(session, config=CRAFTED_CONFIG)
    assert run.status == Status.SUCCEEDED, run.error
    return run


def url(run: CompressionRun, name: str = "run", **params: Any) -> str:
    query = "&".join(f"{k}={v}" for k, v in params.items())
    return reverse(name, args=[run.pk]) + (f"?{query}" if query else "")


def fake_run(session: Session, status: str, **fields: Any) -> CompressionRun:
    now = timezone.now()
    defaults: dict[str, Any] = {"trigger": CompressionRun.Trigger.MANUAL, "status": status}
    if status not in CompressionRun.ACTIVE:
        defaults |= {"started_at": now, "finished_at": now, "attempts": 1, "worker": "worker-7"}
    return CompressionRun.objects.create(session=session, **(defaults | fields))


# --------------------------------------------------------------------------- access


@pytest.mark.parametrize("name", ["run", "run_diff"])
def test_it_shows_the_run_and_its_diff_to_a_viewer(compressed_run, as_viewer, name):
    response = as_viewer.get(url(compressed_run, name))
    assert response.status_code == 200
    assert b'id="diff"' in response.content


@pytest.mark.parametrize("name", ["run", "run_diff"])
def test_it_refuses_a_user_without_a_role(compressed_run, login, name):
    assert login("").get(url(compressed_run, name)).status_code == 403


@pytest.mark.parametrize("name", ["run", "run_diff"])
def test_it_sends_anonymous_visitors_to_the_login_page(compressed_run, client, name):
    response = client.get(url(compressed_run, name))
    assert response.status_code == 302 and response["Location"].startswith(reverse("login"))


def test_it_answers_404_for_a_run_that_does_not_exist(as_viewer):
    assert as_viewer.get(reverse("run", args=[999_999])).status_code == 404


def test_it_refuses_post(compressed_run, as_operator):
    assert as_operator.post(url(compressed_run)).status_code == 405


# --------------------------------------------------------------------------- the page


def test_it_shows_what_the_run_did(compressed_run, as_viewer):
    run = compressed_run
    archive = Archive.objects.get(run=run)
    summary = Summary.objects.get(run=run)
    html = as_viewer.get(url(run)).content.decode()
    assert "<html" in html and 'class="badge status-badge ok"' in html and "succeeded" in html
    assert reverse("session", args=[run.session.pk]) in html
    assert reverse("archive", args=[archive.pk]) in html and reverse("summary", args=[summary.pk]) in html
    assert "<dt>Trigger</dt><dd>API</dd>" in html and "<dt>Attempts</dt><dd>1</dd>" in html
    # stages with their times, tokens saved, the head / middle / tail bars
    for stage in ("prune", "boundaries", "archive", "summarize", "assemble", "validate"):
        assert f'<span class="muted mono">{stage}</span>' in html
    assert f'<span class="num">{run.tokens_before:,}</span> → <span class="num">{run.tokens_after:,}</span>' in html
    saved = 100 * (run.tokens_before - run.tokens_after) / run.tokens_before
    assert f"saved ({saved:.1f}%)" in html
    assert 'class="seg seg-head"' in html and 'class="seg seg-middle"' in html and 'class="seg seg-tail"' in html
    # token sizes of head / middle / tail come from the database in one query; they add up to the message rows'
    tokens = dict(Message.objects.filter(sha256__in=run.input_keys).values_list("sha256", "tokens"))
    head, tail = run.boundaries["head_end"], run.boundaries["tail_start"]
    for name, keys in (("head", run.input_keys[:head]), ("middle", run.input_keys[head:tail])):
        legend = (
            f'<span class="seg-key seg-{name}"><i></i>{name} <span class="num">{sum(tokens[k] for k in keys):,}</span>'
        )
        assert legend in html
    # every pruned item is listed, linked to its diff row
    for item in run.pruned:
        assert f'href="#in-{item["index"]}"' in html


def test_it_shows_pruned_archived_and_inserted_rows_of_the_coding_sample(compressed_run, as_viewer):
    run = compressed_run
    archive = Archive.objects.get(run=run)
    html = as_viewer.get(url(run)).content.decode()
    first_pruned = run.pruned[0]["index"]
    row = re.search(rf'<div class="drow kind-pruned[^"]*" id="in-{first_pruned}" data-nav>', html)
    assert row, "the pruned row is shown with its anchor and data-nav"
    assert "[pruned] terminal: ran command" in html
    assert "(duplicate result, see latest)" in html  # the sample's deduplicated result
    assert f'class="darchive" id="in-{archive.start}" data-nav' in html
    assert "[CONTEXT SUMMARY]" in html and '<span class="muted">summary</span> <span class="mono muted">out' in html
    assert html.count('class="drow kind-pruned') == len(run.pruned)


def test_it_serves_only_the_diff_to_htmx(compressed_run, as_viewer):
    response = as_viewer.get(url(compressed_run), headers={"HX-Request": "true"})
    html = response.content.decode()
    assert response.status_code == 200 and "HX-Request" in response["Vary"]
    assert html.lstrip().startswith('<section id="diff"') and "<html" not in html and "Stages" not in html
    alone = as_viewer.get(url(compressed_run, "run_diff"), headers={"HX-Request": "true"}).content.decode()
    assert alone.lstrip().startswith('<section id="diff"') and "<html" not in alone


def test_it_shows_the_diff_side_by_side_or_unified(as_viewer):
    run = crafted_run()
    side = as_viewer.get(url(run)).content.decode()
    unified = as_viewer.get(url(run, view="unified")).content.decode()
    assert 'class="diff diff-side"' in side and 'class="dcols"' in side
    assert 'class="diff diff-unified"' in unified and 'class="dunified"' in unified
    assert 'class="dcols"' not in unified.split('id="diff"')[1].split("darchive")[0]
    # the toggles: links with hx-get and hx-push-url, the current one marked
    assert re.search(r'href="[^"]*\?view=unified" hx-get="[^"]*\?view=unified"[^>]*hx-push-url="true"', side)
    assert re.search(r'\?view=side"[^>]*aria-current="true"', side)
    assert re.search(r'\?view=unified"[^>]*aria-current="true"', unified)
    # the shortened arguments are diffed word by word: deleted on the left, inserted on the right, both in unified
    truncated = next(p["index"] for p in run.pruned if p["kind"] == "args_truncated")
    side_row = side.split(f'id="in-{truncated}"')[1].split('<div class="drow')[0]
    assert '<del class="diff">' in side_row and '<ins class="diff">' in side_row
    assert side_row.index("<del") < side_row.index('class="dside new"') < side_row.index("<ins")
    unified_row = unified.split(f'id="in-{truncated}"')[1].split('<div class="drow')[0]
    assert '<del class="diff">' in unified_row and '<ins class="diff">' in unified_row
    assert "chars omitted" in unified_row


def test_it_escapes_html_from_messages_in_every_part_of_the_diff(as_viewer):
    run = crafted_run()
    for params in ({}, {"view": "unified"}):
        html = as_viewer.get(url(run, **params)).content.decode()
        assert "<script>alert" not in html and "<img src=x" not in html and "<b>please</b>" not in html
        assert "&lt;script&gt;alert(&#x27;pwned&#x27;)&lt;/script&gt;" in html  # the pruned result's original
        assert "&lt;img src=x onerror=alert(1)&gt;" in html  # inside the word diff of the arguments
        assert "&lt;b&gt;please&lt;/b&gt;" in html


def test_it_masks_a_secret_the_same_way_on_both_sides(as_viewer):
    run = crafted_run()
    placeholder = mask_text(f"key={SECRET}").removeprefix("key=")
    html = as_viewer.get(url(run)).content.decode()
    assert SECRET not in html
    truncated = next(p["index"] for p in run.pruned if p["kind"] == "args_truncated")
    row = html.split(f'id="in-{truncated}"')[1].split('<div class="drow')[0]
    old, new = row.split('class="dside new"')
    assert placeholder in old and placeholder in new
    assert "Reveal secrets" not in html  # a viewer may not


def test_it_reveals_secrets_only_to_those_allowed_and_records_it(as_viewer):
    run = crafted_run()
    assert as_viewer.get(url(run, reveal=1)).status_code == 403
    assert as_viewer.get(url(run, "run_diff", reveal=1)).status_code == 403
    root = superuser_client()
    masked = root.get(url(run)).content.decode()
    assert "Reveal secrets" in masked and SECRET not in masked
    revealed = root.get(url(run, reveal=1)).content.decode()
    assert SECRET in revealed and "Mask secrets" in revealed
    assert AuditEvent.objects.filter(action="secrets.reveal", object_id=str(run.pk)).exists()
    # switching the layout keeps revealing (and is audited again), the diff alone too
    assert "?view=unified&amp;reveal=1" in revealed
    assert SECRET in root.get(url(run, "run_diff", reveal=1), headers={"HX-Request": "true"}).content.decode()


def test_it_opens_a_collapsed_stretch_on_demand(as_viewer):
    session = sample_session(last_consolidated=20)
    run = compress_now(session)
    html = as_viewer.get(url(run)).content.decode()
    fold = re.search(
        r'<div class="dfold dfold-same" id="(fold-\d+)">\s*<a class="dfold-button" href="([^"]+)" '
        r'hx-get="([^"]+)" hx-target="#(fold-\d+)" hx-swap="outerHTML">\s*Show (\d+) unchanged',
        html,
    )
    assert fold, "a long unchanged head is collapsed"
    assert 'id="in-5"' not in html
    count = int(fold.group(5))
    expanded = as_viewer.get(fold.group(3).replace("&amp;", "&"), headers={"HX-Request": "true"}).content.decode()
    assert "<html" not in expanded and expanded.count('class="drow kind-kept"') == count
    assert 'id="in-5"' in expanded and 'id="out-5"' in expanded
    # without JavaScript the same button opens the page at that stretch
    page = as_viewer.get(fold.group(2).replace("&amp;", "&").split("#")[0]).content.decode()
    assert 'id="in-5"' in page and "<html" in page
    # the standalone (no htmx) range page works too
    assert 'id="in-5"' in as_viewer.get(fold.group(3).replace("&amp;", "&")).content.decode()


def test_it_opens_the_stretch_a_deep_link_points_into(as_viewer):
    run = compress_now(sample_session(last_consolidated=20))
    assert 'id="in-7"' not in as_viewer.get(url(run)).content.decode()
    html = as_viewer.get(url(run, at="in-7")).content.decode()
    assert re.search(r'class="drow kind-kept targeted" id="in-7"', html)
    out = as_viewer.get(url(run, at="out-7")).content.decode()
    assert 'id="out-7"' in out


def test_it_points_a_deep_link_into_the_archive_at_the_archive_page(compressed_run, as_viewer):
    archive = Archive.objects.get(run=compressed_run)
    inside = archive.start + 2
    html = as_viewer.get(url(compressed_run, at=f"in-{inside}")).content.decode()
    assert f'<span id="in-{inside}" class="alias">' in html
    assert f"{reverse('archive', args=[archive.pk])}?at={inside}#a-{inside}" in html


def test_it_links_the_neighbouring_runs_of_the_session(as_viewer):
    session = sample_session()
    first = compress_now(session)
    second = compress_now(session)
    third = compress_now(session)
    html = as_viewer.get(url(second)).content.decode()
    assert f'rel="prev" href="{reverse("run", args=[first.pk])}"' in html
    assert f'rel="next" href="{reverse("run", args=[third.pk])}"' in html
    assert 'rel="prev"' not in as_viewer.get(url(first)).content.decode()


# --------------------------------------------------------------------------- runs that did not (quite) work


def test_it_explains_a_failed_run(as_viewer, as_operator):
    session = sample_session()
    run = fake_run(session, Status.FAILED, error="LookupError: 3 stored messages are missing <b>x</b>")
    html = as_viewer.get(url(run)).content.decode()
    assert 'class="badge status-badge danger"' in html
    assert "Nothing in the session was changed; check the worker log, then compress again." in html
    assert "LookupError: 3 stored messages are missing &lt;b&gt;x&lt;/b&gt;" in html
    assert "This run produced no output" in html
    assert "Compress again" not in html  # a viewer cannot
    assert f'action="{reverse("compress", args=[session.pk])}"' in as_operator.get(url(run)).content.decode()


def test_it_explains_a_conflict(as_viewer):
    session = sample_session()
    keys = session.keys()
    run = fake_run(
        session, Status.CONFLICT, error="the session changed while the run worked", input_keys=keys, output_keys=keys
    )
    html = as_viewer.get(url(run)).content.decode()
    assert "The session changed while compressing; nothing was changed." in html
    assert "the session changed while the run worked" in html
    assert "The diff below shows what this run would have written." in html and 'id="diff"' in html


def test_it_explains_a_degraded_run_and_points_to_the_archive(as_viewer, monkeypatch):
    monkeypatch.setattr(runs, "build_summarizer", lambda: FakeSummarizer(fail=True))
    run = compress_now(sample_session())
    assert run.status == Status.DEGRADED
    archive = Archive.objects.get(run=run)
    html = as_viewer.get(url(run)).content.decode()
    assert 'class="badge status-badge warn"' in html and "The summarizer failed." in html
    assert "HTTP 500" in html  # the summary_failed warning's text
    assert f'href="{reverse("archive", args=[archive.pk])}">Open the archive to re-summarize it' in html
    assert "Summary unavailable: the summarizer failed" in html  # the summary message says so


def test_it_polls_a_queued_run(as_viewer):
    run = fake_run(sample_session(), Status.QUEUED)
    html = as_viewer.get(url(run)).content.decode()
    assert f'hx-get="{reverse("run_progress", args=[run.pk])}' in html and 'hx-trigger="every 1s"' in html
    assert '<meta http-equiv="refresh" content="2">' in html
    assert "The diff appears here when the run has finished." in html


def test_it_says_when_nothing_was_compressed(as_viewer):
    session = create_session(
        ImportedSession(key="test:tiny", messages=[user("hello"), assistant("hi"), user("bye")], metadata={})
    )
    run = compress_now(session)
    assert run.status == Status.NOTHING and not run.was_compressed  # it saved nothing: not a success
    html = as_viewer.get(url(run)).content.decode()
    assert "Nothing to compress.</strong> No middle segment.</p>" in html
    assert "nothing to compress: no middle segment" in html  # the warning, in the warnings list
    assert 'class="badge status-badge neutral">nothing to compress<' in html
    assert "3 unchanged" in html and 'class="drow kind-kept"' in html


def test_it_renders_a_reported_run_without_stages(as_viewer):
    messages = coding_session(4)
    from console.services.reported import record_reported_run

    out = messages[:2] + [user("[CONTEXT SUMMARY] id=sum_rep model=- \n\nwhat happened")] + messages[-3:]
    run = record_reported_run(session_key="test:reported", input_messages=messages, output_messages=out)
    html = as_viewer.get(url(run)).content.decode()
    assert "reported" in html and 'id="diff"' in html and "Stages" not in html


# --------------------------------------------------------------------------- cost


def page_queries(client: Client, run: CompressionRun) -> int:
    client.get(url(run))  # warm caches (content types, permissions) the same way for both
    with CaptureQueriesContext(connection) as captured:
        assert client.get(url(run)).status_code == 200
    return len(captured)


def test_it_costs_the_same_queries_for_a_small_and_a_big_run(monkeypatch):
    monkeypatch.setattr(runs, "build_summarizer", lambda: ExtractiveSummarizer())
    small = compress_now(create_session(ImportedSession(key="test:small", messages=coding_session(12), metadata={})))
    big = compress_now(create_session(ImportedSession(key="test:big", messages=coding_session(300), metadata={})))
    assert len(big.input_keys) > 10 * len(small.input_keys)
    assert Archive.objects.filter(run__in=[small, big]).count() == 2
    client = superuser_client()
    assert page_queries(client, small) == page_queries(client, big)
    for params in ({"view": "unified"}, {"from": 0, "to": 40}):
        with CaptureQueriesContext(connection) as one:
            client.get(url(small, "run_diff", **params), headers={"HX-Request": "true"})
        with CaptureQueriesContext(connection) as other:
            client.get(url(big, "run_diff", **params), headers={"HX-Request": "true"})
        assert len(one) == len(other)


def test_it_never_renders_thousands_of_rows(as_viewer):
    messages = [system(), user("start")]
    for t in range(600):
        messages += [
            calls(call(f"c{t}", "read_file", path=f"f{t}")),
            result(f"c{t}", f"content {t}\n" * 60, "read_file"),
        ]
    messages.append(user("go on"))
    session = create_session(ImportedSession(key="test:long", messages=messages, metadata={}))
    run = compress_now(session, config={"context_window_tokens": 200_000, "prune_protect_tokens": 100})
    assert len(run.pruned) > 200
    html = as_viewer.get(url(run)).content.decode()
    assert html.count('<div class="drow') <= 100
    assert 'class="dfold dfold-more"' in html


def test_it_loads_the_rest_of_a_long_message_in_the_diff(compressed_run, as_viewer):
    html = as_viewer.get(url(compressed_run)).content.decode()
    more = re.search(r'hx-get="(/messages/[0-9a-f]{64}/\?anchor=c-in-\d+)"', html)
    assert more, "long messages in diff rows are previewed with a 'show the rest' link"
    body = as_viewer.get(more.group(1), headers={"HX-Request": "true"})
    assert body.status_code == 200 and 'id="body-c-in-' in body.content.decode()


def test_it_ignores_parameters_it_does_not_understand(compressed_run, as_viewer):
    html = as_viewer.get(url(compressed_run, view="bogus", at="in-x")).content.decode()
    assert 'class="diff diff-side"' in html
    odd = as_viewer.get(url(compressed_run, "run_diff", **{"from": "a", "to": "9"}), headers={"HX-Request": "true"})
    assert odd.status_code == 200 and 'id="diff"' in odd.content.decode()


def test_a_run_still_over_the_trigger_is_degraded_and_says_why(as_viewer):
    history = [system(), user("spec " * 4_000), *coding_session(20)[2:]]  # the first request alone is over it
    session = create_session(ImportedSession(key="test:huge-spec", messages=history, metadata={}))
    run = compress_now(session)
    assert run.status == Status.DEGRADED and run.was_compressed
    html = as_viewer.get(url(run)).content.decode()
    assert "The compressed history is still over the trigger." in html and "The summarizer failed." not in html
