"""Drift detector recall and false alarms on real model answers, against hand labels.

Run: .venv/bin/python bench/drift_real.py [--split dev|heldout|all] [--round N] [--replay] [--verbose]

Reads the saved answers of ``bench/model.py`` (``bench/data/model_runs/``: ``inputs/<case>.json`` with
the archived messages each summary replaced, ``answers/<model>/<case>__<prompt_version>.json``) and the
hand labels in ``bench/data/model_labels.json``, runs ``check_drift(archived, text)`` on the labelled text
of every answer (the raw model answer or the pipeline's final summary, as the label says), with the
session's whole history as ``context_messages`` (as the console does), and scores its findings against the
labelled items. ``--replay`` (the only mode: nothing is generated here, a model run is
``bench/model.py``'s job) rescores the saved answers in seconds.

Scoring:

- a labelled error is **caught** when a finding of an equivalent kind (:data:`EQUIVALENT`) points at it:
  for a dropped constraint or a missing identifier (quoted from the original) the finding's original side
  and the quote hold one another; for the other kinds (quoted from the summary) the finding's evidence and
  the quote overlap (one holds the other, or they share most of their key terms), or both name the same
  archived message (``source_index``);
- a finding is a **false alarm** when it is of severity medium or high and catches no labelled error (a low
  finding is a note: it may catch an error, it is never an alarm); a false alarm that points at a
  faithful item counts against that item, and one that points at an error of another kind is listed as
  "wrong kind"; the report also says how many errors an alarm catches, since about half are caught by a
  note alone;
- a **faithful summary** is a labelled answer with no labelled error; it is noisy with one false alarm.

Held-out answers are those with ``int(sha256(answer_id)[:8], 16) % 3 == 0``; nothing in the detector is
tuned on them. A label's ``round`` (default 1) says when it was made; held-out answers of round 2 and later are
also reported alone: they were labelled after the detector changes they are scored against. The split is
printed separately; the targets are asserted in ``tests/compression/test_drift_real.py``.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import re
import sys
from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from agent_compression.drift import DriftFinding, check_drift  # noqa: E402
from agent_compression.drift.text import terms as key_terms  # noqa: E402

# which finding kinds catch a labelled error of each kind: one rule for both bench scorers
from bench.drift_eval_score import EQUIVALENT  # noqa: E402

RUNS = ROOT / "bench" / "data" / "model_runs"
LABELS = ROOT / "bench" / "data" / "model_labels.json"
ALARM = ("high", "medium")
ERROR_KINDS = (
    "constraint_inverted",
    "constraint_dropped",
    "constraint_fabricated",
    "progress_fabricated",
    "identifier_missing",
    "identifier_fabricated",
    "hedge_lost",
    "wrong_attribution",
)
LABEL_KINDS = (*ERROR_KINDS, "faithful")

#: share of the shorter side's key terms the other must hold for a quote and an evidence to overlap
OVERLAP = 0.6


def split_of(answer_id: str) -> str:
    return "heldout" if int(hashlib.sha256(answer_id.encode()).hexdigest()[:8], 16) % 3 == 0 else "dev"


@dataclass
class Scored:
    answer_id: str
    model: str
    case: str
    language: str
    split: str
    items: list[dict[str, Any]]
    findings: list[DriftFinding]
    #: the labelling round (1: before 2026-12-03): a held-out answer of a later round was labelled after the
    #: detector changes it is scored against, so nobody could have looked at it while making them
    round: int = 1
    #: item index -> indexes of the findings that catch it
    caught: dict[int, list[int]] = field(default_factory=dict)
    #: finding index -> item indexes it points at (any kind)
    points: dict[int, list[int]] = field(default_factory=dict)

    @property
    def errors(self) -> list[int]:
        return [i for i, item in enumerate(self.items) if item["kind"] != "faithful"]

    @property
    def faithful_items(self) -> list[int]:
        return [i for i, item in enumerate(self.items) if item["kind"] == "faithful"]

    def false_alarms(self) -> list[int]:
        catching = {f for found in self.caught.values() for f in found}
        return [i for i, f in enumerate(self.findings) if f.severity in ALARM and i not in catching]


def _flat(text: str) -> str:
    return re.sub(r"\s+", " ", text).strip().lower()


def overlaps(quote: str, evidence: str) -> bool:
    """Whether a labelled quote and a finding's evidence are about the same passage."""
    a, b = _flat(quote), _flat(evidence)
    if not a or not b:
        return False
    if a in b or b in a:
        return True
    ta, tb = key_terms(quote), key_terms(evidence)
    if not ta or not tb:
        return False
    small, large = (ta, tb) if len(ta) <= len(tb) else (tb, ta)
    return len(small & large) / len(small) >= OVERLAP and len(small) >= 2


#: kinds whose quote is taken from the original: their findings must quote the same passage
ORIGINAL_SIDE = frozenset({"constraint_dropped", "identifier_missing"})


def points_at(finding: DriftFinding, item: dict[str, Any]) -> bool:
    """Whether ``finding`` is about ``item``: overlapping quotes, or (for an item quoted from the summary)
    the same archived message."""
    sides = (finding.evidence.get("summary", ""), finding.evidence.get("original", ""))
    quote = item.get("quote") or ""
    if item["kind"] in ORIGINAL_SIDE:
        # a passage of the original: the finding quotes it, or it holds what the finding quotes
        a, b = _flat(quote), _flat(sides[1])
        return bool(a and b) and (a in b or b in a)
    if any(overlaps(quote, side) for side in sides):
        return True
    index = item.get("source_index")
    same = index is not None and finding.scope == "segment" and finding.source_index == index
    return same and item["kind"] not in ORIGINAL_SIDE


def load_labels(path: Path = LABELS) -> dict[str, Any]:
    data = json.loads(path.read_text(encoding="utf-8"))
    if not isinstance(data, dict) or not isinstance(data.get("answers"), dict):
        raise ValueError(f"{path}: expected {{'version': 1, 'answers': {{...}}}}")
    return data


def answer_text(answer: dict[str, Any], which: str) -> str:
    if which not in ("raw", "summary"):
        raise ValueError(f"label 'text' must be 'raw' or 'summary', not {which!r}")
    text = answer.get("raw_answer" if which == "raw" else "summary")
    return text if isinstance(text, str) else ""


def session_messages(case_input: dict[str, Any], runs: Path = RUNS) -> list[dict[str, Any]] | None:
    """The whole history the case compressed (the input's ``session`` file, repo-relative), as the console
    passes it: constraints kept verbatim in the head or tail must not be inverted either."""
    path = case_input.get("session")
    # repo-relative: to this repository, or to the one holding ``runs`` (<repo>/bench/data/model_runs)
    found = [root / path for root in (ROOT, runs.resolve().parents[2]) if path and (root / path).is_file()]
    if not found:
        return None
    data = json.loads(found[0].read_text(encoding="utf-8"))
    messages = data.get("messages") if isinstance(data, dict) else data
    return messages if isinstance(messages, list) else None


def score(runs: Path = RUNS, labels_path: Path = LABELS, split: str = "all") -> list[Scored]:
    """Run ``check_drift`` on every labelled answer of ``split`` and match its findings to the labels."""
    labels = load_labels(labels_path)
    inputs: dict[str, dict[str, Any]] = {}
    out = []
    for answer_id, label in sorted(labels["answers"].items()):
        model, _, rest = answer_id.rpartition("/")
        case = rest.split("__", 1)[0]
        part = split_of(answer_id)
        if label.get("split", part) != part:
            raise ValueError(f"{answer_id}: labelled split {label.get('split')!r}, computed {part!r}")
        if split != "all" and part != split:
            continue
        if case not in inputs:
            inputs[case] = json.loads((runs / "inputs" / f"{case}.json").read_text(encoding="utf-8"))
        answer = json.loads((runs / "answers" / model / f"{rest}.json").read_text(encoding="utf-8"))
        text = answer_text(answer, label.get("text", "summary"))
        items = list(label.get("items") or [])
        for item in items:
            if item.get("kind") not in LABEL_KINDS:
                raise ValueError(f"{answer_id}: unknown label kind {item.get('kind')!r}")
        archived = inputs[case]["archived"]
        context = session_messages(inputs[case], runs)
        scored = Scored(
            answer_id,
            model,
            case,
            inputs[case].get("language", "?"),
            part,
            items,
            check_drift(archived, text, context_messages=context) if text else [],
            int(label.get("round", 1)),
        )
        for f_index, finding in enumerate(scored.findings):
            for i_index, item in enumerate(items):
                if points_at(finding, item):
                    scored.points.setdefault(f_index, []).append(i_index)
                    if item["kind"] != "faithful" and finding.kind in EQUIVALENT[item["kind"]]:
                        scored.caught.setdefault(i_index, []).append(f_index)
        out.append(scored)
    return out


@dataclass
class Totals:
    answers: int = 0
    errors: dict[str, list[int]] = field(default_factory=lambda: defaultdict(lambda: [0, 0]))  # kind -> [caught, all]
    by_language: dict[str, list[int]] = field(default_factory=lambda: defaultdict(lambda: [0, 0]))
    #: the errors whose note starts "unsure:" (a careful auditor could label them otherwise), by language
    unsure: dict[str, list[int]] = field(default_factory=lambda: defaultdict(lambda: [0, 0]))
    #: the errors caught by an alarm (a medium or high finding), not by a note alone, by language
    by_alarm: dict[str, list[int]] = field(default_factory=lambda: defaultdict(lambda: [0, 0]))
    faithful_items: int = 0
    faithful_items_alarmed: int = 0
    faithful_summaries: int = 0
    faithful_summaries_alarmed: int = 0
    false_alarms: int = 0
    wrong_kind: int = 0
    #: low findings (notes) that catch nothing, and the faithful items they point at: not alarms, shown
    notes: int = 0
    faithful_items_noted: int = 0
    findings: int = 0


def totals(scored: Iterable[Scored]) -> Totals:
    t = Totals()
    for s in scored:
        t.answers += 1
        t.findings += len(s.findings)
        for i in s.errors:
            hit = int(i in s.caught)
            kind = s.items[i]["kind"]
            t.errors[kind][0] += hit
            t.errors[kind][1] += 1
            t.by_language[s.language][0] += hit
            t.by_language[s.language][1] += 1
            t.by_alarm[s.language][0] += int(any(s.findings[f].severity in ALARM for f in s.caught.get(i, ())))
            t.by_alarm[s.language][1] += 1
            if str(s.items[i].get("note") or "").startswith("unsure"):
                t.unsure[s.language][0] += hit
                t.unsure[s.language][1] += 1
        alarms = s.false_alarms()
        t.false_alarms += len(alarms)
        t.faithful_items += len(s.faithful_items)
        alarmed_items = {i for f in alarms for i in s.points.get(f, ()) if s.items[i]["kind"] == "faithful"}
        t.faithful_items_alarmed += len(alarmed_items)
        t.wrong_kind += sum(1 for f in alarms if any(s.items[i]["kind"] != "faithful" for i in s.points.get(f, ())))
        catching = {f for found in s.caught.values() for f in found}
        notes = [i for i, f in enumerate(s.findings) if f.severity not in ALARM and i not in catching]
        t.notes += len(notes)
        noted = {i for f in notes for i in s.points.get(f, ()) if s.items[i]["kind"] == "faithful"}
        t.faithful_items_noted += len(noted - alarmed_items)
        if not s.errors:
            t.faithful_summaries += 1
            t.faithful_summaries_alarmed += int(bool(alarms))
    return t


def recall(pair: list[int]) -> float:
    return pair[0] / pair[1] if pair[1] else 1.0


def _pct(num: int, den: int) -> str:
    return f"{num / den:6.2f}" if den else "   n/a"


def _quote(text: str, width: int = 80) -> str:
    text = re.sub(r"\s+", " ", text).strip()
    return repr(text if len(text) <= width else text[: width - 1] + "…")


def report(scored: list[Scored], title: str, verbose: bool) -> None:
    t = totals(scored)
    print(f"\n=== {title}: {t.answers} answers, {sum(n for _, n in t.errors.values())} labelled errors,")
    print(f"    {t.faithful_items} faithful items, {t.faithful_summaries} faithful summaries, {t.findings} findings")
    print(f"  {'kind':<22} {'errors':>6} {'caught':>6} {'recall':>6}")
    for kind in ERROR_KINDS:
        caught, n = t.errors.get(kind, [0, 0])
        print(f"  {kind:<22} {n:>6} {caught:>6} {_pct(caught, n)}")
    caught = sum(c for c, _ in t.errors.values())
    n = sum(n for _, n in t.errors.values())
    print(f"  {'all':<22} {n:>6} {caught:>6} {_pct(caught, n)}")
    for lang in sorted(t.by_language):
        c, n = t.by_language[lang]
        print(f"  lang={lang:<17} {n:>6} {c:>6} {_pct(c, n)}")
    for lang in sorted(t.by_language):
        (c, n), (uc, un) = t.by_language[lang], t.unsure.get(lang, [0, 0])
        print(
            f"  lang={lang}: labels marked unsure {uc}/{un} caught ({_pct(uc, un).strip()}),"
            f" the rest {c - uc}/{n - un} ({_pct(c - uc, n - un).strip()})"
        )
    for lang in sorted(t.by_language):
        c, n = t.by_alarm[lang]
        print(
            f"  lang={lang}: caught by an alarm (medium/high) {c}/{n} ({_pct(c, n).strip()}),"
            f" by a note alone {t.by_language[lang][0] - c}"
        )
    print(
        f"  false alarms (medium/high findings catching nothing): {t.false_alarms}"
        f" ({t.wrong_kind} of them point at an error of another kind)"
    )
    print(
        f"  faithful items with a false alarm: {t.faithful_items_alarmed} of {t.faithful_items}"
        f" ({_pct(t.faithful_items_alarmed, t.faithful_items).strip()})"
    )
    print(
        f"  notes (low findings catching nothing): {t.notes}; faithful items with only a note: {t.faithful_items_noted}"
    )
    per20 = t.faithful_summaries_alarmed / t.faithful_summaries * 20 if t.faithful_summaries else 0.0
    print(
        f"  faithful summaries with >= 1 false alarm: {t.faithful_summaries_alarmed} of {t.faithful_summaries}"
        f" ({per20:.1f} per 20)"
    )
    if not verbose:
        return
    print("  misses:")
    for s in scored:
        for i in s.errors:
            if i not in s.caught:
                item = s.items[i]
                print(f"    {s.answer_id} [{s.language}] {item['kind']}: {_quote(item.get('quote', ''))}")
    print("  false alarms:")
    for s in scored:
        for f_index in s.false_alarms():
            f = s.findings[f_index]
            on = ",".join(s.items[i]["kind"] for i in s.points.get(f_index, ())) or "-"
            side = f.evidence.get("summary") or f.evidence.get("original") or ""
            print(f"    {s.answer_id} [{s.language}] {f.kind}/{f.code} on {on}: {_quote(side)}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--split", choices=("dev", "heldout", "all"), default="all")
    parser.add_argument("--replay", action="store_true", default=True, help="rescore the saved answers (default)")
    parser.add_argument("--runs", type=Path, default=RUNS)
    parser.add_argument("--labels", type=Path, default=LABELS)
    parser.add_argument("--verbose", "-v", action="store_true", help="list misses and false alarms")
    parser.add_argument("--round", type=int, help="only the answers of this labelling round (both splits)")
    args = parser.parse_args(argv)
    if not args.labels.exists() or not (args.runs / "inputs").is_dir():
        print(f"no saved answers or labels: {args.runs} / {args.labels}", file=sys.stderr)
        return 2
    scored = [s for s in score(args.runs, args.labels, args.split) if args.round in (None, s.round)]
    print(f"answers: {args.runs.relative_to(ROOT) if args.runs.is_relative_to(ROOT) else args.runs}")
    print(f"labels:  {args.labels.relative_to(ROOT) if args.labels.is_relative_to(ROOT) else args.labels}")
    splits = ("dev", "heldout") if args.split == "all" else (args.split,)
    for part in splits:
        report([s for s in scored if s.split == part], f"split={part}", args.verbose)
        for n in sorted({s.round for s in scored if s.split == part} - {1}):
            report([s for s in scored if s.split == part and s.round == n], f"split={part} round={n}", False)
        for model in sorted({s.model for s in scored if s.split == part}):
            report([s for s in scored if s.split == part and s.model == model], f"split={part} model={model}", False)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
