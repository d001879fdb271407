"""Cue lists per language, kept as data (``agent_compression/data/cues/<name>.txt``) and read at import.

A cue file holds one regular expression per line (Python syntax); blank lines and lines starting with
``#`` are comments, white space around a line is ignored. :func:`cue_pattern` joins a file's lines into
one compiled pattern: a text holds the cue when the pattern finds any of them. Fact extraction reads
``constraint_en`` / ``constraint_zh`` (what a user's standing rule looks like); the drift checks read the
same files, so pinning and drift agree on what a rule is.
"""

from __future__ import annotations

import re
from functools import cache
from importlib.resources import files


def cue_lines(name: str) -> list[str]:
    """The expressions of cue file ``name`` (without ``.txt``), in file order."""
    text = files(__package__).joinpath("data", "cues", f"{name}.txt").read_text(encoding="utf-8")
    return [line.strip() for line in text.splitlines() if line.strip() and not line.lstrip().startswith("#")]


@cache
def cue_pattern(name: str) -> re.Pattern[str]:
    """One pattern matching any expression of cue file ``name``; a bad expression names its file and line."""
    lines = cue_lines(name)
    for line in lines:
        try:
            re.compile(line)
        except re.error as exc:
            raise ValueError(f"cue file {name}.txt: bad expression {line!r}: {exc}") from exc
    return re.compile("|".join(f"(?:{line})" for line in lines))
