"""The summarizers the console offers, configured from settings, with a cooldown shared by all workers."""

from __future__ import annotations

import time

from django.conf import settings

from agent_compression import ExtractiveSummarizer, OpenAISummarizer, Summarizer
from agent_compression.extractive import EXTRACTIVE_VERSION
from agent_compression.prompt import PROMPT_VERSION

from ..errors import InvalidInput
from ..models import SummarizerCooldown

#: summarizer name -> the prompt versions it can run
PROMPT_VERSIONS = {"extractive": [EXTRACTIVE_VERSION], "openai": [PROMPT_VERSION]}


class DatabaseCooldown:
    """``CooldownState`` kept in the database (wall-clock seconds), so one 429 pauses every worker."""

    def get(self, key: str) -> float | None:
        return SummarizerCooldown.objects.filter(key=key).values_list("until", flat=True).first()

    def set(self, key: str, until: float | None) -> None:
        if until is None:
            SummarizerCooldown.objects.filter(key=key).delete()
        else:
            SummarizerCooldown.objects.update_or_create(key=key, defaults={"until": until})


def default_summarizer_name() -> str:
    return "openai" if settings.OPENAI_BASE_URL or settings.OPENAI_API_KEY else "extractive"


def build_summarizer(
    name: str | None = None, model: str | None = None, prompt_version: str | None = None
) -> Summarizer:
    """The summarizer called ``name`` (default: a model when one is configured, else the offline one)."""
    name = name or default_summarizer_name()
    if name not in PROMPT_VERSIONS:
        raise InvalidInput(f"unknown summarizer {name!r}; choose one of: {', '.join(PROMPT_VERSIONS)}")
    if prompt_version and prompt_version not in PROMPT_VERSIONS[name]:
        raise InvalidInput(
            f"summarizer {name!r} has no prompt version {prompt_version!r}; "
            f"available: {', '.join(PROMPT_VERSIONS[name])}"
        )
    if name == "extractive":
        if model:
            raise InvalidInput("the extractive summarizer uses no model; leave model empty")
        return ExtractiveSummarizer()
    if not (settings.OPENAI_BASE_URL or settings.OPENAI_API_KEY):
        raise InvalidInput("no model endpoint is configured (set OPENAI_BASE_URL and OPENAI_API_KEY)")
    return OpenAISummarizer(
        base_url=settings.OPENAI_BASE_URL or None,
        api_key=settings.OPENAI_API_KEY or "not-needed",
        model=model or settings.SUMMARY_MODEL,
        timeout=settings.SUMMARY_TIMEOUT,
        max_retries=settings.SUMMARY_MAX_RETRIES,
        cooldown=DatabaseCooldown(),
        cooldown_seconds=settings.SUMMARY_COOLDOWN_SECONDS,
        clock=time.time,
    )
