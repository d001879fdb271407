"""Rewrite the golden expected-output files: ``.venv/bin/python -m tests.compression.golden.regen [case ...]``.

Run it after a change meant to alter the pipeline's output, then read ``git diff tests/compression/golden/expected``
as part of the change. Without arguments every case is rewritten; cases no longer listed are removed.
"""

from __future__ import annotations

import shutil
import sys

from tests.compression.golden.cases import CASES, EXPECTED, write


def main(argv: list[str]) -> int:
    known = {case.name: case for case in CASES}
    unknown = [name for name in argv if name not in known]
    if unknown:
        print(f"unknown case(s): {', '.join(unknown)}; known: {', '.join(known)}", file=sys.stderr)
        return 2
    for case in [known[name] for name in argv] if argv else CASES:
        for path in write(case):
            print(path.relative_to(EXPECTED.parents[3]))
    if not argv and EXPECTED.is_dir():
        for folder in sorted(EXPECTED.iterdir()):
            if folder.is_dir() and folder.name not in known:
                shutil.rmtree(folder)
                print(f"removed {folder.relative_to(EXPECTED.parents[3])}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
