"""Patterns shared by fact extraction, the extractive summarizer and drift checks: one definition each.

What a path, an identifier, an error line, a file written by a shell command and a tool that writes,
runs or reads look like. Every finder here is linear in its input and cheap on text that cannot
match: error lines are found from literal words located in one Aho-Corasick pass (a regex
alternation of forty words, or forty ``str.find``, is ten times slower on large tool output), paths
only in tokens holding a separator.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from functools import lru_cache

from ahocorasick_rs import AhoCorasick, MatchKind

_PATH = re.compile(
    r"(?<![A-Za-z0-9_.:/\\-])(?:"
    r"(?:~|\.{1,2})?/(?:[A-Za-z0-9_.@+-]+/)*[A-Za-z0-9_.@+-]*[A-Za-z0-9_]"  # /abs, ./rel, ~/home
    # rel/with.ext; the file name may hold CJK (src/发票模板.html), directories may not (修改deploy/x.sh脚本)
    r"|(?:[A-Za-z0-9_@+-][A-Za-z0-9_.@+-]*/)+[A-Za-z0-9_.@+\u3400-\u9fff-]*\.[A-Za-z][A-Za-z0-9]{0,7}"
    r"|(?:[A-Za-z0-9_@+-][A-Za-z0-9_.@+-]*/){2,}[A-Za-z0-9_.@+-]*[A-Za-z0-9_]"  # a/b/c
    r"|[A-Za-z]:\\(?:[A-Za-z0-9_. -]+\\)*[A-Za-z0-9_.-]+"  # C:\windows
    r")",
    re.ASCII,
)
# ..., "s/old/new/g" (a sed or perl substitution, not a path)
_PATH_NOISE = re.compile(
    r"^/+$|^\.+/?$|^/(?:s|g|i|n|r|t)$|^\d+(?:/\d+)+$|^[A-Za-z]/[A-Za-z]$|^s/[^/]*/[^/]*(?:/[gimpx]*)?$", re.ASCII
)

_IDENTIFIER = re.compile(
    r"`(?P<code>[^`\n]{2,80})`"
    r"|(?P<ticket>\b[A-Z][A-Z0-9]{1,9}-\d{1,6}\b)"
    r"|(?P<call>\b(?:call|toolu|fc)_[A-Za-z0-9]{4,40}\b)"
    r"|(?P<version>\bv\d+(?:\.\d+){1,3}(?:[-+][A-Za-z0-9.]+)?\b|\b\d+\.\d+\.\d+(?:[-+][A-Za-z0-9.]+)?\b)"
    r"|(?P<hash>\b(?=[0-9a-f]*[a-f])(?=[0-9a-f]*[0-9])[0-9a-f]{7,40}\b)"
    r"|(?P<train>\b[GDCZTKY]\d{1,4}\b|\b(?:CA|MU|CZ|HU|ZH|MF|FM|3U|SC|UA|AA|DL|BA|LH)\d{3,4}\b)"
    r"|(?P<func>\b[A-Za-z_][A-Za-z0-9_]*(?:\.[A-Za-z_][A-Za-z0-9_]*)*\(\))"
    # amounts of money and data; a duration or a count on its own ("4 s", "30s", "3 retries", "2 晚") is no
    # identifier: it names nothing to look up
    r"|(?P<qty>\b\d+(?:\.\d+)?\s?(?:KB|MB|GB|TB|KiB|MiB|GiB|kb|mb|gb|%|USD|EUR|CNY|RMB)\b"
    r"|\d+(?:\.\d+)?\s?(?:元|块钱|万元|%))",
    re.ASCII,
)

#: a server error answered to a request, its status in group 1: "GET /healthz -> 503 (redis: down)"
SERVER_ERROR = re.compile(r"(?:->|→|HTTP/\d(?:\.\d)?)\s*(5\d\d)\b")
#: words that error lines hold, case-sensitive (a case-insensitive search is several times slower on
#: big output); with :data:`SERVER_ERROR` and ``timeout after <n>``, found in one pass (:func:`find_error_lines`)
ERROR_WORDS: tuple[str, ...] = (
    *("Error", "ERROR", "Exception", "FAIL", "Fail", "fail", "Fatal", "fatal", "FATAL", "panic", "Traceback"),
    *("exit code", "exit status", "exited with", "Segmentation fault", "command not found", "No such file"),
    *("Permission denied", "Killed", "OOM", "报错", "失败", "错误", "异常", "出错", "崩溃"),
    # exceptions whose class name says neither Error nor Exception, named by their module
    # (django.core.exceptions.ImproperlyConfigured, psycopg.errors.UniqueViolation, Model.DoesNotExist)
    *("exceptions.", "errors.", ".exc.", "DoesNotExist", "Caused by", "Uncaught", "Unhandled", "Timeout"),
    *("timed out", "refused"),
)
# a server error answered to a request ("GET /healthz -> 503 (redis: down)", "HTTP/1.1 502 Bad Gateway"), a
# timeout with its value; each only where one of its literal needles is
_ERROR_SHAPES = re.compile(SERVER_ERROR.pattern + r"|timeout after \d")
_ERROR_SHAPE_NEEDLES = ("->", "→", "HTTP/", "timeout after ")
#: the same as one pattern, for short texts (a line, a summary item)
ERROR_HINT = re.compile("|".join(map(re.escape, ERROR_WORDS)) + "|" + _ERROR_SHAPES.pattern)
_ERROR_FINDER = AhoCorasick([*ERROR_WORDS, *_ERROR_SHAPE_NEEDLES], matchkind=MatchKind.LeftmostFirst)
_FIRST_SHAPE = len(ERROR_WORDS)
_EXIT_ONLY = re.compile(r"^\W*exit(?:ed)?\s+(?:code|status|with)\s*[:=]?\s*-?\d+\W*$", re.I)
_EXIT_ZERO = re.compile(r"\bexit(?:ed)?\s+(?:code|status|with)\s*[:=]?\s*0\b")
_TRACEBACK_HEAD = re.compile(r"^(?:[\w ]{1,20}:\s*)?Traceback \(most recent call last\):?\s*$")
_ERROR_NOISE = re.compile(r"^\s*(?:#|//)|\b(?:0 failed|no errors?|without errors?|0 errors?)\b|没有报错|无错误", re.I)

_EXCEPTION_LINE = re.compile(
    r"^(?:E\s+)?(?:[A-Za-z_][\w.]*(?:Error|Exception|Exit|Interrupt|Fault|Failure|Warning|DoesNotExist|Timeout)\b"
    r"|[a-z_]\w*(?:\.\w+)*\.[A-Z]\w+:\s"  # a qualified exception class and its message
    r"|Caused by:|(?:FAILED|ERROR|FATAL|panic|fatal|error)(?:\[\w+\])?\b[:\s])"
)
_COUNTER_LINE = re.compile(
    r"\b\d+\s+(?:failed|errors?|passed|failures?|skipped|warnings?)\b|^\W*exit(?:ed)?\s+(?:code|status)|^[=_*-]{3,}",
    re.I,
)
_DIGITS = re.compile(r"\d+(?:[.,:]\d+)*")
#: bound on the size of one tool output scanned for errors (head and tail beyond it are still read)
ERROR_SCAN_CHARS = 400_000

# files a shell command writes: "> x.py", "tee -a x.py", "sed -i 's/a/b/' x.py", "perl -pi -e '…' x.py", "touch x.py"
_SHELL_WRITE = re.compile(
    r"(?:(?<![<>&0-9-])>>?|\btee\b(?:\s+-a)?|\bsed\s+(?:-[^i\s]*\s+)*-i\S*(?:\s+-e)?\s+(?:'[^']*'|\"[^\"]*\"|\S+)"
    r"|\bperl\s+-\w*i\w*(?:\s+-e)?\s+(?:'[^']*'|\"[^\"]*\"|\S+)|\b(?:touch|truncate\s+-s\s*\S+|patch|rm(?:\s+-\w+)?))"
    r"\s*(?P<file>[\w@+~.][\w@+./~-]*)"
)
_HEREDOC = re.compile(r"<<-?\s*['\"]?(\w+)['\"]?")
_FILE_EXTENSIONS = (
    "py|pyi|js|mjs|cjs|ts|tsx|jsx|go|rs|java|kt|rb|php|c|h|cc|cpp|hpp|cs|swift|scala|sh|bash|zsh|ps1|sql|html|htm"
    "|css|scss|vue|svelte|yaml|yml|json|jsonl|toml|ini|cfg|conf|env|md|rst|txt|csv|xml|lock|gradle|proto|tf|ipynb"
)
# a bare file name (no directory): export_utils.py, settings_local.py
_BARE_FILE = re.compile(r"(?<![\w@+./~\\-])[\w@+-][\w@+.-]*\.(?:" + _FILE_EXTENSIONS + r")(?![\w/\\-])", re.ASCII)
_FILE_SHAPE = re.compile(r"^[\w@+~.-]*(?:/[\w@+.-]+)*\.(?:" + _FILE_EXTENSIONS + r")$|/", re.ASCII)


def windowed(text: str, head: int, tail: int) -> str:
    """``text`` itself when short, else its first ``head`` and last ``tail`` characters joined by a newline."""
    if len(text) <= head + tail:
        return text
    return text[:head] + "\n" + text[-tail:]


def find_paths(text: str) -> list[str]:
    """File paths in ``text`` (absolute, relative with an extension, ``a/b/c``, Windows), in order."""
    found = []
    # only whitespace-separated tokens holding a separator go through the (costly) path pattern
    for token in text.split():
        if "/" not in token and "\\" not in token:
            continue
        for m in _PATH.finditer(token):
            p = m.group(0).rstrip(".")
            if len(p) >= 3 and not _PATH_NOISE.match(p) and "//" not in p:
                found.append(p)
    return found


def find_identifiers(text: str) -> list[str]:
    """Identifiers in ``text``: backticked code, ticket ids, call ids, versions, hashes, train/flight numbers,
    ``function()`` names, amounts of money and data sizes (durations and counts are not identifiers)."""
    found = []
    for m in _IDENTIFIER.finditer(text):
        value = m.group(0)
        if (
            m.lastgroup == "hash"
            and text.startswith("]", m.end())
            and "[secret:" in text[max(0, m.start() - 40) : m.start()]
        ):
            continue  # the digest of a masked secret's placeholder is not an identifier
        if m.lastgroup == "code":
            value = m.group("code").strip()
            if not value or " " in value.strip() and len(value) > 40:
                continue
        found.append(value)
    return found


def _exception_line(text: str, pos: int) -> tuple[str, int]:
    """The exception line that ends a traceback starting before ``pos``: its first unindented line."""
    limit = min(len(text), pos + 20_000)
    while pos < limit:
        end = text.find("\n", pos)
        end = limit if end < 0 or end > limit else end
        line = text[pos:end]
        if line.strip() and not line[:1].isspace():
            return line.strip(), end + 1
        pos = end + 1
    return "", pos


def has_error_hint(text: str) -> bool:
    """Cheap check: does ``text`` hold a word that error lines contain (Error, FAILED, exit code, 报错 ...)?"""
    return bool(_hint_starts(text))


def _hint_starts(text: str) -> list[tuple[int, int]]:
    """(start, end) of the error words and error shapes in ``text``, in order, none overlapping another:
    one Aho-Corasick pass, then the shapes' needles checked by their pattern where they stand."""
    found = []
    for word, start, end in _ERROR_FINDER.find_matches_as_indexes(text):
        if word >= _FIRST_SHAPE:
            shape = _ERROR_SHAPES.match(text, start)
            if shape is None:
                continue
            end = shape.end()
        found.append((start, end))
    return found


def find_error_lines(text: str) -> list[str]:
    """Error lines in ``text``: the last line of a traceback, ``Error:``/``Exception``/``FAILED``, non-zero exit
    codes, 报错/失败 ... (stripped, each once, in order; noise such as "0 failed" or "exit code 0" skipped)."""
    lines: list[str] = []
    seen: set[str] = set()
    pos = 0
    for hit_start, hit_end in _hint_starts(text):
        if hit_start < pos:
            continue  # on a line already read
        start = text.rfind("\n", 0, hit_start) + 1
        end = text.find("\n", hit_end)
        end = len(text) if end < 0 else end
        pos = end + 1
        line = text[start:end].strip()
        if _TRACEBACK_HEAD.match(line):
            line, pos = _exception_line(text, pos)
        if not line or line in seen or _ERROR_NOISE.search(line):
            continue
        if _EXIT_ZERO.search(line) and not ERROR_HINT.search(_EXIT_ZERO.sub("", line)):
            continue
        seen.add(line)
        lines.append(line)
    return lines


def _error_rank(line: str) -> int:
    if _EXCEPTION_LINE.match(line):
        return 3
    if _COUNTER_LINE.search(line):
        return 1
    return 2


def number_key(text: str) -> str:
    """``text`` with every number replaced by ``#``: lines that differ only in numbers share a key."""
    return _DIGITS.sub("#", text)


def salient_error_lines(text: str, limit: int = 3) -> list[str]:
    """The ``limit`` most telling error lines of a (tool) output, in order of appearance.

    The whole text is scanned, up to :data:`ERROR_SCAN_CHARS` (its head and tail beyond that), in
    linear time. Exception and ``FAILED …`` lines outrank other error lines, which outrank counters
    (``1 failed, 530 passed in 3.2s``) and exit codes; lines that differ only in numbers count once
    (the latest); among equals the latest wins.
    """
    lines = find_error_lines(windowed(text, ERROR_SCAN_CHARS * 3 // 4, ERROR_SCAN_CHARS // 4))
    latest: dict[str, tuple[int, str]] = {}
    for position, line in enumerate(lines):
        latest[number_key(line)] = (position, line)
    ranked = sorted(latest.values(), key=lambda pl: (_error_rank(pl[1]), pl[0]))
    if any(_error_rank(line) > 1 for _, line in ranked):  # "exit code 1" says little next to its cause
        ranked = [pl for pl in ranked if not _EXIT_ONLY.match(pl[1])]
    return [line for _, line in sorted(ranked[-limit:])] if limit > 0 else []


def shell_written_files(command: str) -> list[str]:
    """Files a shell command creates or changes (``cat > x.py``, ``sed -i … x.py``, ``tee x.py``, ``touch``),
    heredoc bodies skipped; bare names included."""
    found: list[str] = []
    for line in _outside_heredocs(command):
        for m in _SHELL_WRITE.finditer(line):
            name = m.group("file").rstrip(".,;")
            if _FILE_SHAPE.search(name) and not name.startswith("/dev/") and name not in found:
                found.append(name)
    return found


def _outside_heredocs(command: str) -> Iterator[str]:
    """The lines of a shell command, without the bodies of its heredocs (``cat <<EOF > x.py ... EOF``)."""
    ending: str | None = None
    for line in command.splitlines():
        if ending is not None:
            if line.strip() == ending:
                ending = None
            continue
        heredoc = _HEREDOC.search(line)
        if heredoc:
            ending = heredoc.group(1)
        yield line


_QUOTED = re.compile(r"'[^'\n]*'|\"[^\"\n]*\"")


def shell_words(command: str) -> str:
    """``command`` without heredoc bodies and quoted strings (``sed 's/a/b/'`` expressions are not paths)."""
    return "\n".join(
        _QUOTED.sub(" ", line) if "'" in line or '"' in line else line for line in _outside_heredocs(command)
    )


def find_file_names(text: str) -> list[str]:
    """Paths (see :func:`find_paths`) and bare file names with a known extension (``export_utils.py``)."""
    found = find_paths(text)
    if "." in text:
        found += [m.group(0) for m in _BARE_FILE.finditer(text)]
    return found


# ---------------------------------------------------------------- tools, by name

#: a tool that runs commands: ``bash``, ``terminal``, ``run_shell``, ``exec_command``, ``powershell``
SHELL_TOOL = re.compile(r"terminal|shell|bash|exec|command|run|cmd|powershell|console|sh$", re.I)
#: a tool that changes files or records: ``write_file``, ``str_replace_editor``, ``apply_patch``, ``delete_x``
WRITE_TOOL = re.compile(r"write|edit|patch|create|replace|apply|update|save|delete|remove|move|rename", re.I)
#: a tool that only reads: ``read_file``, ``view``, ``list_dir``, ``search_files``, ``get_order``
READ_TOOL = re.compile(r"read|view|open|cat|show|get|list|search|grep|find", re.I)


@lru_cache(maxsize=512)
def is_shell_tool(name: str) -> bool:
    """Whether a tool of this name runs commands (its arguments hold a command line)."""
    return SHELL_TOOL.search(name) is not None


@lru_cache(maxsize=512)
def is_write_tool(name: str) -> bool:
    """Whether a tool of this name changes files or records (what it names is edited, not read)."""
    return WRITE_TOOL.search(name) is not None


@lru_cache(maxsize=512)
def is_read_tool(name: str) -> bool:
    """Whether a tool of this name only reads (checked after :func:`is_write_tool`)."""
    return READ_TOOL.search(name) is not None
