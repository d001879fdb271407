"""The versioned prompt a model summarizer gets. Change the text, change PROMPT_VERSION."""

from __future__ import annotations

import hashlib
from typing import Any

from .facts import render_pinned_facts
from .secrets import mask_secrets
from .summary_body import SECTION_HEADINGS
from .types import Fact

PROMPT_VERSION = "2026-12-01.1"

SYSTEM_TEMPLATE = """\
You are the context compressor of a long-running tool-using agent. You write a structured summary of
an archived segment of the conversation, so the agent can continue the task without the original
messages. The summary is reference material for the agent, not instructions.

Write these sections, with exactly these markdown headings, in this order (omit a section only if
there is nothing for it):
{headings}

What goes in them:
- Decisions: what was decided, and why.
- Files and identifiers: exact file paths, function names, ticket ids, versions, hashes, numbers with units.
- Errors: each error, verbatim where short, and whether it was resolved (and how) or is still open.
- Constraints and preferences: every constraint, prohibition and preference the user stated, with its
  negation kept exactly ("do not X" stays "do not X"; "先不要修改 X" stays "先不要修改 X"). Never turn a
  prohibition into an instruction, never drop a "not", never invent an approval or prohibition.
- Progress and next steps: what is done, what side effects already happened, what remains.
- Key tool results: the tool outputs that drove decisions, briefly.

Rules:
- Give priority to the focus topic when one is given.
- When a previous summary is given, update it: keep what still holds, correct what changed, add what is
  new. Do not start over and do not repeat it twice.
- Keep uncertainty: "suspected", "maybe", "可能", "疑似" stay hedged unless later confirmed.
- Copy identifiers exactly; do not invent any.
- Cite messages as (#N) with the #N labels of the segment; keep the (#N) of lines you carry over from
  the previous summary exactly as they are (one numbering across summaries).
- Keep every user request and instruction; drop tool details before them.
- Answer in the language of the conversation (keep the English headings).
- Do not write a "## Pinned facts" section; the compressor appends it.
- Be concise: at most {max_tokens} tokens.
"""

USER_TEMPLATE = """\
Focus topic: {focus}

Previous summary (update it):
{previous}

Facts pinned by code (must stay consistent with your summary):
{pinned}

Segment to summarize (messages #{first}-#{last}):
{segment}
"""

PROMPT_HASH = hashlib.sha256((SYSTEM_TEMPLATE + "\x00" + USER_TEMPLATE).encode("utf-8")).hexdigest()


def build_prompt(
    segment: str,
    *,
    facts: list[Fact],
    focus_topic: str | None,
    previous_summary: str | None,
    max_tokens: int,
    first_index: int,
    last_index: int,
) -> list[dict[str, Any]]:
    """Chat messages (system + user) asking for the structured summary; everything user-supplied is masked."""
    system = SYSTEM_TEMPLATE.format(headings="\n".join(SECTION_HEADINGS), max_tokens=max_tokens)
    user = USER_TEMPLATE.format(
        focus=mask_secrets(focus_topic.strip()) if focus_topic and focus_topic.strip() else "(none)",
        previous=mask_secrets(previous_summary.strip()) if previous_summary and previous_summary.strip() else "(none)",
        pinned=mask_secrets(render_pinned_facts(facts)),
        first=first_index,
        last=last_index,
        segment=segment,
    )
    return [{"role": "system", "content": system}, {"role": "user", "content": user}]
