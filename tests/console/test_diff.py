"""The run diff: aligning a run's input and output key lists, grouping rows for display, inline diffs.

Synthetic key lists pin each kind down; the library's own pipeline (on messy generated histories)
and real compressions of the samples check the invariants: every input and every output index
appears exactly once, in order, and each row's kind matches what the run recorded.
"""

from __future__ import annotations

import random
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from agent_compression import CompressionConfig, CompressionResult, Compressor
from agent_compression.messages import content_text, message_sha256
from agent_compression.prune import DUPLICATE_NOTE
from agent_compression.summary_message import ACKNOWLEDGEMENT, BRIDGE, is_summary_message
from agent_compression.validate import LOST_RESULT
from console.diff import history
from console.diff.history import (
    ACKNOWLEDGEMENT_KEY,
    BRIDGE_KEY,
    Row,
    align,
    count_kinds,
    expand_rows,
    find_row,
    group_rows,
    lost_result_key,
)
from console.diff.words import inline_diff
from console.masking import mask_text
from console.models import Archive, Message
from tests.compression.builders import FakeSummarizer, session
from tests.compression.test_properties import HISTORY, PIPELINE_SETTINGS

from .conftest import compress_now, sample_session


def keys(prefix: str, n: int) -> list[str]:
    return [f"{prefix}{i:05d}" for i in range(n)]


def assert_complete(rows: list[Row], n: int, m: int) -> None:
    """Every input index and every output index exactly once, each side in increasing order."""
    ins = [r.in_index for r in rows if r.in_index is not None]
    outs = [r.out_index for r in rows if r.out_index is not None]
    assert ins == list(range(n))
    assert outs == list(range(m))
    assert all(r.in_index is not None or r.out_index is not None for r in rows)


def pruned_items(indexes: Any) -> list[dict[str, Any]]:
    return [{"index": i, "kind": "pruned", "tool": "t", "tokens_before": 9, "tokens_after": 1} for i in indexes]


def kinds(rows: list[Row]) -> list[str]:
    return [r.kind for r in rows]


# --------------------------------------------------------------------------- synthetic key lists


def test_it_keeps_every_row_of_an_unchanged_history():
    history = keys("k", 50)
    rows = align(history, list(history))
    assert_complete(rows, 50, 50)
    assert set(kinds(rows)) == {"kept"}
    assert all(r.in_key == r.out_key == history[r.in_index] for r in rows)  # type: ignore[index]


def test_it_pairs_the_archived_range_with_the_summary_bridge_and_acknowledgement():
    history = keys("k", 20)
    output = history[:3] + [BRIDGE_KEY, "summary", ACKNOWLEDGEMENT_KEY] + history[12:]
    rows = align(history, output, archive_range=(3, 12))
    assert_complete(rows, 20, len(output))
    assert kinds(rows)[:3] == ["kept"] * 3
    assert [(r.kind, r.note) for r in rows[3:4]] == [("inserted", {"inserted": "bridge"})]
    assert kinds(rows[4:13]) == ["archived"] * 9
    assert [r.in_index for r in rows[4:13]] == list(range(3, 12))
    assert (rows[13].kind, rows[13].out_index, rows[13].note) == ("inserted", 4, {"inserted": "summary"})
    assert (rows[14].kind, rows[14].note) == ("inserted", {"inserted": "acknowledgement"})
    assert set(kinds(rows[15:])) == {"kept"}


def test_it_marks_pruned_deduplicated_and_shortened_messages_as_changed_pairs():
    history = keys("k", 12)
    output = history[:3] + ["summary"] + history[6:]
    output[output.index("k00007")] = "described"
    output[output.index("k00009")] = "duplicate-note"
    output[output.index("k00010")] = "short-args"
    pruned = [
        {"index": 7, "kind": "pruned", "tool": "terminal", "tokens_before": 900, "tokens_after": 30},
        {"index": 9, "kind": "deduplicated", "tool": "terminal", "tokens_before": 900, "tokens_after": 8},
        {"index": 10, "kind": "args_truncated", "tool": "assistant", "tokens_before": 700, "tokens_after": 90},
    ]
    rows = align(history, output, archive_range=(3, 6), pruned=pruned)
    assert_complete(rows, 12, len(output))
    by_in = {r.in_index: r for r in rows if r.in_index is not None}
    assert (by_in[7].kind, by_in[7].out_key, by_in[7].note["tool"]) == ("pruned", "described", "terminal")  # type: ignore[index]
    assert (by_in[9].kind, by_in[9].note["kind"]) == ("pruned", "deduplicated")  # type: ignore[index]
    assert (by_in[10].kind, by_in[10].out_key) == ("truncated", "short-args")
    assert by_in[8].kind == by_in[11].kind == "kept"
    assert count_kinds(rows)["archived"] == 3


def test_it_explains_what_the_validator_dropped_patched_fixed_and_moved():
    # input: 0 1 2 | 3 4 (archived) | 5 6 7 8 9 ; validator saw head(3) + summary + ack + tail(5) = 10 messages
    history = keys("k", 10)
    repair = {
        "dropped": [{"index": 5, "reason": "orphan tool result"}],  # assembled 5 = input 5
        "fixed": [{"index": 7, "changes": ["null content set to empty string"]}],  # assembled 7 = input 7
        "moved": [{"index": 9, "to_follow": 8}],
        "patched": ["call_x"],
        "merged": [],
        "inserted": [],
    }
    lost = lost_result_key("call_x")
    output = history[:3] + ["summary", ACKNOWLEDGEMENT_KEY] + ["k00006", "k00007-fixed", "k00009", "k00008", lost]
    rows = align(history, output, archive_range=(3, 5), repair=repair)
    assert_complete(rows, 10, len(output))
    by_in = {r.in_index: r for r in rows if r.in_index is not None and r.out_index is None}
    assert (by_in[5].kind, by_in[5].note) == ("removed", {"reason": "orphan tool result"})
    fixed = next(r for r in rows if r.in_index == 7)
    assert (fixed.kind, fixed.out_key, fixed.note) == (
        "patched",
        "k00007-fixed",
        {"changes": ["null content set to empty string"]},
    )
    patched = next(r for r in rows if r.out_key == lost)
    assert (patched.kind, patched.in_index, patched.note) == ("patched", None, {"lost_result": "call_x"})
    moved = [r for r in rows if r.kind == "moved"]
    assert len(moved) == 2 and {r.in_key or r.out_key for r in moved} in ({"k00008"}, {"k00009"})


def test_it_treats_an_empty_output_as_every_message_removed():
    rows = align(keys("k", 5), [])
    assert_complete(rows, 5, 0)
    assert set(kinds(rows)) == {"removed"}


def test_it_marks_unexplained_differences_of_a_reported_run_as_changed():
    history = keys("k", 8)
    output = history[:2] + ["summary"] + history[5:]
    output[-1] = "rewritten"
    rows = align(history, output, archive_range=(2, 5))
    assert_complete(rows, 8, len(output))
    assert rows[-1].kind == "changed" and rows[-1].in_index == 7 and rows[-1].out_key == "rewritten"
    assert [r.note for r in rows if r.kind == "inserted"] == [{"inserted": "summary"}]


def test_it_finds_the_summary_without_bridge_or_acknowledgement_and_handles_an_empty_head():
    history = keys("k", 6)
    output = ["summary", "k00004", "k00005"]
    rows = align(history, output, archive_range=(0, 4))
    assert_complete(rows, 6, 3)
    assert kinds(rows) == ["archived"] * 4 + ["inserted", "kept", "kept"]


def test_it_aligns_repeated_messages_to_their_own_copies():
    # "继续" (the same key) all over a long history: each copy must pair with its own, not a neighbour's
    rng = random.Random(3)
    history = [("again" if rng.random() < 0.2 else f"k{i:05d}") for i in range(5000)]
    pruned_at = sorted(rng.sample([i for i, k in enumerate(history) if k != "again" and i > 3000], 400))
    output = history[:3] + ["summary", ACKNOWLEDGEMENT_KEY] + history[2500:]
    for i in pruned_at:
        output[i - 2500 + 5] = f"pruned-{i}"
    pruned = pruned_items(pruned_at)
    rows = align(history, output, archive_range=(3, 2500), pruned=pruned)
    assert_complete(rows, 5000, len(output))
    tail = [r for r in rows if r.in_index is not None and r.in_index >= 2500]
    assert all(r.out_index == r.in_index - 2500 + 5 for r in tail)  # type: ignore[operator]
    assert {r.in_index for r in rows if r.kind == "pruned"} == set(pruned_at)
    assert count_kinds(rows)["kept"] == 3 + 2500 - 400


def test_it_aligns_5000_messages_with_scattered_changes_exactly():
    rng = random.Random(7)
    history = keys("k", 5000)
    output: list[str] = []
    truth: dict[int, str] = {}
    for i, key in enumerate(history):
        roll = rng.random()
        if roll < 0.1:
            output.append(f"new-{i}")
            truth[i] = "pruned"
        elif roll < 0.12:
            truth[i] = "removed"  # dropped, nothing in its place
        else:
            output.append(key)
            truth[i] = "kept"
    pruned = [
        {"index": i, "kind": "pruned", "tool": "t", "tokens_before": 9, "tokens_after": 1}
        for i, k in truth.items()
        if k == "pruned"
    ]
    dropped = [i for i, k in truth.items() if k == "removed"]
    rows = align(
        history, output, pruned=pruned, repair={"dropped": [{"index": i, "reason": "orphan"} for i in dropped]}
    )
    assert_complete(rows, 5000, len(output))
    assert {r.in_index: r.kind for r in rows if r.in_index is not None} == truth


def test_it_survives_a_validator_report_it_cannot_map():
    history = keys("k", 6)
    output = history[:2] + ["summary"] + history[4:]
    report = {"dropped": [{"index": 40, "reason": "x"}], "patched": ["a", "b", "c", "d", "e"]}
    rows = align(history, output, archive_range=(2, 4), repair=report)
    assert_complete(rows, 6, len(output))


# --------------------------------------------------------------------------- the library's own output


def history_keys(messages: list[dict[str, Any]]) -> list[str]:
    return [message_sha256(m) for m in messages]


def align_result(history: list[dict[str, Any]], result: CompressionResult) -> tuple[list[str], list[str], list[Row]]:
    """The input keys, output keys and alignment of a compression, as the run page aligns a run; checked complete."""
    inp, out = history_keys(history), history_keys(result.messages)
    archive = result.archive if result.was_compressed else None
    rows = align(
        inp,
        out,
        archive_range=(archive.start, archive.end) if archive else None,
        pruned=[p.to_dict() for p in result.pruned],
        repair=result.repair.to_dict() if result.repair else None,
    )
    assert_complete(rows, len(inp), len(out))
    return inp, out, rows


def check_pipeline(history: list[dict[str, Any]], config: CompressionConfig) -> list[Row]:
    result = Compressor(config, FakeSummarizer()).compress(history)
    inp, out, rows = align_result(history, result)
    archive = result.archive if result.was_compressed else None
    for row in rows:
        if row.kind == "kept":
            assert inp[row.in_index] == out[row.out_index]  # type: ignore[index]
        if row.kind in ("pruned", "truncated"):
            assert row.in_index in {p.index for p in result.pruned}
        if row.kind == "patched" and row.note and "lost_result" in row.note:
            assert result.messages[row.out_index]["content"] == LOST_RESULT  # type: ignore[index]
        if row.note and row.note.get("inserted") == "bridge":
            assert result.messages[row.out_index]["content"] == BRIDGE  # type: ignore[index]
        if row.note and row.note.get("inserted") == "acknowledgement":
            assert result.messages[row.out_index]["content"] == ACKNOWLEDGEMENT  # type: ignore[index]
    archived = [r.in_index for r in rows if r.kind == "archived"]
    summaries = [r for r in rows if r.note and r.note.get("inserted") == "summary"]
    if archive is not None:
        assert archived == list(range(archive.start, archive.end))
        assert len(summaries) == 1 and is_summary_message(result.messages[summaries[0].out_index])  # type: ignore[index]
    else:
        assert archived == [] and summaries == []
    pruned_kinds = {r.in_index: r.kind for r in rows if r.in_index is not None}
    for item in result.pruned:
        assert pruned_kinds[item.index] in ("pruned", "truncated", "removed", "moved")
    if inp == out:
        assert set(kinds(rows)) <= {"kept"}
    return rows


@PIPELINE_SETTINGS
@given(HISTORY)
def test_it_accounts_for_every_message_of_any_compression(history: list[Any]) -> None:
    check_pipeline(history, CompressionConfig(context_window_tokens=2_000, protect_head_messages=2))


@PIPELINE_SETTINGS
@given(HISTORY)
def test_it_accounts_for_every_message_even_when_the_strict_profile_merged_some(history: list[Any]) -> None:
    # the console compresses with the openai profile; a runtime may report strict-profile runs
    result = Compressor(CompressionConfig(context_window_tokens=2_000), FakeSummarizer(), profile="strict").compress(
        history
    )
    inp, out, rows = align_result(history, result)
    assert all(inp[r.in_index] == out[r.out_index] for r in rows if r.kind == "kept")  # type: ignore[index]


@pytest.mark.parametrize("turns", [3, 30, 300])
def test_it_aligns_well_formed_sessions_of_any_length(turns):
    rows = check_pipeline(session(turns), CompressionConfig(context_window_tokens=4_000))
    if turns >= 30:
        counts = count_kinds(rows)
        assert counts["archived"] > 0 and counts["inserted"] >= 1


@given(st.lists(st.sampled_from(["a", "b", "c", "d", "e"]), max_size=60), st.randoms(use_true_random=False))
def test_it_accounts_for_every_index_whatever_the_edit(history: list[str], rng: random.Random) -> None:
    output = [k for k in history if rng.random() > 0.2]
    for _ in range(rng.randint(0, 5)):
        output.insert(rng.randint(0, len(output)), rng.choice(["a", "x", "y", BRIDGE_KEY]))
    start = rng.randint(0, len(history))
    end = rng.randint(start, len(history))
    rows = align(history, output, archive_range=(start, end) if end > start else None)
    assert_complete(rows, len(history), len(output))


# --------------------------------------------------------------------------- real compressions of the samples


@pytest.mark.django_db
@pytest.mark.parametrize("name", ["coding_export_job.json", "wechat_wxid_demo01.jsonl"])
def test_it_aligns_real_compressions_of_the_samples(name):
    run = compress_now(sample_session(name))
    archive = Archive.objects.get(run=run)
    rows = align(
        run.input_keys,
        run.output_keys,
        archive_range=(archive.start, archive.end),
        pruned=run.pruned,
        repair=run.repair,
    )
    assert_complete(rows, len(run.input_keys), len(run.output_keys))
    counts = count_kinds(rows)
    assert counts["archived"] == archive.end - archive.start
    assert counts["pruned"] == len(run.pruned) > 0
    assert counts["removed"] == counts["changed"] == 0
    output = dict(Message.objects.filter(sha256__in=run.output_keys).values_list("sha256", "data"))
    summary = next(r for r in rows if r.note and r.note.get("inserted") == "summary")
    assert is_summary_message(output[summary.out_key])  # type: ignore[index]
    for row in rows:
        if row.kind == "pruned":
            text = content_text(output[row.out_key])  # type: ignore[index]
            assert text.startswith("[pruned]") or text.startswith(DUPLICATE_NOTE)


# --------------------------------------------------------------------------- grouping for display


def sample_rows(n_kept: int = 500) -> list[Row]:
    history = keys("k", n_kept + 20)
    output = history[:3] + ["summary"] + history[10:]
    output[-3] = "pruned"
    pruned = [{"index": len(history) - 3, "kind": "pruned", "tool": "t", "tokens_before": 9, "tokens_after": 1}]
    return align(history, output, archive_range=(3, 10), pruned=pruned)


def test_it_collapses_long_unchanged_stretches_and_keeps_the_archive_in_one_block():
    rows = sample_rows()
    blocks = group_rows(rows)
    assert [b.kind for b in blocks] == ["rows", "archive", "same", "rows"]
    assert blocks[0].size == 3  # a short unchanged head is shown as it is
    assert len(blocks[1].archived) == 7 and [r.note for r in blocks[1].inserted] == [{"inserted": "summary"}]
    # the message before a change stays in view; the change and what follows it too
    assert [r.kind for r in blocks[3].rows] == ["kept", "pruned", "kept", "kept"]
    assert sum(b.size for b in blocks) == len(rows)
    assert sum(len(b.shown_rows) for b in blocks) < 15


def every_other_pruned(n: int) -> list[Row]:
    """The rows of a run that pruned every other of ``n`` messages: a change every second row."""
    history = keys("k", n)
    output = [f"p{i}" if i % 2 else k for i, k in enumerate(history)]
    pruned = [
        {"index": i, "kind": "pruned", "tool": "t", "tokens_before": 9, "tokens_after": 1} for i in range(1, n, 2)
    ]
    return align(history, output, pruned=pruned)


def test_it_stops_rendering_past_the_budget_and_leaves_the_rest_for_later():
    rows = every_other_pruned(1000)
    blocks = group_rows(rows, budget=50)
    assert blocks[-1].kind == "more" and blocks[-1].end == len(rows)
    assert sum(len(b.shown_rows) for b in blocks) == 50
    more = expand_rows(rows, blocks[-1].start, blocks[-1].end)
    assert more[0].start == blocks[-1].start and more[-1].kind == "more"


def test_it_opens_the_stretch_a_deep_link_points_into():
    rows = sample_rows(2000)
    target = find_row(rows, "in-1200")
    assert target is not None and rows[target].in_index == 1200
    blocks = group_rows(rows, focus=target)
    shown = {r.in_index for b in blocks for r in b.shown_rows}
    assert 1200 in shown
    assert len(shown) <= history.EXPAND_PAGE + 20
    assert [b.kind for b in blocks].count("same") == 2  # before and after the opened page
    assert sum(b.size for b in blocks) == len(rows)


def test_it_opens_a_deep_link_past_the_budget():
    rows = every_other_pruned(400)
    blocks = group_rows(rows, budget=40, focus=find_row(rows, "out-301"))
    assert 301 in {r.out_index for b in blocks for r in b.shown_rows}
    assert [b.kind for b in blocks].count("more") == 2
    assert sum(b.size for b in blocks) == len(rows)


def test_it_expands_an_unchanged_stretch_one_page_at_a_time():
    rows = align(keys("k", 450), keys("k", 450))
    first = expand_rows(rows, 0, 450)
    assert [(b.kind, b.start, b.end) for b in first] == [("rows", 0, 100), ("same", 100, 450)]
    assert [(b.kind, b.start, b.end) for b in expand_rows(rows, 400, 450)] == [("rows", 400, 450)]


def test_it_finds_rows_by_either_side():
    rows = sample_rows(50)
    assert rows[find_row(rows, "out-3")].note == {"inserted": "summary"}  # type: ignore[index]
    assert rows[find_row(rows, "in-5")].kind == "archived"  # type: ignore[index]
    assert find_row(rows, "in-99999") is None and find_row(rows, "nonsense") is None and find_row(rows, "in-x") is None


# --------------------------------------------------------------------------- inline diffs


def test_it_diffs_a_shortened_argument_by_words_and_skips_what_did_not_change():
    head = "header line with many words " * 20
    old = head + "the long value " * 300 + "tail end"
    new = head + "the long value ...[4000 chars omitted]... tail end"
    spans = inline_diff(old, new)
    assert spans is not None
    ops = [s.op for s in spans]
    assert ops[0] == "skip" and "delete" in ops and "insert" in ops
    assert any(s.op == "insert" and "omitted" in s.text for s in spans)  # type: ignore[union-attr]
    shown = sum(len(s.text) for s in spans if s.op != "skip" and not s.op.startswith("skip"))  # type: ignore[union-attr]
    assert shown < len(old)


def test_it_keeps_the_same_placeholder_for_a_secret_on_both_sides():
    secret = "sk-proj-abcdefghijklmnop1234567890"
    old = mask_text(f"use {secret} to call the API, then run the long job")
    new = mask_text(f"use {secret} to call the API")
    spans = inline_diff(old, new)
    assert spans is not None and secret not in "".join(getattr(s, "text", "") for s in spans)
    equal = "".join(s.text for s in spans if s.op == "equal")  # type: ignore[union-attr]
    assert "[secret:api_key:" in equal


def test_it_diffs_chinese_by_character():
    spans = inline_diff("先不要修改部署脚本。", "先修改部署脚本。")
    assert spans is not None
    assert [s.text for s in spans if s.op == "delete"] == ["不要"]  # type: ignore[union-attr]


def test_it_gives_up_on_texts_too_big_to_diff():
    old = "a " * 100_000
    new = "b " * 100_000
    assert inline_diff(old, new) is None


# --------------------------------------------------------------------------- summaries section by section


def test_section_diff_puts_changed_sections_first_word_by_word():
    from console.diff.sections import section_diff

    a = "intro\n\n## Decisions\n- keep BATCH=5000\n\n## Errors\n- none\n\n## Constraints\n- don't deploy"
    b = "intro\n\n## Decisions\n- keep BATCH=5000\n\n## Errors\n- none\n\n## Constraints\n- deploy now\n\n## Next\n- x"
    sections = section_diff(a, b)
    assert [(s.heading, s.state) for s in sections] == [
        ("## Constraints", "changed"),
        ("## Next", "only_b"),
        ("", "same"),
        ("## Decisions", "same"),
        ("## Errors", "same"),
    ]
    changed = sections[0]
    deleted = "".join(s.text for s in changed.spans if s.op == "delete")
    inserted = "".join(s.text for s in changed.spans if s.op == "insert")
    assert "don't" in deleted and "now" in inserted and "t" not in inserted
    assert "".join(s.text for s in changed.spans if s.op != "insert") == "- don't deploy"
    assert "".join(s.text for s in changed.spans if s.op != "delete") == "- deploy now"
    assert ("## Next", "only_a") in [(s.heading, s.state) for s in section_diff(b, a)]


def test_section_diff_of_long_summaries_differing_in_a_line_is_fast():
    import time

    from console.diff.sections import section_diff

    lines = [f"- step {i}: ran job {i} with BATCH={i * 7} on host-{i % 13}" for i in range(4000)]
    a = "## Progress\n" + "\n".join(lines)
    b = a.replace("ran job 2000 with", "skipped job 2000 with")
    started = time.perf_counter()
    [section] = section_diff(a, b)
    assert time.perf_counter() - started < 1.0  # one SequenceMatcher over every word took seconds
    assert [(s.op, s.text) for s in section.spans if s.op != "equal"] == [("delete", "ran"), ("insert", "skipped")]
