"""False positives of secret masking on real agent runs: how many spans are masked, of what kind, and which.

Run: .venv/bin/python bench/masking_real.py DIR_OR_FILES... [--show N]

Each argument is a run file (``{"meta": {...}, "messages": [...]}``, OpenAI chat messages) or a folder of
them. Real runs hold no secret (public SWE-bench and tau-bench trajectories), so every masked span is a
false positive: the report counts them by kind (``[secret:<kind>:...]``) per file and in all, and prints up
to ``--show`` of the raw spans per kind, so a reader can tell a git SHA, a hash, a path or an identifier from
a credential. It masks what the pipeline masks (every message: content, parts, tool-call arguments, by
``agent_compression.secrets.mask_messages``) and what the console masks in metadata (``mask_json``, when the
installed library has it).

Real runs rarely write a secret name next to a long random-looking word, so the report also puts each distinct
word of 20 to 120 characters it finds (git SHAs, hashes, paths, URLs, identifiers: what an unlabelled AWS
secret access key could be mistaken for) right after a secret name, ``the token <word>``, and counts how many
the library would then mask: the worst case of the "secret name near a credential shape" rule on real text.

To compare two versions of the library, run it with each on ``PYTHONPATH`` (the library is
``compression/``): ``PYTHONPATH=<other checkout>/compression .venv/bin/python bench/masking_real.py DIR``.
"""

from __future__ import annotations

import argparse
import difflib
import json
import re
import sys
from collections import Counter, defaultdict
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from agent_compression import secrets

PLACEHOLDER = re.compile(r"\[secret:([a-z_]+):[0-9a-f]{8}\]")
#: a long word: what an unlabelled credential could be mistaken for
WORD = re.compile(r"[^\s\"'`()<>\[\]{},;]{20,120}")


def run_files(paths: list[str]) -> list[Path]:
    files: list[Path] = []
    for given in paths:
        path = Path(given)
        files += sorted(path.glob("*.json")) if path.is_dir() else [path]
    return files


def strings(value: Any) -> Iterator[str]:
    if isinstance(value, str):
        yield value
    elif isinstance(value, dict):
        for item in value.values():
            yield from strings(item)
    elif isinstance(value, list):
        for item in value:
            yield from strings(item)


def masked_spans(before: str, after: str) -> Iterator[tuple[str, str]]:
    """(kind, raw text) of each span ``after`` replaced with a placeholder."""
    matcher = difflib.SequenceMatcher(None, before, after, autojunk=False)
    for op, a0, a1, b0, b1 in matcher.get_opcodes():
        if op == "equal":
            continue
        for match in PLACEHOLDER.finditer(after[b0:b1]):
            yield match.group(1), before[a0:a1]


def measure(data: dict[str, Any]) -> Counter[tuple[str, str]]:
    """(kind, raw span) -> how many times it was masked, over the messages and the metadata."""
    found: Counter[tuple[str, str]] = Counter()
    originals = list(strings(data.get("messages") or []))
    masked = list(strings(secrets.mask_messages(data.get("messages") or [])))
    mask_json = getattr(secrets, "mask_json", None)
    meta = data.get("meta") or {}
    originals += list(strings(meta))
    masked += list(strings(mask_json(meta) if mask_json else meta))
    for before, after in zip(originals, masked, strict=True):
        if before != after:
            found.update(masked_spans(before, after))
    return found


def worst_case(data: dict[str, Any]) -> tuple[set[str], set[str]]:
    """(every distinct long word, those masked when written right after "the token")."""
    words = {m.group(0) for text in strings(data) for m in WORD.finditer(text)}
    return words, {word for word in words if secrets.mask_secrets(f"the token {word}") != f"the token {word}"}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("paths", nargs="+", help="run files or folders of them")
    parser.add_argument("--show", type=int, default=5, help="raw spans shown per kind (0: none)")
    args = parser.parse_args(argv)
    files = run_files(args.paths)
    if not files:
        print("no run files found", file=sys.stderr)
        return 2
    total: Counter[str] = Counter()
    spans: dict[str, Counter[str]] = defaultdict(Counter)
    chars = 0
    runs: set[str] = set()
    near_masked: set[str] = set()
    print(f"{'file':48} {'chars':>9} {'masked':>7}  by kind")
    for path in files:
        data = json.loads(path.read_text(encoding="utf-8"))
        chars_here = sum(len(s) for s in strings(data))
        chars += chars_here
        found = measure(data)
        kinds: Counter[str] = Counter()
        for (kind, raw), n in found.items():
            kinds[kind] += n
            spans[kind][raw] += n
        total += kinds
        candidates, masked_near = worst_case(data)
        runs |= candidates
        near_masked |= masked_near
        listed = ", ".join(f"{k} {n}" for k, n in kinds.most_common()) or "-"
        print(f"{path.name[:48]:48} {chars_here:>9} {sum(kinds.values()):>7}  {listed}")
    print(f"{'all ' + str(len(files)) + ' files':48} {chars:>9} {sum(total.values()):>7}  "
          + (", ".join(f"{k} {n}" for k, n in total.most_common()) or "-"))  # fmt: skip
    print(
        f"\nworst case: {len(runs)} distinct words of 20-120 characters; "
        f"masked when written after 'the token': {len(near_masked)}"
    )
    for run in sorted(near_masked)[: args.show]:
        print(f"  {run!r}")
    if args.show:
        for kind, raws in sorted(spans.items()):
            print(f"\n{kind}: {len(raws)} distinct spans")
            for raw, n in raws.most_common(args.show):
                print(f"  {n:>4} x {raw[:100]!r}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
