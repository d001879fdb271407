"""The drift detector against the labelled corpus bench/data/drift_pairs.jsonl (also read by bench/drift.py).

Targets: every inverted or dropped constraint is found (recall 1.0 for those kinds), and at most one
false alarm (a finding of severity medium or high) per 20 faithful summaries. The other kinds are
checked pair by pair.
"""

from __future__ import annotations

import json
from functools import cache
from pathlib import Path
from typing import Any

import pytest

from agent_compression.drift import DRIFT_KINDS, DriftFinding, check_drift

CORPUS = Path(__file__).resolve().parents[2] / "bench" / "data" / "drift_pairs.jsonl"
TARGET_KINDS = ("constraint_inverted", "constraint_dropped")
ALARM = ("high", "medium")


def load() -> list[dict[str, Any]]:
    return [json.loads(line) for line in CORPUS.read_text(encoding="utf-8").splitlines() if line.strip()]


PAIRS = load()
BY_ID = {pair["id"]: pair for pair in PAIRS}
FAITHFUL = [pair for pair in PAIRS if pair["label"] == "faithful"]


@cache
def findings(pair_id: str) -> tuple[DriftFinding, ...]:
    pair = BY_ID[pair_id]
    return tuple(check_drift(pair["messages"], pair["summary"]))


def expected(kinds: tuple[str, ...]) -> list[Any]:
    return [
        pytest.param(pair["id"], kind, id=f"{pair['id']}:{kind}")
        for pair in PAIRS
        for kind in pair["kinds"]
        if kind in kinds
    ]


def alarms(pairs: list[dict[str, Any]]) -> list[str]:
    return [
        f"{pair['id']}: {f.kind}/{f.severity} {f.evidence}"
        for pair in pairs
        for f in findings(pair["id"])
        if f.severity in ALARM
    ]


def test_it_has_a_well_formed_corpus() -> None:
    assert len(BY_ID) == len(PAIRS), "ids must be unique"
    for pair in PAIRS:
        assert pair["lang"] in ("en", "zh") and pair["label"] in ("drift", "faithful"), pair["id"]
        assert (pair["label"] == "drift") == bool(pair["kinds"]), pair["id"]
        assert set(pair["kinds"]) <= set(DRIFT_KINDS), pair["id"]
        assert 3 <= len(pair["messages"]) <= 10, pair["id"]
        assert {m["role"] for m in pair["messages"]} <= {"user", "assistant", "tool"}, pair["id"]
        assert pair["summary"].strip(), pair["id"]
    for lang in ("en", "zh"):
        assert sum(1 for p in FAITHFUL if p["lang"] == lang) >= 12
        for kind in DRIFT_KINDS:  # every kind, in both languages
            assert any(kind in p["kinds"] for p in PAIRS if p["lang"] == lang), (lang, kind)
    assert sum(1 for p in PAIRS if p["label"] == "drift") >= 30


@pytest.mark.parametrize(("pair_id", "kind"), expected(TARGET_KINDS))
def test_it_finds_every_inverted_and_dropped_constraint(pair_id: str, kind: str) -> None:
    found = [f.kind for f in findings(pair_id)]
    assert kind in found, f"{pair_id}: expected {kind}, got {found}"


@pytest.mark.parametrize(("pair_id", "kind"), expected(tuple(k for k in DRIFT_KINDS if k not in TARGET_KINDS)))
def test_it_finds_the_other_drift_kinds(pair_id: str, kind: str) -> None:
    found = [f.kind for f in findings(pair_id)]
    assert kind in found, f"{pair_id}: expected {kind}, got {found}"


@pytest.mark.parametrize("lang", ["all", "en", "zh"])
def test_it_raises_at_most_one_false_alarm_per_20_faithful_summaries(lang: str) -> None:
    pairs = [p for p in FAITHFUL if lang == "all" or p["lang"] == lang]
    raised = alarms(pairs)
    assert len({line.split(":")[0] for line in raised}) * 20 <= len(pairs), "\n".join(raised)
