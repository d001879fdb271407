"""Judges: who decides a claim the rule comparators cannot type or decide.

:class:`RuleJudge` (the default) needs no model and answers ``cannot_tell``. :class:`ModelJudge` asks a model
behind an OpenAI-compatible endpoint, with the claim and its top evidence passages (:func:`top_passages`,
retrieved by term overlap in either language), for one fixed JSON answer; an answer that is late, malformed or
anything but the three allowed verdicts counts as ``cannot_tell``, never as an alarm.
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from typing import Any, Protocol, runtime_checkable
from urllib.parse import urlsplit

from ..types import Verdict
from .text import terms

#: how many passages a judge sees, and how long each may be
PASSAGES = 4
PASSAGE_CHARS = 600

_ANSWER = re.compile(r"\{[^{}]*\}")
#: what a model may answer, and the verdict each means
_ANSWERS = {
    "supported": Verdict.SUPPORTED,
    "contradicted": Verdict.CONTRADICTED,
    "not_found": Verdict.UNSUPPORTED,
}

_PROMPTS = {
    "en": (
        "You check one claim from a summary of an agent session against passages from the session. "
        'Answer with JSON only: {"verdict": "supported"} when a passage says it, {"verdict": "contradicted"} when '
        'a passage says the opposite, {"verdict": "not_found"} when no passage says either.'
    ),
    "zh": (
        "你要根据会话中的原文片段核对摘要里的一条陈述。只用 JSON 回答：原文支持它时回答 "
        '{"verdict": "supported"}，原文与它相反时回答 {"verdict": "contradicted"}，原文没有提到时回答 '
        '{"verdict": "not_found"}。'
    ),
}


@runtime_checkable
class Judge(Protocol):
    """Decides one claim from the passages retrieved for it. Must never raise: anything wrong is ``cannot_tell``."""

    name: str

    def judge(self, claim: str, passages: list[tuple[int, str]], language: str) -> str: ...


class RuleJudge:
    """The default: no model; what the comparators cannot decide stays undecided."""

    name = "rules"

    def judge(self, claim: str, passages: list[tuple[int, str]], language: str) -> str:
        return Verdict.CANNOT_TELL.value


class ModelJudge:
    """A model behind an OpenAI-compatible chat-completions endpoint (the ``openai`` package)."""

    def __init__(self, base_url: str | None, api_key: str | None, model: str, timeout: float = 20.0) -> None:
        self.base_url = base_url
        self.api_key = api_key or "unused"
        self.model = model
        self.timeout = timeout
        self.name = f"model:{model}"
        self._client: Any = None

    def _get_client(self) -> Any:
        if self._client is None:
            from openai import OpenAI

            self._client = OpenAI(base_url=self.base_url, api_key=self.api_key, timeout=self.timeout, max_retries=0)
        return self._client

    def messages(self, claim: str, passages: list[tuple[int, str]], language: str) -> list[dict[str, str]]:
        """The chat messages sent for one claim (the system prompt in the claim's language)."""
        quoted = "\n".join(f"[#{index}] {text[:PASSAGE_CHARS]}" for index, text in passages) or "(none)"
        label = ("摘要陈述", "原文片段") if language == "zh" else ("Claim", "Passages")
        return [
            {"role": "system", "content": _PROMPTS.get(language, _PROMPTS["en"])},
            {"role": "user", "content": f"{label[0]}: {claim}\n\n{label[1]}:\n{quoted}"},
        ]

    def judge(self, claim: str, passages: list[tuple[int, str]], language: str) -> str:
        try:
            response = self._get_client().chat.completions.create(
                model=self.model,
                messages=self.messages(claim, passages, language),
                temperature=0,
                max_tokens=40,
            )
            choices = getattr(response, "choices", None)
            content = choices[0].message.content if choices else None
        except Exception:  # noqa: BLE001 - an endpoint that fails or is slow decides nothing
            return Verdict.CANNOT_TELL.value
        return parse_answer(content)

    def __repr__(self) -> str:
        host = urlsplit(self.base_url).hostname if self.base_url else "api.openai.com"
        return f"ModelJudge({host!r}, {self.model!r})"


def parse_answer(content: object) -> str:
    """The verdict in a model's answer ``{"verdict": ...}``; ``cannot_tell`` for anything else."""
    if not isinstance(content, str):
        return Verdict.CANNOT_TELL.value
    match = _ANSWER.search(content)
    try:
        data = json.loads(match.group(0)) if match else None
    except ValueError:
        data = None
    answer = data.get("verdict") if isinstance(data, dict) else None
    verdict = _ANSWERS.get(answer.strip().lower()) if isinstance(answer, str) else None
    return (verdict or Verdict.CANNOT_TELL).value


def top_passages(claim: str, texts: Sequence[tuple[int, str]], limit: int = PASSAGES) -> list[tuple[int, str]]:
    """The ``limit`` texts sharing the most terms with ``claim`` (words, CJK bigrams and the bilingual concepts
    of :func:`agent_compression.drift.text.terms`, so an English claim finds a Chinese passage), best first."""
    wanted = terms(claim)
    if not wanted:
        return []
    scored = []
    for index, text in texts:
        shared = len(wanted & terms(text[:4_000]))
        if shared:
            scored.append((shared, -index, index, text))
    scored.sort(reverse=True)
    return [(index, text[:PASSAGE_CHARS]) for _, _, index, text in scored[:limit]]
