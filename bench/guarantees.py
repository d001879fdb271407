"""Output size guarantees on real agent runs: outputs over the trigger, per window.

Run: .venv/bin/python bench/guarantees.py --dir DIR [--windows 8000,16000,32000]
(or set ``REAL_RUNS_DIR``)

Reads every ``*.json`` run in ``--dir`` at run time (``{"messages": [...]}`` or a bare list; the runs
are reference data and never part of this repository), compresses each one that reaches the trigger once
per window with the offline summarizer and the strict profile, and counts:

- outputs over the trigger, split into those whose fixed part (system prompt, first and latest
  user messages, the smallest summary message) fits the trigger (each one a broken guarantee)
  and those where it cannot;
- outputs over the trigger that carry none of the warning codes saying so (unflagged);
- runs that saved nothing (tokens after >= before);
- outputs that do not validate under the strict profile.

Prints numbers only; nothing is asserted.
"""

from __future__ import annotations

import argparse
import json
import os
from pathlib import Path
from typing import Any

from agent_compression import CompressionConfig, Compressor, validate_messages
from agent_compression.boundaries import SUMMARY_OVERHEAD_TOKENS, fixed_part_tokens
from agent_compression.pipeline import MIN_SUMMARY_TOKENS

FLAGGED = {"fixed_part_over_trigger", "still_over_threshold", "no_token_savings", "nothing_to_compress"}


def load(path: Path) -> list[dict[str, Any]]:
    data = json.loads(path.read_text(encoding="utf-8"))
    return data["messages"] if isinstance(data, dict) else data


def fixed_tokens(messages: list[dict[str, Any]]) -> int:
    """System messages at the start, the first and the latest user message, and the smallest summary message:
    what every output holds. Over the trigger, no output can fit (the library flags it)."""
    return fixed_part_tokens(messages) + SUMMARY_OVERHEAD_TOKENS + MIN_SUMMARY_TOKENS


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dir", default=os.environ.get("REAL_RUNS_DIR", ""), help="a directory of chat-format runs")
    parser.add_argument("--windows", default="8000,16000,32000")
    args = parser.parse_args()
    files = sorted(Path(args.dir).glob("*.json")) if args.dir else []
    if not files:
        print("no runs given (--dir or REAL_RUNS_DIR): nothing to measure")
        return
    runs = [(f.name, load(f)) for f in files]
    print(f"{len(runs)} runs from {args.dir}")
    print("window  runs  over(fixed fits)  over(fixed too big)  unflagged  saved-nothing  invalid  max after/trigger")
    for window in (int(w) for w in args.windows.split(",")):
        config = CompressionConfig(context_window_tokens=window)
        trigger = config.trigger_tokens
        over_fits = over_big = unflagged = saved_nothing = invalid = 0
        worst = 0.0
        details = []
        measured = 0
        for name, messages in runs:
            compressor = Compressor(config, profile="strict")
            if not compressor.should_compress(messages):
                continue  # under the trigger: a runtime would not compress it
            measured += 1
            result = compressor.compress(messages)
            after = result.tokens_after
            worst = max(worst, after / trigger)
            if validate_messages(result.messages, "strict"):
                invalid += 1
            if after >= result.tokens_before:
                saved_nothing += 1
            if after > trigger:
                fits = fixed_tokens(messages) <= trigger
                over_fits += fits
                over_big += not fits
                if not FLAGGED & set(result.warning_codes()):
                    unflagged += 1
                details.append(
                    f"  {window}: {name} {result.tokens_before} -> {after} (trigger {trigger})"
                    f" fixed={fixed_tokens(messages)} {result.warning_codes()}"
                )
        print(
            f"{window:>6}  {measured:>4}  {over_fits:>16}  {over_big:>19}  {unflagged:>9}  {saved_nothing:>13}"
            f"  {invalid:>7}  {worst:>17.2f}"
        )
        for line in details:
            print(line)


if __name__ == "__main__":
    main()
