"""The versioned prompt a model summarizer gets. Change the text, change PROMPT_VERSION.

Written for small local models as much as for large hosted ones (measured with Qwen2.5-Coder 0.5B and
1.5B, see ``bench/model.py``): small models answer in the language of the *instructions*, not of the
conversation, copy instruction lines and pinned-fact lines into their answer, and loop. So:

- the instructions are written in the session's language (:func:`detect_language`: Chinese when the
  user turns are mostly Chinese), headings stay the fixed English ones (the code parses them);
- the answer has a hard structure: the empty skeleton of the sections is given, to be filled in;
- the instructions are short rules, with no sample content a model could copy as a summary line,
  and the pinned facts are marked as already recorded, not to be repeated;
- :data:`LEGACY_VERSIONS` keeps the earlier prompt(s) so a benchmark can compare them
  (``OpenAISummarizer(prompt_version=...)``).
"""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass
from typing import Any

from .facts import render_pinned_facts
from .language import detect_language
from .secrets import mask_secrets
from .summary_body import SECTION_HEADINGS
from .types import Fact

PROMPT_VERSION = "2026-12-02.1"

SYSTEM_TEMPLATE = """\
You compress the history of a tool-using agent. Write a summary of the conversation segment below so the
agent can continue without it. The summary is reference material, not instructions. Write in English.

Output exactly these markdown headings, in this order, each followed by short "- " bullets (leave a section
out when it has nothing):
{headings}

Rules:
- Decisions: what was decided, and why.
- Files and identifiers: exact paths, function names, ticket ids, user ids, order ids, versions, hashes.
- Errors: each error as printed in the tool output, and whether it is resolved or still open.
- Constraints and preferences: every prohibition, limit, approval and standing instruction of the user
  (commands to run after each change, limits such as "at most N"), worded as the user worded them.
  Never turn a prohibition into an instruction, never drop a "not", "yet" or "until", never invent an approval.
- Progress and next steps: only what the messages show as done (a command's output, a tool result);
  what was approved but not run is not done; what remains.
- Key tool results: the outputs that drove decisions, briefly.
- Keep uncertainty: "probably", "maybe", "suspected" stay hedged unless confirmed later.
- Copy identifiers exactly; invent none. Cite messages as (#N).
- When a previous summary is given, update it: keep what still holds, correct what changed.
- Give priority to the focus topic when one is given.
- Each fact once: never repeat a line. Do not copy these rules. Do not write the already recorded facts
  again, and no "## Pinned facts" section.
- At most {max_tokens} tokens. Stop after the last section.
"""

USER_TEMPLATE = """\
Focus topic: {focus}

Previous summary (update it):
{previous}

Already recorded by the system (keep consistent, do not copy these lines):
{pinned}

Segment to summarize (messages #{first}-#{last}):
{segment}

Now write the summary in English, filling in this skeleton:
{skeleton}
"""

SYSTEM_TEMPLATE_ZH = """\
你负责压缩一个使用工具的智能体的对话历史。请为下面的对话片段写一份摘要，让智能体不看原文也能继续工作。摘要是参考资料，不是指令。\
请用中文写摘要（标题保持下面的英文原样）。

严格按顺序输出下面这些 markdown 标题，每个标题下写简短的“- ”要点（没有内容的部分可以省略）：
{headings}

规则：
- Decisions：做了什么决定，为什么。
- Files and identifiers：准确的文件路径、函数名、单号、用户 ID、订单号、版本、哈希。
- Errors：工具输出里出现的每个错误（照原文），以及是否已解决。
- Constraints and preferences：用户提出的每条禁止、限制、批准和长期要求\
（每次修改后要跑的命令、"最多 N 次"之类的限制），按用户的原话写。\
绝不能把禁止改成要求，不能丢掉“不要”“先别”“等我确认”，不能编造批准。
- Progress and next steps：只写消息里确实完成的事（有命令输出或工具结果为证）；批准了但还没执行的不算完成；还剩什么。
- Key tool results：影响决定的工具输出，简要写。
- 保留不确定性：“可能”“疑似”“大概”在被确认之前保持原样。
- 标识符照抄，不要编造。用 (#N) 标注消息编号。
- 给了之前的摘要时，在它的基础上更新：保留仍然成立的，改正变化的。
- 给了重点话题时，优先写它。
- 每个事实只写一次，不要重复任何一行。不要抄写这些规则。不要重复“系统已记录”的内容，不要写“## Pinned facts”部分。
- 最多 {max_tokens} 个 token。写完最后一个部分就停止。
"""

USER_TEMPLATE_ZH = """\
重点话题：{focus}

之前的摘要（请更新）：
{previous}

系统已记录（保持一致，不要抄写这些行）：
{pinned}

要总结的片段（消息 #{first}-#{last}）：
{segment}

现在用中文写摘要，填写这个框架：
{skeleton}
"""

#: the prompt before the small-model rework (2026-12-01), kept for ``bench/model.py --compare``
SYSTEM_TEMPLATE_V1 = """\
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

USER_TEMPLATE_V1 = """\
Focus topic: {focus}

Previous summary (update it):
{previous}

Facts pinned by code (must stay consistent with your summary):
{pinned}

Segment to summarize (messages #{first}-#{last}):
{segment}
"""


@dataclass(frozen=True)
class PromptTemplates:
    """One prompt version: system and user templates per language, and how the answer is post-processed."""

    system: dict[str, str]
    user: dict[str, str]
    #: the summarizer sends a frequency penalty and de-duplicates the answer's lines (from 2026-12-02)
    cut_repetition: bool = True


PROMPTS: dict[str, PromptTemplates] = {
    PROMPT_VERSION: PromptTemplates(
        system={"en": SYSTEM_TEMPLATE, "zh": SYSTEM_TEMPLATE_ZH},
        user={"en": USER_TEMPLATE, "zh": USER_TEMPLATE_ZH},
    ),
    "2026-12-01.1": PromptTemplates(
        system={"en": SYSTEM_TEMPLATE_V1}, user={"en": USER_TEMPLATE_V1}, cut_repetition=False
    ),
}
#: earlier versions still selectable, for benchmarks only (the console uses :data:`PROMPT_VERSION`)
LEGACY_VERSIONS = tuple(v for v in PROMPTS if v != PROMPT_VERSION)
LANGUAGES = ("en", "zh")


def _hash(version: str) -> str:
    t = PROMPTS[version]
    parts = [t.system[k] + "\x00" + t.user[k] for k in sorted(t.system)]
    return hashlib.sha256("\x00".join(parts).encode("utf-8")).hexdigest()


PROMPT_HASHES = {version: _hash(version) for version in PROMPTS}
PROMPT_HASH = PROMPT_HASHES[PROMPT_VERSION]

_USER_LINE = re.compile(r"^#\d+ USER \(turn \d+\): ?(.*)$", re.M)


def segment_language(segment: str) -> str:
    """The language of a serialized segment's user turns (all of it when it has none)."""
    users = "\n".join(m.group(1) for m in _USER_LINE.finditer(segment))
    return detect_language(users if users.strip() else segment)


def skeleton(headings: tuple[str, ...] = SECTION_HEADINGS) -> str:
    """The empty answer the model fills in: each heading with an empty bullet."""
    return "\n\n".join(f"{h}\n- " for h in headings)


def build_prompt(
    segment: str,
    *,
    facts: list[Fact],
    focus_topic: str | None,
    previous_summary: str | None,
    max_tokens: int,
    first_index: int,
    last_index: int,
    version: str = PROMPT_VERSION,
    language: str | None = None,
) -> list[dict[str, Any]]:
    """Chat messages (system + user) asking for the structured summary; everything user-supplied is masked.

    ``language`` (``"en"`` or ``"zh"``): the language the summary is asked in; by default the segment's
    (:func:`segment_language`). ``version``: one of :data:`PROMPTS` (default: the current one).
    """
    if version not in PROMPTS:
        raise ValueError(f"unknown prompt version {version!r}; known: {', '.join(PROMPTS)}")
    templates = PROMPTS[version]
    lang = language or segment_language(segment)
    if lang not in LANGUAGES:
        raise ValueError(f"unknown summary language {lang!r}; known: {', '.join(LANGUAGES)}")
    if lang not in templates.system:
        lang = "en"
    none = "（无）" if lang == "zh" else "(none)"
    if templates.cut_repetition:  # the fact lines alone: a "## Pinned facts" heading invites the model to write one
        pinned = "\n".join(render_pinned_facts(facts).splitlines()[1:]) if facts else none
    else:
        pinned = render_pinned_facts(facts)
    system = templates.system[lang].format(headings="\n".join(SECTION_HEADINGS), max_tokens=max_tokens)
    user = templates.user[lang].format(
        focus=mask_secrets(focus_topic.strip()) if focus_topic and focus_topic.strip() else none,
        previous=mask_secrets(previous_summary.strip()) if previous_summary and previous_summary.strip() else none,
        pinned=mask_secrets(pinned),
        first=first_index,
        last=last_index,
        segment=segment,
        skeleton=skeleton(),
    )
    return [{"role": "system", "content": system}, {"role": "user", "content": user}]
