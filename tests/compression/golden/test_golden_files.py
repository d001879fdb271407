"""Whole-pipeline runs compared exactly with the expected-output files in ``expected/`` (see ``cases.py``).

A difference fails with a unified diff of the file; when the change is intended, regenerate with
``.venv/bin/python -m tests.compression.golden.regen`` (or ``make golden``) and review the diff.
"""

from __future__ import annotations

import difflib

import pytest

from tests.compression.golden.cases import CASES, EXPECTED, FILES, Case, render, run

REGEN = "python -m tests.compression.golden.regen"


def diff(expected: str, actual: str, name: str, limit: int = 120) -> str:
    lines = list(
        difflib.unified_diff(expected.splitlines(), actual.splitlines(), f"expected/{name}", "actual", n=2, lineterm="")
    )
    if len(lines) > limit:
        lines = [*lines[:limit], f"... {len(lines) - limit} more diff lines"]
    return "\n".join(lines)


@pytest.mark.parametrize("case", CASES, ids=lambda case: case.name)
def test_the_pipeline_output_matches_the_expected_files(case: Case) -> None:
    folder = EXPECTED / case.name
    missing = [name for name in FILES if not (folder / name).is_file()]
    assert not missing, f"no expected {', '.join(missing)} for {case.name}: run {REGEN} {case.name}"
    actual = render(run(case))
    failures = []
    for name in FILES:
        expected = (folder / name).read_text(encoding="utf-8")
        if actual[name] != expected:
            failures.append(diff(expected, actual[name], f"{case.name}/{name}"))
    if failures:
        pytest.fail(
            f"{case.name} differs from its expected files (intended? run {REGEN} {case.name}):\n" + "\n".join(failures)
        )


def test_it_runs_the_same_twice() -> None:
    """The pinned clock and id are all the run takes from outside: two runs render the same files."""
    case = CASES[0]
    assert render(run(case)) == render(run(case))


def test_every_expected_folder_is_a_listed_case() -> None:
    folders = {p.name for p in EXPECTED.iterdir() if p.is_dir()}
    assert folders == {case.name for case in CASES}, f"stale folders: run {REGEN}"
