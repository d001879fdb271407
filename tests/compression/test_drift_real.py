"""The drift detector replayed over real model answers and their hand labels (bench/drift_real.py --replay).

The answers are saved by ``make bench-model`` under ``bench/data/model_runs/`` and labelled blind in
``bench/data/model_labels.json``; this test rescores them in seconds, so every detector change is checked
against real model output. Held-out answers (a third, by the hash of their id) are never tuned on.

Targets (issue 17): on the held-out answers, recall of labelled errors >= 80% in each language, and at most
one false alarm per 20 faithful summaries. Where the detector does not reach a target yet, the number it
reaches is asserted as a floor (see ``FLOORS``), so a regression fails; the report of ``bench/drift_real.py``
says which.
"""

from __future__ import annotations

import json
from functools import cache
from pathlib import Path

import pytest

from bench.drift_real import LABEL_KINDS, LABELS, RUNS, Scored, answer_text, load_labels, score, split_of, totals

TARGET_RECALL = 0.80
#: at most this many faithful summaries with a false alarm, per 20
TARGET_ALARMS_PER_20 = 1.0
#: what the detector reaches where it falls short of a target: (split, measure) -> floor (recall) or
#: ceiling (alarms per 20); a measure not listed must meet its target. Measured on 2026-12-04 over 188
#: labelled answers (91 dev, 97 held-out; rounds 3 to 14 labelled blind by helpers who ran no detector):
#: dev en 353/417 = 0.85, zh 157/173 = 0.91; held-out en 312/407 = 0.77, zh 161/195 = 0.83; 42 of 548
#: held-out faithful items with a false alarm (1.53 per 20); the one held-out answer that is faithful
#: throughout (round 7) has a false alarm. Held-out English recall and both alarm targets are not met; their
#: floor and ceilings sit at or a little past what is measured, so a regression fails.
FLOORS: dict[tuple[str, str], float] = {
    ("dev", "recall_en"): 0.83,
    ("dev", "recall_zh"): 0.88,
    ("heldout", "recall_en"): 0.75,
    ("heldout", "item_alarms_per_20"): 1.6,
    ("heldout", "alarms_per_20"): 20.0,  # 1 of 1: a single faithful summary so far
}

pytestmark = pytest.mark.skipif(
    not LABELS.exists() or not (RUNS / "inputs").is_dir(),
    reason="no saved real-model answers or labels (bench/data/model_runs/, bench/data/model_labels.json)",
)


@cache
def replayed() -> tuple[Scored, ...]:
    """Every labelled answer rescored, once per test process (each test filters its split)."""
    return tuple(score(RUNS, LABELS, "all"))


def scored(split: str) -> tuple[Scored, ...]:
    return tuple(s for s in replayed() if split in ("all", s.split))


def test_the_labels_are_well_formed() -> None:
    labels = load_labels()
    assert labels.get("version") == 1
    answers = labels["answers"]
    assert answers, "no labelled answers"
    for answer_id, label in answers.items():
        model, _, rest = answer_id.rpartition("/")
        case = rest.split("__", 1)[0]
        assert label["split"] == split_of(answer_id), answer_id
        answer = json.loads((RUNS / "answers" / model / f"{rest}.json").read_text(encoding="utf-8"))
        archived = json.loads((RUNS / "inputs" / f"{case}.json").read_text(encoding="utf-8"))["archived"]
        text = answer_text(answer, label["text"])
        for item in label["items"]:
            assert item["kind"] in LABEL_KINDS, (answer_id, item)
            if item["kind"] in ("constraint_dropped", "identifier_missing"):
                index = item["source_index"]
                assert isinstance(index, int) and 0 <= index < len(archived), (answer_id, item)
            else:
                assert item["quote"] in text, (answer_id, item["quote"])
    assert {label["split"] for label in answers.values()} == {"dev", "heldout"}


@pytest.mark.parametrize("split", ["dev", "heldout"])
def test_recall_per_language(split: str) -> None:
    t = totals(scored(split))
    assert t.by_language, "no labelled errors"
    for lang, (caught, n) in sorted(t.by_language.items()):
        floor = FLOORS.get((split, f"recall_{lang}"), TARGET_RECALL)
        assert caught / n >= floor, f"{split} {lang}: caught {caught} of {n} ({caught / n:.2f} < {floor})"


@pytest.mark.parametrize("split", ["dev", "heldout"])
def test_false_alarms_per_20_faithful_summaries(split: str) -> None:
    t = totals(scored(split))
    if not t.faithful_summaries:
        pytest.skip(f"{split}: no answer is faithful throughout (the faithful items are checked below)")
    per20 = t.faithful_summaries_alarmed / t.faithful_summaries * 20
    ceiling = FLOORS.get((split, "alarms_per_20"), TARGET_ALARMS_PER_20)
    assert per20 <= ceiling, (
        f"{split}: {t.faithful_summaries_alarmed} of {t.faithful_summaries} faithful summaries with a false alarm"
        f" ({per20:.1f} per 20 > {ceiling})"
    )


@pytest.mark.parametrize("split", ["dev", "heldout"])
def test_false_alarms_per_20_faithful_items(split: str) -> None:
    """The same target on each faithful restatement (a constraint, limit, identifier kept correctly)."""
    t = totals(scored(split))
    assert t.faithful_items, "no faithful item labelled"
    per20 = t.faithful_items_alarmed / t.faithful_items * 20
    ceiling = FLOORS.get((split, "item_alarms_per_20"), TARGET_ALARMS_PER_20)
    assert per20 <= ceiling, (
        f"{split}: {t.faithful_items_alarmed} of {t.faithful_items} faithful items with a false alarm"
        f" ({per20:.1f} per 20 > {ceiling})"
    )


def test_the_replay_is_fast() -> None:
    import time

    replayed.cache_clear()
    started = time.perf_counter()
    count = len(replayed())
    elapsed = time.perf_counter() - started
    assert count and elapsed < 30, f"{count} answers rescored in {elapsed:.1f} s"


def test_the_scorer_reads_the_paths_the_contract_names() -> None:
    root = Path(__file__).resolve().parents[2]
    assert root / "bench" / "data" / "model_runs" == RUNS
    assert root / "bench" / "data" / "model_labels.json" == LABELS


def test_errors_labelled_unsure_are_counted_apart() -> None:
    t = totals(scored("heldout"))
    for lang, (caught, n) in t.unsure.items():
        assert 0 <= caught <= n <= t.by_language[lang][1]
    every = [i for s in scored("heldout") for i in s.errors if str(s.items[i].get("note", "")).startswith("unsure")]
    assert sum(n for _, n in t.unsure.values()) == len(every) > 0


def test_errors_caught_by_an_alarm_are_counted_apart() -> None:
    """The recall above counts an error caught by a note (a low finding) alone; the report also says how many
    an alarm catches, since a reader may skim past notes."""
    for split in ("dev", "heldout"):
        t = totals(scored(split))
        for lang, (caught, n) in t.by_alarm.items():
            every = [
                i
                for s in scored(split)
                if s.language == lang
                for i in s.errors
                if any(s.findings[f].severity in ("medium", "high") for f in s.caught.get(i, ()))
            ]
            assert caught == len(every) and n == t.by_language[lang][1], (split, lang)
            assert 0 < caught < t.by_language[lang][0], (split, lang)
