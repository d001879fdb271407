"""Stage 4, summary: the summarizers and what they share.

- :func:`serialize_segment`: compact, masked, budgeted text of a segment (model input);
- :data:`PROMPT_VERSION` / :data:`PROMPT_HASH`: the versioned prompt;
- :func:`finalize_summary`: sections + the code-written ``## Pinned facts``, capped;
- :class:`ExtractiveSummarizer` (offline, the default) and :class:`OpenAISummarizer`.
"""

from __future__ import annotations

from .extractive import ExtractiveSummarizer, build_sections
from .openai_summarizer import CooldownState, InMemoryCooldown, OpenAISummarizer
from .prompt import PROMPT_HASH, PROMPT_VERSION, build_prompt
from .serialize import head_tail, serialize_segment
from .summary_body import SECTION_HEADINGS, finalize_summary, parse_sections, render_sections

__all__ = [
    "PROMPT_HASH",
    "PROMPT_VERSION",
    "SECTION_HEADINGS",
    "CooldownState",
    "ExtractiveSummarizer",
    "InMemoryCooldown",
    "OpenAISummarizer",
    "build_prompt",
    "build_sections",
    "finalize_summary",
    "head_tail",
    "parse_sections",
    "render_sections",
    "serialize_segment",
]
