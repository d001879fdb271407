"""Drift detector recall, precision and false alarms over a labelled corpus of summaries.

Run: .venv/bin/python bench/drift.py [--corpus bench/data/drift_pairs.jsonl] [--repeat 20]

The corpus (one JSON object a line) pairs a short agent session with a summary of it,
labelled ``faithful`` (a realistic paraphrase: no drift) or ``drift`` with the drift kinds
a reviewer would report. ``check_drift`` runs on every pair and the script prints:

- per kind, overall and per language: true positives / false negatives, recall, precision;
- faithful summaries with a finding of severity medium or high ("false alarms"), and with any finding;
- the misses and false alarms by id, and the unlabelled kinds reported on drift pairs;
- the time per pair (median and slowest, over ``--repeat`` runs).

It prints numbers only; the targets are asserted in tests/compression/test_drift_corpus.py.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from collections import Counter
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from agent_compression.drift import DRIFT_KINDS, DriftFinding, check_drift  # noqa: E402

CORPUS = ROOT / "bench" / "data" / "drift_pairs.jsonl"
ALARM = ("high", "medium")


def load(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]


def timed(pair: dict[str, Any], repeat: int) -> tuple[list[DriftFinding], float]:
    """Findings for ``pair`` and the median time of one check in milliseconds."""
    times = []
    findings: list[DriftFinding] = []
    for _ in range(repeat):
        started = time.perf_counter()
        findings = check_drift(pair["messages"], pair["summary"])
        times.append((time.perf_counter() - started) * 1000)
    return findings, statistics.median(times)


def ratio(num: int, den: int) -> str:
    return f"{num / den:5.2f}" if den else "  n/a"


def kind_table(pairs: list[dict[str, Any]], found: dict[str, list[DriftFinding]], title: str) -> None:
    print(f"\n{title}")
    print(f"  {'kind':<22} {'pairs':>5} {'TP':>4} {'FN':>4} {'recall':>7} {'reported':>9} {'precision':>9}")
    for kind in DRIFT_KINDS:
        labelled = [p for p in pairs if kind in p["kinds"]]
        tp = sum(1 for p in labelled if any(f.kind == kind for f in found[p["id"]]))
        reported = sum(1 for p in pairs for f in found[p["id"]] if f.kind == kind)
        right = sum(1 for p in labelled for f in found[p["id"]] if f.kind == kind)
        print(
            f"  {kind:<22} {len(labelled):>5} {tp:>4} {len(labelled) - tp:>4} {ratio(tp, len(labelled)):>7}"
            f" {reported:>9} {ratio(right, reported):>9}"
        )


def describe(finding: DriftFinding) -> str:
    quote = finding.evidence.get("summary") or finding.evidence.get("original") or ""
    quote = quote if len(quote) <= 70 else quote[:69] + "…"
    return f"{finding.kind}/{finding.severity} {quote!r}"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--corpus", type=Path, default=CORPUS)
    parser.add_argument("--repeat", type=int, default=20, help="runs per pair for the timing")
    args = parser.parse_args()

    pairs = load(args.corpus)
    found: dict[str, list[DriftFinding]] = {}
    times: list[float] = []
    for pair in pairs:
        found[pair["id"]], ms = timed(pair, max(1, args.repeat))
        times.append(ms)

    drift = [p for p in pairs if p["label"] == "drift"]
    faithful = [p for p in pairs if p["label"] == "faithful"]
    count = Counter((p["lang"], p["label"]) for p in pairs)
    print(f"corpus: {args.corpus.relative_to(ROOT) if args.corpus.is_relative_to(ROOT) else args.corpus}")
    print(
        f"pairs: {len(pairs)}  drift: {len(drift)} (en {count['en', 'drift']}, zh {count['zh', 'drift']})"
        f"  faithful: {len(faithful)} (en {count['en', 'faithful']}, zh {count['zh', 'faithful']})"
    )
    print("A drift pair is caught for kind K when a finding of kind K is reported.")
    print("recall = caught pairs labelled K / pairs labelled K")
    print("precision = findings of kind K on pairs labelled K / all findings of kind K over the corpus")

    kind_table(pairs, found, "all languages")
    for lang in ("en", "zh"):
        kind_table([p for p in pairs if p["lang"] == lang], found, f"lang={lang}")

    print("\nfaithful summaries")
    for lang in ("all", "en", "zh"):
        subset = [p for p in faithful if lang == "all" or p["lang"] == lang]
        alarms = sum(1 for p in subset if any(f.severity in ALARM for f in found[p["id"]]))
        anything = sum(1 for p in subset if found[p["id"]])
        print(
            f"  {lang:<4} {len(subset):>3} pairs  false alarms (medium/high): {alarms:>2}"
            f" ({alarms / max(1, len(subset)) * 20:.1f} per 20)  any finding: {anything:>2}"
        )

    print("\nmisses (drift pair, expected kind not reported)")
    misses = [(p, k) for p in drift for k in p["kinds"] if not any(f.kind == k for f in found[p["id"]])]
    for pair, kind in misses:
        got = ", ".join(sorted({f.kind for f in found[pair["id"]]})) or "nothing"
        print(f"  {pair['id']:<36} {kind:<22} reported: {got}")
    if not misses:
        print("  (none)")

    print("\nfindings on faithful summaries (* = medium/high, a false alarm)")
    noisy = [(p, f) for p in faithful for f in found[p["id"]]]
    for pair, finding in noisy:
        mark = "*" if finding.severity in ALARM else " "
        print(f" {mark}{pair['id']:<36} {describe(finding)}")
    if not noisy:
        print("  (none)")

    print("\nunlabelled kinds reported on drift pairs")
    extra = [(p, f) for p in drift for f in found[p["id"]] if f.kind not in p["kinds"]]
    for pair, finding in extra:
        print(f"  {pair['id']:<36} {describe(finding)}")
    if not extra:
        print("  (none)")

    print(
        f"\ntime per pair: median {statistics.median(times):.2f} ms, slowest {max(times):.2f} ms,"
        f" total {sum(times):.1f} ms for {len(pairs)} pairs (median of {max(1, args.repeat)} runs each)"
    )


if __name__ == "__main__":
    main()
