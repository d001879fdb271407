"""The console's vocabulary (console.web.labels): a label for every code the library writes, each in Chinese too."""

from __future__ import annotations

import re
from collections import defaultdict
from typing import Any

import pytest
from django.utils import translation

from agent_compression import CompressionConfig, Compressor
from agent_compression import drift as drift_checks
from agent_compression.facts import FACT_KINDS
from agent_compression.pipeline import STAGES, WARNING_CODES, CompressionWarning, ThrashState
from agent_compression.prune import PruneResult
from console.web import labels
from tests.compression.builders import FakeSummarizer, assistant, session, user

CJK = re.compile(r"[\u3400-\u9fff]")

VOCABULARIES = {
    "STAGES": labels.STAGES,
    "WAITING_STAGES": labels.WAITING_STAGES,
    "STAGE_COUNTS": labels.STAGE_COUNTS,
    "STAGE_COUNTS_NOT_APPLIED": labels.STAGE_COUNTS_NOT_APPLIED,
    "PRUNED_KINDS": labels.PRUNED_KINDS,
    "PRUNED_NOTES": labels.PRUNED_NOTES,
    "REPAIRS": labels.REPAIRS,
    "ROW_KINDS": labels.ROW_KINDS,
    "ROW_KIND_HELP": labels.ROW_KIND_HELP,
    "INSERTED": labels.INSERTED,
    "TRIGGERS": labels.TRIGGERS,
    "WARNINGS": labels.WARNINGS,
    "WARNING_TITLES": labels.WARNING_TITLES,
    "FINDING_KINDS": labels.FINDING_KINDS,
    "SEVERITIES": labels.SEVERITIES,
    "DETAILS": labels.DETAILS,
    "FACT_KINDS": labels.FACT_KINDS,
    "SESSION_STATUSES": labels.SESSION_STATUSES,
    "RUN_STATUSES": labels.RUN_STATUSES,
    "CASE_STATUSES": labels.CASE_STATUSES,
    "CASE_ACTIONS": labels.CASE_ACTIONS,
    "CASE_FIELDS": labels.CASE_FIELDS,
    "OBJECTS": labels.OBJECTS,
    **{f"WARNING_PARAMS[{c}][{p}]": v for c, params in labels.WARNING_PARAMS.items() for p, v in params.items()},
}


def _missing(codes: Any, vocabulary: dict[str, Any]) -> set[str]:
    return set(codes) - set(vocabulary)


def test_every_stage_the_library_reports_has_a_label():
    assert labels.RUN_STAGES[: len(STAGES)] == STAGES  # the library's order, not a copy of it
    assert not _missing(labels.RUN_STAGES, labels.STAGES), _missing(labels.RUN_STAGES, labels.STAGES)


def test_every_warning_code_has_a_sentence():
    assert not _missing(WARNING_CODES, labels.WARNINGS), _missing(WARNING_CODES, labels.WARNINGS)
    assert not _missing(labels.WARNINGS, WARNING_CODES), "a sentence for a code the library no longer writes"


def test_every_drift_kind_detail_code_and_fact_kind_has_a_label():
    assert not _missing(drift_checks.DRIFT_KINDS, labels.FINDING_KINDS), _missing(
        drift_checks.DRIFT_KINDS, labels.FINDING_KINDS
    )
    assert set(labels.DETAILS) == set(drift_checks.REASONS), set(drift_checks.REASONS) ^ set(labels.DETAILS)
    assert set(labels.FACT_KINDS) == set(FACT_KINDS), set(FACT_KINDS) ^ set(labels.FACT_KINDS)


def _runs() -> list[Any]:
    """Real pipeline results along its main paths: summarized, summary failed, over the trigger, pruned only,
    nothing to do, and a second compression of a summarized history."""
    config = CompressionConfig(context_window_tokens=4_000)
    summarized = Compressor(config, FakeSummarizer()).compress(session(30))
    state = ThrashState()
    thrashing = Compressor(config, FakeSummarizer(), thrash_state=state)
    huge_latest = user("please read this: " + "word " * 5_000)
    first = thrashing.compress([*session(10), huge_latest])
    second = thrashing.compress([*first.messages, assistant("ok"), huge_latest])
    return [
        summarized,
        Compressor(config, FakeSummarizer(fail=True)).compress(session(30)),
        first,
        second,
        Compressor(config, FakeSummarizer()).compress([*summarized.messages, *session(30)[2:]]),
        Compressor(CompressionConfig(context_window_tokens=2_000), FakeSummarizer()).compress(session(6)),
        Compressor(config, FakeSummarizer()).compress(session(1, output_chars=50)),
    ]


def test_every_pruned_kind_has_a_label_and_a_note():

    kinds = set(PruneResult(messages=[], items=[], token_counts=[]).counts()) - {"tokens_saved"}
    assert set(labels.PRUNED_KINDS) == kinds == set(labels.PRUNED_NOTES)


def test_every_count_a_stage_records_has_a_label():
    keys = {key for result in _runs() for stage in result.stages for key in stage.counts}
    assert {"tokens_saved", "args_truncated", "previous_summary"} <= keys
    assert not _missing(keys, labels.STAGE_COUNTS), _missing(keys, labels.STAGE_COUNTS)


def test_warnings_the_pipeline_writes_read_as_its_own_english_sentence():
    warnings = [w for result in _runs() for w in result.warnings]
    assert len({w.code for w in warnings}) >= 5, [w.code for w in warnings]
    with translation.override("en"):
        for w in warnings:
            # the params alone make the sentence (the English message is not needed)
            text = labels.warning_text({**w.to_dict(), "message": ""})
            assert text, w
            if w.code != "no_token_savings":  # pruning alone words it differently
                assert text == w.message, (w.code, text, w.message)


def test_a_warning_is_translated_from_its_params_and_falls_back_to_its_message():
    failed = CompressionWarning(
        "summary_failed", "summarizer x failed (boom); 3 messages archived without a summary", {"generator": "x"}
    ).to_dict()
    failed["params"] |= {"error": "boom", "archived": 3}
    with translation.override("zh-hans"):
        text = labels.warning_text(failed)
        assert CJK.search(text) and "boom" in text and "3" in text
        # stored before warnings had params, or missing one: the English message
        assert labels.warning_text({"code": "summary_failed", "message": "old words"}) == "old words"
        assert labels.warning_text({**failed, "params": {"generator": "x"}}) == failed["message"]
        # the console's own warnings carry no sentence: their message
        assert labels.warning_text({"code": "worker_lost", "message": "attempt 1 stopped"}) == "attempt 1 stopped"
        # a parameter that is a code is translated too
        nothing = {"code": "nothing_to_compress", "message": "m", "params": {"reason": "no_middle"}}
        assert CJK.search(labels.warning_text(nothing))
        # a sentence without parameters needs none, even from a run stored before params
        assert CJK.search(labels.warning_text({"code": "input_repaired", "message": "m"}))


def test_a_finding_detail_is_translated_by_code_or_by_its_stored_english():
    code = "hedge_dropped"
    english = drift_checks.REASONS[code]
    with translation.override("zh-hans"):
        by_code = str(labels.detail_label({"code": code, "detail": english}))
        assert CJK.search(by_code)
        assert str(labels.detail_label({"detail": english})) == by_code  # stored before findings had codes
        assert labels.detail_label({"detail": "my own note", "manual": True}) == "my own note"


def _render(label: Any) -> str:
    """A label as a page shows it: sentences with parameters (a plural needs its number) filled in."""
    return str(label % defaultdict(lambda: 1))


@pytest.mark.parametrize("name", sorted(VOCABULARIES))
def test_every_label_has_a_chinese_translation(name):
    untranslated = []
    for code, label in VOCABULARIES[name].items():
        with translation.override("en"):
            english = _render(label)
        with translation.override("zh-hans"):
            chinese = _render(label)
        if not CJK.search(chinese) and not english.isupper():  # "API" stays "API"
            untranslated.append((code, english, chinese))
    assert not untranslated, untranslated


def test_the_run_page_labels_stage_counts_and_translates_warnings(superuser, compressed_run):
    from django.urls import reverse

    compressed_run.warnings = [
        {"code": "summary_over_budget", "message": "summary has 900 tokens, budget 800", "params": {}},
        {"code": "still_over_threshold", "message": "x", "params": {"tokens": 1234, "trigger": 1000}},
    ]
    compressed_run.save(update_fields=["warnings"])
    html = superuser.get(reverse("run", args=[compressed_run.pk])).content.decode()
    assert '<span class="muted">tokens saved</span>' in html and '<span class="muted">tokens_saved</span>' not in html
    assert "summary has 900 tokens, budget 800" in html  # no params: the stored message
    assert "1234 tokens left, trigger is 1000" in html
    chinese = {"accept-language": "zh-hans"}
    with translation.override("en"):  # the locale middleware leaves the request's language active
        html = superuser.get(reverse("run", args=[compressed_run.pk]), headers=chinese).content.decode()
    assert "1234" in html and "tokens left" not in html and "节省的 token" in html
