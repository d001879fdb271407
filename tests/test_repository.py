"""The repository stands alone: nothing tracked points at a machine it was made on."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
#: paths that exist only on someone's machine (built from parts so this file does not match itself)
MACHINE_PATHS = [p.encode() for p in ("/" + "work/", ".." + "/shared", "/" + "root/", "/" + "home/", "/" + "Users/")]


def tracked_files() -> list[str]:
    result = subprocess.run(["git", "ls-files", "-z"], cwd=ROOT, capture_output=True, check=False)
    if result.returncode != 0:
        pytest.fail(f"git ls-files failed (the suite runs in a git checkout): {result.stderr.decode()}")
    return [name for name in result.stdout.decode().split("\0") if name]


def test_no_tracked_file_names_a_machine_path():
    found = []
    for name in tracked_files():
        path = ROOT / name
        if not path.is_file():  # deleted in the working tree, not yet committed
            continue
        data = path.read_bytes()
        for line_number, line in enumerate(data.splitlines(), start=1):
            for pattern in MACHINE_PATHS:
                if pattern in line:
                    found.append(f"{name}:{line_number}: {pattern.decode()}")
    assert found == []


def test_no_coverage_data_is_tracked():
    assert not [name for name in tracked_files() if Path(name).name.startswith(".coverage")]


def test_the_demo_sessions_are_what_make_demo_writes():
    """The committed files and their generator agree (edit make_demo.py, then run it)."""
    from console.demo.make_demo import render
    from tests.samples import SAMPLES

    written = render()
    assert sorted(written) == sorted(p.name for p in SAMPLES.glob("*.json*"))
    for name, text in written.items():
        assert (SAMPLES / name).read_text(encoding="utf-8") == text, f"{name}: run console/demo/make_demo.py"
    assert sum(len(text.encode()) for text in written.values()) < 2_000_000  # a few MB at most
