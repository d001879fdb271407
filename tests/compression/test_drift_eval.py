"""The drift evaluation set (bench/data/drift_eval/) and its scorer (bench/drift_eval_score.py).

Nothing here reads the real runs: the matching and scoring logic is checked on a tiny inline fixture, the committed
set is checked for its format (quotes are substrings of their lines, kinds, splits, bounds, no long copies of run
content), quotes taken from the bench sessions (which the repository holds) are checked against the messages they
name, and the command is run once with an empty folder for the real runs (they are skipped with a note; the bench
sessions are scored). No number of the detector is asserted here: the set measures it, it does not gate it.
"""

from __future__ import annotations

import copy
import json
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from bench.drift_eval import MAX_QUOTE, SESSIONS, check_quotes, groups, load_messages, load_set, validate
from bench.drift_eval import main as drift_eval_main
from bench.drift_eval_score import Scored, finding_points, lines_holding, match, overlaps, totals

TEXT = "\n".join(
    [
        "## Rules",
        "- Do not modify deploy.sh.",  # 1: faithful
        "- Tests pass after the fix.",  # 2: progress_fabricated
        "- The KeyError came from rates.py; HAT136 was booked.",  # 3: wrong_attribution + faithful
    ]
)
ITEMS: list[dict[str, Any]] = [
    {"kind": "faithful", "quote": "Do not modify deploy.sh.", "line": 1, "source_index": 0, "scope": "segment"},
    {"kind": "progress_fabricated", "quote": "Tests pass after the fix.", "line": 2, "source_index": 5},
    {"kind": "wrong_attribution", "quote": "The KeyError came from rates.py", "line": 3, "source_index": 3},
    {"kind": "faithful", "quote": "HAT136 was booked", "line": 3, "source_index": 7},
    {"kind": "constraint_dropped", "quote": "Keep each function under 40 lines", "line": None, "source_index": 1},
]


def finding(kind: str, severity: str, summary: str = "", original: str = "", index: int | None = None) -> dict:
    return {
        "kind": kind,
        "severity": severity,
        "evidence": {"summary": summary, "original": original},
        "source_index": index,
        "scope": "segment",
    }


def scored(findings: list[dict], claims: list[dict] | None = None) -> Scored:
    return match(Scored("s1", "run", "coding", "en", "dev", copy.deepcopy(ITEMS), findings, claims), TEXT)


def test_overlap_and_line_placement() -> None:
    assert overlaps("Tests pass after the fix", "- tests PASS after the fix.")
    assert not overlaps("HAT136 was booked", "deploy.sh untouched")
    assert lines_holding(TEXT, "tests pass after the fix") == [2]
    assert lines_holding(TEXT, "") == []


def test_a_finding_on_a_shared_line_points_at_the_overlapping_item_only() -> None:
    f = finding("wrong_attribution", "high", summary="The KeyError came from rates.py")
    assert finding_points(f, ITEMS, TEXT) == [2]
    # evidence that names the line but overlaps neither quote points at both items on it
    whole = finding("identifier_fabricated", "low", summary=TEXT.splitlines()[3])
    assert finding_points(whole, ITEMS, TEXT) == [2, 3]


def test_original_side_items_match_the_original_quote_only() -> None:
    dropped = finding("constraint_dropped", "medium", original="Keep each function under 40 lines, please")
    assert finding_points(dropped, ITEMS, TEXT) == [4]
    # the same message without an original quote, but from the summary side, is not about the dropped rule
    other = finding("constraint_dropped", "medium", summary="Do not modify deploy.sh.", index=1)
    assert 4 not in finding_points(other, ITEMS, TEXT)


def test_source_index_places_a_finding_whose_summary_side_names_no_line() -> None:
    f = finding("progress_fabricated", "high", summary="", index=5)
    assert finding_points(f, ITEMS, TEXT) == [1]


def test_scoring_counts_recall_alarms_and_case_opening_findings() -> None:
    s = scored(
        [
            finding("progress_fabricated", "high", summary="Tests pass after the fix."),  # catches item 1
            finding("constraint_fabricated", "medium", summary="Do not modify deploy.sh."),  # alarms item 0
            finding("hedge_lost", "high", summary="HAT136 was booked"),  # opens a case on item 3
            finding("identifier_missing", "low", summary="The KeyError came from rates.py"),  # wrong kind
            finding("constraint_inverted", "high", summary="nothing like any line"),  # unplaced
        ]
    )
    t = totals([s])
    assert (t.errors, t.caught, t.flagged, t.caught_by_alarm) == (3, 1, 2, 1)
    assert (t.faithful, t.alarmed, t.case_opening, t.unplaced_alarms) == (2, 2, 1, 1)
    assert t.by_kind["progress_fabricated"] == [1, 1] and t.by_kind["wrong_attribution"] == [0, 1]
    assert t.as_dict()["recall"] == round(1 / 3, 4)


def test_equivalent_kinds_catch_each_other_and_notes_never_alarm() -> None:
    s = scored(
        [
            finding("identifier_fabricated", "low", summary="The KeyError came from rates.py"),
            finding("identifier_missing", "low", summary="Do not modify deploy.sh."),
        ]
    )
    t = totals([s])
    assert t.caught == 1 and t.caught_by_alarm == 0
    assert t.alarmed == 0


def test_claim_verdicts_are_scored_by_line() -> None:
    claims = [
        {"line": 2, "text": "Tests pass", "verdict": "contradicted"},
        {"line": 3, "text": "HAT136 was booked", "verdict": "supported"},
        {"line": 1, "text": "Do not modify deploy.sh", "verdict": "unsupported"},
    ]
    t = totals([scored([], claims)])
    assert (t.with_claims, t.errors_negated, t.faithful_negated) == (1, 1, 1)


# ---------------------------------------------------------------- the committed set

RUNS, SPLITS = load_set()


def test_the_committed_set_is_well_formed() -> None:
    assert validate(RUNS, SPLITS) == []


def test_the_set_is_big_enough_and_balanced() -> None:
    summaries = [s for r in RUNS for s in r["summaries"]]
    items = [i for s in summaries for i in s["items"]]
    errors = [i for i in items if i["kind"] != "faithful"]
    assert len(summaries) >= 40 and len(items) >= 300 and len(errors) >= 100
    assert Counter(s["language"] for s in summaries)["zh"] >= len(summaries) // 4
    assert {r["family"] for r in RUNS} == set(SPLITS["families"])
    assert all(any(i["kind"] == kind for i in errors) for kind in {"constraint_inverted", "progress_fabricated"})


def test_splits_hold_out_whole_runs_of_both_real_families() -> None:
    family = {r["run"]: r["family"] for r in RUNS}
    held = Counter(family[rid] for rid in SPLITS["heldout_runs"])
    assert held["coding"] >= 2 and held["support"] >= 1
    for fold in SPLITS["folds"].values():
        assert not set(fold["tune"]) & set(fold["measure"])
    scored_runs = [Scored(r["run"], r["run"], r["family"], "en", "dev", [], []) for r in RUNS]
    named = groups(scored_runs, SPLITS, None)
    assert {s.family for s in named["fold=coding-to-support:measure"]} == {"support"}


def test_labels_quote_runs_and_never_copy_them() -> None:
    for run in RUNS:
        for s in run["summaries"]:
            assert len(s["text"]) <= 2_000, s["id"]
            assert all(len(line) <= 300 for line in s["text"].splitlines()), s["id"]
            assert all(len(i["quote"]) <= MAX_QUOTE for i in s["items"])
            assert "messages" not in s and "content" not in s


@pytest.mark.parametrize("run", [r for r in RUNS if r["source"] == "bench"], ids=lambda r: r["run"])
def test_quotes_from_bench_sessions_are_in_the_messages_they_name(run: dict[str, Any]) -> None:
    messages = load_messages(run, SESSIONS)
    assert messages is not None
    assert check_quotes(run, messages) == []
    for s in run["summaries"]:
        assert s["end"] <= len(messages)


def test_the_checker_fails_on_a_broken_label() -> None:
    runs = copy.deepcopy(RUNS)
    item = next(i for i in runs[0]["summaries"][0]["items"] if i["kind"] != "faithful" and i["line"] is not None)
    item["quote"] += " (not in the line)"
    runs[1]["summaries"][0]["items"][0]["kind"] = "made_up"
    runs[2]["family"] = "unknown"
    problems = validate(runs, SPLITS)
    assert len(problems) == 3, problems


def test_the_cli_skips_missing_runs_with_a_note_and_scores_the_bench_sessions(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert drift_eval_main(["--real", str(tmp_path), "--split", "all", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    real = [r for r in RUNS if r["source"] == "real"]
    assert sum(note.startswith("skipped ") for note in out["notes"]) == len(real)
    groups_ = out["groups"]
    assert not any(k.startswith("family=coding") or k == "family=support" for k in groups_)
    families = [v for k, v in groups_.items() if k.startswith("family=")]
    assert groups_["all"]["errors"] == sum(v["errors"] for v in families) > 0
    assert groups_["all"]["faithful"] == sum(v["faithful"] for v in families) > 0
