"""Drift detection measured on hand-labelled summaries of real agent runs, split by session and by family.

Run: .venv/bin/python bench/drift_eval.py [--split dev|heldout|all] [--fold NAME] [--real DIR] [--json] [-v]
     .venv/bin/python bench/drift_eval.py --extractive [--real DIR] [--json]

The set lives in ``bench/data/drift_eval/`` (format, how it was written and the splits: its README). Each
summary names its run file and the archived segment ``[start, end)``; the messages are read back from the real
runs (``--real``, by default the ``shared/real`` folder beside this repository; a summary whose run is missing is
skipped with a note) or from ``bench/data/sessions/``. The detector gets the segment as the original messages and
the run's whole history as context, as the console does. ``assess_summary`` is used when the installed
``agent_compression`` has it (its claim verdicts are scored too), ``check_drift`` otherwise. Matching and
scoring: ``bench/drift_eval_score.py``.

``--extractive`` writes no labels: it compresses every real run at 8k and 16k with ``ExtractiveSummarizer``
(a faithful copy of the archived messages) and counts the findings on those summaries by severity; each high
finding would open a case for a reviewer (issue 34's target: at most 2 in total).
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from bench.drift_eval_score import (  # noqa: E402
    ERROR_KINDS,
    LABEL_KINDS,
    ORIGINAL_SIDE,
    Scored,
    Totals,
    match,
    totals,
)

DATA = ROOT / "bench" / "data" / "drift_eval"
SESSIONS = ROOT / "bench" / "data" / "sessions"
#: the team's reference runs sit in ``shared/real`` beside the repository checkout
DEFAULT_REAL = ROOT.parent / "shared" / "real"
FAMILIES = ("coding", "support", "bench-coding", "bench-ops", "bench-support")
STYLES = ("structured", "extractive")
LANGUAGES = ("en", "zh")
#: the longest quote a label may carry: labels quote, they do not copy runs
MAX_QUOTE = 200
EXTRACTIVE_WINDOWS = (8_000, 16_000)

Detector = Callable[[list[dict[str, Any]], str, list[dict[str, Any]] | None], tuple[list[dict], list[dict] | None]]


def load_set(data: Path = DATA) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    """The labelled runs (one JSON file each under ``runs/``) and ``splits.json``."""
    runs = [json.loads(p.read_text(encoding="utf-8")) for p in sorted((data / "runs").glob("*.json"))]
    splits = json.loads((data / "splits.json").read_text(encoding="utf-8"))
    return runs, splits


def validate(runs: list[dict[str, Any]], splits: dict[str, Any]) -> list[str]:
    """Every format problem of the set, as sentences (empty when the set is well formed). Checks only what the
    repository holds: quotes from the original are checked against the run by :func:`check_quotes`."""
    problems: list[str] = []
    families = set(splits.get("families") or ())
    if families != set(FAMILIES):
        problems.append(f"splits.json families {sorted(families)} != {sorted(FAMILIES)}")
    run_ids = {r.get("run") for r in runs}
    for rid in splits.get("heldout_runs") or ():
        if rid not in run_ids:
            problems.append(f"held-out run {rid!r} has no labels")
    for name, fold in (splits.get("folds") or {}).items():
        tune, measure = set(fold.get("tune") or ()), set(fold.get("measure") or ())
        if not tune or not measure or tune & measure or not (tune | measure) <= families:
            problems.append(f"fold {name!r}: tune and measure must be disjoint, non-empty families")
    seen: set[str] = set()
    for run in runs:
        rid = run.get("run", "?")
        if run.get("family") not in families:
            problems.append(f"{rid}: unknown family {run.get('family')!r}")
        if run.get("source") not in ("real", "bench"):
            problems.append(f"{rid}: source must be 'real' or 'bench'")
        if run.get("source") == "bench" and not run.get("family", "").startswith("bench-"):
            problems.append(f"{rid}: a bench session must be in a bench-* family")
        for s in run.get("summaries") or ():
            problems.extend(_validate_summary(rid, s, seen))
    return problems


def _validate_summary(rid: str, s: dict[str, Any], seen: set[str]) -> list[str]:
    sid = s.get("id", "?")
    out = []
    if sid in seen:
        out.append(f"{rid}/{sid}: duplicate summary id")
    seen.add(sid)
    if s.get("language") not in LANGUAGES or s.get("style") not in STYLES:
        out.append(f"{rid}/{sid}: language or style not one of {LANGUAGES} / {STYLES}")
    start, end = s.get("start"), s.get("end")
    if not (isinstance(start, int) and isinstance(end, int) and 0 <= start < end):
        out.append(f"{rid}/{sid}: bad segment bounds {start!r}-{end!r}")
        return out
    lines = str(s.get("text") or "").splitlines()
    if not s.get("items"):
        out.append(f"{rid}/{sid}: no labelled items")
    for n, item in enumerate(s.get("items") or ()):
        where = f"{rid}/{sid} item {n}"
        kind, quote = item.get("kind"), str(item.get("quote") or "")
        if kind not in LABEL_KINDS:
            out.append(f"{where}: unknown kind {kind!r}")
            continue
        if not quote or len(quote) > MAX_QUOTE:
            out.append(f"{where}: a quote of 1 to {MAX_QUOTE} characters is required")
        index, scope = item.get("source_index"), item.get("scope")
        if scope not in ("segment", "context"):
            out.append(f"{where}: scope must be 'segment' or 'context'")
        if index is not None and not (isinstance(index, int) and 0 <= index < end - start):
            out.append(f"{where}: source_index {index!r} outside the segment")
        if scope == "context" and not isinstance(item.get("context_index"), int):
            out.append(f"{where}: a context item needs context_index")
        if kind in ORIGINAL_SIDE:
            if item.get("line") is not None:
                out.append(f"{where}: {kind} is quoted from the original, it has no summary line")
            if index is None and item.get("context_index") is None:
                out.append(f"{where}: {kind} needs the message it is quoted from")
            continue
        line = item.get("line")
        if not isinstance(line, int) or not 0 <= line < len(lines) or quote not in lines[line]:
            out.append(f"{where}: quote is not a substring of summary line {line!r}")
    return out


def load_messages(run: dict[str, Any], real: Path) -> list[dict[str, Any]] | None:
    """The whole history of a labelled run, or None when its file is not here."""
    path = (real if run["source"] == "real" else SESSIONS) / run["file"]
    if not path.is_file():
        return None
    data = json.loads(path.read_text(encoding="utf-8"))
    messages = data.get("messages") if isinstance(data, dict) else data
    return messages if isinstance(messages, list) else None


def _text_of(message: dict[str, Any]) -> str:
    content = message.get("content")
    if isinstance(content, list):
        content = " ".join(str(p.get("text", "")) for p in content if isinstance(p, dict))
    calls = " ".join(str((c.get("function") or {}).get("arguments", "")) for c in message.get("tool_calls") or ())
    return f"{content or ''} {calls}"


def check_quotes(run: dict[str, Any], messages: list[dict[str, Any]]) -> list[str]:
    """Items quoted from the original whose quote is not in the message they name (needs the run)."""
    out = []
    for s in run["summaries"]:
        for n, item in enumerate(s["items"]):
            if item["kind"] not in ORIGINAL_SIDE:
                continue
            index = item["source_index"] + s["start"] if item["source_index"] is not None else item["context_index"]
            if item["quote"] not in _text_of(messages[index]):
                out.append(f"{run['run']}/{s['id']} item {n}: quote not in message {index}")
    return out


def default_detector() -> tuple[str, Detector]:
    """``assess_summary`` when the installed package has it (findings and claims), else ``check_drift``."""
    try:
        from agent_compression.drift import assess_summary  # type: ignore[attr-defined,unused-ignore]
    except ImportError:
        assess_summary = None
    if assess_summary is not None:

        def assess(archived: list[dict], text: str, context: list[dict] | None) -> tuple[list[dict], list[dict]]:
            result = assess_summary(archived, text, context_messages=context).to_dict()
            return list(result["findings"]), list(result["claims"])

        return "assess_summary", assess
    from agent_compression import check_drift

    def check(archived: list[dict], text: str, context: list[dict] | None) -> tuple[list[dict], None]:
        return [f.to_dict() for f in check_drift(archived, text, context_messages=context)], None

    return "check_drift", check


def score(
    runs: list[dict[str, Any]], splits: dict[str, Any], real: Path, detector: Detector, notes: list[str]
) -> list[Scored]:
    """Run the detector on every labelled summary whose run is here and match its output to the labels."""
    heldout = set(splits.get("heldout_runs") or ())
    out = []
    for run in runs:
        messages = load_messages(run, real)
        if messages is None:
            notes.append(f"skipped {run['run']} ({len(run['summaries'])} summaries): {run['file']} not found")
            continue
        notes.extend(check_quotes(run, messages))
        for s in run["summaries"]:
            archived = messages[s["start"] : s["end"]]
            findings, claims = detector(archived, s["text"], messages)
            scored = Scored(
                s["id"],
                run["run"],
                run["family"],
                s["language"],
                "heldout" if run["run"] in heldout else "dev",
                s["items"],
                findings,
                claims,
            )
            out.append(match(scored, s["text"]))
    return out


def groups(scored: list[Scored], splits: dict[str, Any], fold: str | None) -> dict[str, list[Scored]]:
    """Named subsets to report: everything, each split, family, language, and each fold's two sides."""
    out: dict[str, list[Scored]] = {"all": scored}
    for attr, values in (("split", ("dev", "heldout")), ("family", FAMILIES), ("language", LANGUAGES)):
        for value in values:
            out[f"{attr}={value}"] = [s for s in scored if getattr(s, attr) == value]
    folds = splits.get("folds") or {}
    for name in [fold] if fold else sorted(folds):
        spec = folds[name]
        for side in ("tune", "measure"):
            out[f"fold={name}:{side}"] = [s for s in scored if s.family in spec[side]]
    return {k: v for k, v in out.items() if v}


def _pct(num: int, den: int) -> str:
    return f"{100 * num / den:5.1f}%" if den else "   n/a"


def print_report(detector: str, named: dict[str, list[Scored]], verbose: bool) -> None:
    print(f"detector: {detector}")
    head = f"{'group':<34} {'sums':>4} {'errors':>6} {'caught':>6} {'recall':>6} {'by alarm':>8} {'flagged':>7}"
    print(head + f" {'faithful':>8} {'alarmed':>7} {'rate':>6} {'high':>4} {'unplaced':>8}")
    for name, subset in named.items():
        t = totals(subset)
        print(
            f"{name:<34} {t.summaries:>4} {t.errors:>6} {t.caught:>6} {_pct(t.caught, t.errors):>6}"
            f" {t.caught_by_alarm:>8} {t.flagged:>7} {t.faithful:>8} {t.alarmed:>7}"
            f" {_pct(t.alarmed, t.faithful):>6} {t.case_opening:>4} {t.unplaced_alarms:>8}"
        )
    whole = totals(next(iter(named.values())))
    _kind_table(whole, "all")
    for name, subset in named.items():
        if name.endswith(":measure") and sum(k.endswith(":measure") for k in named) == 1:
            _kind_table(totals(subset), name)
    if whole.with_claims:
        print(
            f"claims: errors on a line with a contradicted/unsupported verdict {whole.errors_negated}/{whole.errors};"
            f" faithful items {whole.faithful_negated}/{whole.faithful}"
        )
    if verbose:
        _details(next(iter(named.values())))


def _kind_table(t: Totals, title: str) -> None:
    print(f"\n{'kind (' + title + ')':<40} {'errors':>6} {'caught':>6} {'recall':>6}")
    for kind in ERROR_KINDS:
        caught, n = t.by_kind.get(kind, [0, 0])
        print(f"{kind:<40} {n:>6} {caught:>6} {_pct(caught, n):>6}")


def _details(scored: Iterable[Scored]) -> None:
    print("\nmisses and false alarms:")
    for s in scored:
        for i, item in enumerate(s.items):
            if item["kind"] != "faithful" and not s.caught(i):
                print(f"  miss  {s.summary_id} {item['kind']}: {item['quote'][:90]!r}")
            elif item["kind"] == "faithful" and s.alarmed(i):
                kinds = ",".join(sorted({s.findings[f]["kind"] for f in s.pointed[i]}))
                print(f"  alarm {s.summary_id} ({kinds}): {item['quote'][:90]!r}")


def extractive(real: Path, detector: Detector, notes: list[str]) -> dict[str, Any]:
    """Findings by severity on faithful extractive summaries of every real run at 8k and 16k."""
    from agent_compression import CompressionConfig, Compressor, ExtractiveSummarizer

    rows = []
    for path in sorted(real.glob("*.json")) if real.is_dir() else []:
        data = json.loads(path.read_text(encoding="utf-8"))
        messages = data.get("messages") if isinstance(data, dict) else None
        if not isinstance(messages, list):
            continue
        for window in EXTRACTIVE_WINDOWS:
            result = Compressor(CompressionConfig(context_window_tokens=window), ExtractiveSummarizer()).compress(
                messages
            )
            if result.archive is None or not result.summary_text:
                notes.append(f"{path.name} at {window}: not summarized ({', '.join(result.warning_codes())})")
                continue
            findings, _ = detector(result.archive.messages, result.summary_text, messages)
            counts = {sev: sum(1 for f in findings if f["severity"] == sev) for sev in ("high", "medium", "low")}
            rows.append({"run": path.stem, "window": window, **counts})
    if not rows:
        notes.append(f"no real runs under {real}: nothing measured")
    return {
        "summaries": len(rows),
        **{sev: sum(r[sev] for r in rows) for sev in ("high", "medium", "low")},
        "rows": rows,
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--split", choices=("dev", "heldout", "all"), default="dev")
    parser.add_argument("--fold", help="report only this fold's two sides (names in splits.json)")
    parser.add_argument("--real", type=Path, default=DEFAULT_REAL, help="folder of the real runs")
    parser.add_argument("--json", action="store_true", help="print the numbers as JSON")
    parser.add_argument("--extractive", action="store_true", help="count findings on extractive summaries")
    parser.add_argument("--verbose", "-v", action="store_true", help="list misses and false alarms")
    args = parser.parse_args(argv)
    runs, splits = load_set()
    problems = validate(runs, splits)
    if problems:
        print("\n".join(problems), file=sys.stderr)
        return 2
    if args.fold and args.fold not in (splits.get("folds") or {}):
        parser.error(f"unknown fold {args.fold!r}; known: {', '.join(sorted(splits['folds']))}")
    name, detector = default_detector()
    notes: list[str] = []
    if args.extractive:
        out = extractive(args.real, detector, notes)
        if args.json:
            print(json.dumps({"detector": name, **out, "notes": notes}, indent=1))
        else:
            for row in out["rows"]:
                counts = f"high {row['high']:>3} medium {row['medium']:>3} low {row['low']:>4}"
                print(f"{row['run']:<44} {row['window']:>6} {counts}")
            print(f"detector: {name}; {out['summaries']} extractive summaries: high {out['high']} (target <= 2),")
            print(f"  medium {out['medium']}, low {out['low']}")
            print("\n".join(notes))
        return 0
    scored = [s for s in score(runs, splits, args.real, detector, notes) if args.split in ("all", s.split)]
    named = groups(scored, splits, args.fold)
    if args.json:
        numbers = {k: totals(v).as_dict() for k, v in named.items()}
        print(json.dumps({"detector": name, "split": args.split, "groups": numbers, "notes": notes}, indent=1))
        return 0
    print(f"split: {args.split}; labelled summaries scored: {len(scored)}")
    if named:
        print_report(name, named, args.verbose)
    print("\n".join(notes))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
