"""Cue words (data files, per language) and the terms texts are compared by.

The cues live in ``agent_compression/data/drift_cues.{en,zh}.json``: for each category ("prohibition", "hedge",
"done" ...) the words that signal it, and ``concepts``: language-neutral names ("deploy", "modify") with the
words of each language that mean them, which is how an English summary line meets a Chinese user turn.
English cues match on word boundaries (``*`` ends a prefix; a lone ``*`` stands for one or two words); Chinese
cues match as substrings. The language of a text is :func:`agent_compression.language.detect_language`.
"""

from __future__ import annotations

import json
import re
from functools import cache, lru_cache
from importlib import resources

from ..language import CJK, Language, detect_language

CATEGORIES = (
    "prohibition",
    "requirement",
    "negation",
    "hedge",
    "request",
    "plan",
    "done",
    "pass",
    "fail",
    "pending",
    "test",
    "cause",
    "location",
    "user",
    "agent",
)

_WORD = re.compile(r"[a-z0-9_][a-z0-9_./@#:+-]*[a-z0-9_]|[a-z0-9_]")
_CJK_RUN = re.compile(r"[\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff]+")
_SUFFIXES = ("ations", "ation", "ments", "ment", "ings", "ing", "ies", "ied", "ed", "es", "s", "ly")


@cache
def cues(language: Language) -> dict[str, object]:
    """The cue file of ``language`` (``en`` or ``zh``)."""
    source = resources.files("agent_compression") / "data" / f"drift_cues.{language}.json"
    data: dict[str, object] = json.loads(source.read_text(encoding="utf-8"))
    return data


def _en_pattern(words: list[str]) -> re.Pattern[str]:
    parts = []
    for phrase in sorted(words, key=len, reverse=True):
        tokens = []
        for token in phrase.split():
            if token == "*":
                tokens.append(r"\w+(?:\s+\w+)?")
            elif token.endswith("*"):
                tokens.append(re.escape(token[:-1]) + r"\w*")
            else:
                tokens.append(re.escape(token))
        parts.append(r"\s+".join(tokens))
    return re.compile(r"(?<![\w'])(?:" + "|".join(parts) + r")(?![\w'])")


@cache
def _patterns(language: Language, category: str) -> re.Pattern[str] | tuple[str, ...]:
    words = cues(language).get(category, [])
    assert isinstance(words, list)
    if language == "en":
        return _en_pattern([w.lower() for w in words])
    return tuple(sorted(words, key=len, reverse=True))


def cue_spans(text: str, category: str, language: Language | None = None) -> list[tuple[int, int]]:
    """Where the cues of ``category`` occur in ``text`` (both languages unless ``language`` is given)."""
    spans: list[tuple[int, int]] = []
    for lang in (language,) if language else ("en", "zh"):
        pattern = _patterns(lang, category)
        if isinstance(pattern, re.Pattern):
            spans += [m.span() for m in pattern.finditer(text.lower())]
        elif CJK.search(text):
            for word in pattern:
                start = text.find(word)
                while start >= 0:
                    spans.append((start, start + len(word)))
                    start = text.find(word, start + len(word))
    return sorted(spans)


def has_cue(text: str, category: str, language: Language | None = None) -> bool:
    """Whether ``text`` holds a cue of ``category``."""
    return bool(cue_spans(text, category, language))


def cue_count(text: str, category: str) -> int:
    return len(cue_spans(text, category))


@cache
def _concepts() -> tuple[tuple[str, re.Pattern[str], tuple[str, ...]], ...]:
    out = []
    en = cues("en").get("concepts", {})
    zh = cues("zh").get("concepts", {})
    assert isinstance(en, dict) and isinstance(zh, dict)
    for name in sorted(set(en) | set(zh)):
        out.append((name, _en_pattern([w.lower() for w in en.get(name, [])] or ["\u0000"]), tuple(zh.get(name, []))))
    return tuple(out)


def concepts(text: str) -> set[str]:
    """The language-neutral concepts ``text`` names ("deploy" for "deployed" and for "部署")."""
    lower = text.lower()
    has_cjk = bool(CJK.search(text))
    return {name for name, en, zh in _concepts() if en.search(lower) or (has_cjk and any(word in text for word in zh))}


def stem(word: str) -> str:
    """A crude English stem: "deployed", "deploys", "deploying" -> "deploy"."""
    if len(word) <= 4 or not word.isalpha():
        return word
    for suffix in _SUFFIXES:
        if word.endswith(suffix) and len(word) - len(suffix) >= 3:
            word = word[: -len(suffix)]
            break
    if len(word) > 3 and word[-1] == word[-2] and word[-1] not in "ls":
        word = word[:-1]  # "stopped" -> "stopp" -> "stop"
    return word


@cache
def _stop(language: Language) -> frozenset[str]:
    words = cues(language).get("stop", [])
    assert isinstance(words, list)
    return frozenset(words)


def words(text: str) -> set[str]:
    """English word stems and Chinese character bigrams of ``text``, without stop words."""
    lower = text.lower()
    stop_en = _stop("en")
    out = {stem(w) for w in _WORD.findall(lower) if w not in stop_en and len(w) > 1}
    if CJK.search(text):
        stop_zh = _stop("zh")
        for run in _CJK_RUN.findall(text):
            chars = [c for c in run if c not in stop_zh]
            run = "".join(chars)
            out |= {run[i : i + 2] for i in range(len(run) - 1)}
            if len(run) == 1:
                out.add(run)
    return out


@lru_cache(maxsize=20_000)
def terms(text: str) -> frozenset[str]:
    """What a text is about: :func:`words` and, prefixed ``@``, its :func:`concepts`."""
    return frozenset(words(text) | {"@" + c for c in concepts(text)})


def overlap(needle: frozenset[str] | set[str], hay: frozenset[str] | set[str]) -> float:
    """Share of ``needle``'s terms found in ``hay`` (0 when ``needle`` is empty)."""
    return len(needle & hay) / len(needle) if needle else 0.0


def language_of(text: str) -> Language:
    return detect_language(text)
