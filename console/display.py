"""How stored messages and summaries are shown: masked, previewed, sanitized.

Message content is untrusted. Templates escape everything they print; the only
HTML we produce from content is rendered Markdown, which goes through nh3's
allow-list. Secrets are masked with the library's stable placeholders unless
the viewer may reveal them, so both sides of a diff mask the same secret the
same way, and invisible characters are shown as markers (``console.masking``,
which templates also apply to every string they print).
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

import markdown as markdown_lib
import nh3
from django.utils.html import escape
from django.utils.safestring import SafeString, mark_safe

from agent_compression.assemble import is_inserted_message
from agent_compression.messages import call_arguments, call_name, content_text
from agent_compression.summary_message import is_summary_message
from agent_compression.validate import LOST_RESULT

from .masking import cut, for_page, value_for_reader

#: characters of content shown before "show the rest" (the rest loads on demand)
PREVIEW_CHARS = 1200

_MARKDOWN_TAGS = {
    "p", "br", "hr", "h1", "h2", "h3", "h4", "h5", "h6", "strong", "em", "b", "i", "del", "code", "pre",
    "blockquote", "ul", "ol", "li", "a", "table", "thead", "tbody", "tr", "th", "td",
}  # fmt: skip


def mask_unless_revealed(text: str) -> str:
    """``text`` as the viewer may see it: secrets masked unless this request reveals, invisible characters marked."""
    return for_page(text)


def preview(text: str, limit: int = PREVIEW_CHARS) -> tuple[str, bool]:
    """The first ``limit`` characters (cut at a line end when one is near) and whether text was cut."""
    if len(text) <= limit:
        return text, False
    end = text.rfind("\n", limit - 200, limit)
    return cut(text, end if end > 0 else limit), True


@dataclass
class ToolCallView:
    id: str
    name: str
    arguments: str


@dataclass
class MessageView:
    """One message ready for a template. ``text`` is masked (unless revealed) and may be a preview."""

    key: str
    role: str
    text: str
    full_chars: int
    truncated: bool
    name: str = ""
    tool_call_id: str = ""
    tool_calls: list[ToolCallView] = field(default_factory=list)
    tokens: int | None = None
    is_summary: bool = False
    #: the compressor's acknowledgement or bridge after a summary
    is_inserted: bool = False
    is_lost_result: bool = False
    #: the non-text content parts (image, audio, file), by kind: the page shows that they were there
    attachments: list[str] = field(default_factory=list)
    #: when the message was written, as stored with it (``timestamp``): the instant (the page prints it with
    #: ``|when``, like every date), or, for a value that is not a time, that value as text
    timestamp: str = ""
    moment: datetime | None = None
    when: str = ""

    @property
    def rest_chars(self) -> int:
        """How many characters "show the rest" adds to the preview (not the whole length)."""
        return max(0, self.full_chars - len(self.text))


def attachment_kinds(data: dict[str, Any]) -> list[str]:
    """The kinds of ``data``'s non-text content parts (``content_text`` keeps only the text)."""
    content = data.get("content")
    if not isinstance(content, list):
        return []
    kinds = []
    for part in content:
        kind = part.get("type") if isinstance(part, dict) else None
        if isinstance(kind, str) and kind != "text":
            kinds.append(kind)
    return kinds


def pretty_arguments(arguments: str) -> str:
    """Tool-call arguments as indented JSON when they parse, else as given; a value under a secret-named key is
    masked here unless this request reveals (its text alone may not say it is a secret)."""
    try:
        return json.dumps(value_for_reader(json.loads(arguments)), ensure_ascii=False, indent=2)
    except (TypeError, ValueError):
        return arguments


def message_view(
    key: str,
    data: dict[str, Any],
    *,
    limit: int | None = PREVIEW_CHARS,
    tokens: int | None = None,
) -> MessageView:
    """``data`` (a stored chat message) as a :class:`MessageView`; ``limit=None`` shows all of it."""
    text = mask_unless_revealed(content_text(data))
    full_chars = len(text)
    truncated = False
    if limit is not None:
        text, truncated = preview(text, limit)
    calls = [
        ToolCallView(
            id=str(call.get("id") or ""),
            name=call_name(call),
            arguments=mask_unless_revealed(pretty_arguments(call_arguments(call))),
        )
        for call in data.get("tool_calls") or []
        if isinstance(call, dict)
    ]
    return MessageView(
        key=key,
        role=str(data.get("role") or ""),
        text=text,
        full_chars=full_chars,
        truncated=truncated,
        name=str(data.get("name") or ""),
        tool_call_id=str(data.get("tool_call_id") or ""),
        tool_calls=calls,
        tokens=tokens,
        is_summary=is_summary_message(data),
        is_inserted=is_inserted_message(data),
        is_lost_result=data.get("role") == "tool" and data.get("content") == LOST_RESULT,
        attachments=attachment_kinds(data),
        **message_time(data),
    )


def message_time(data: dict[str, Any]) -> dict[str, Any]:
    """A stored message's ``timestamp`` (ISO 8601 as agent runtimes write it): ``{"timestamp", "moment"}``,
    or ``{"when"}`` (the value as text) when it is not a time."""
    value = data.get("timestamp")
    if not isinstance(value, str | int | float) or isinstance(value, bool) or value == "":
        return {}
    try:
        moment = (
            datetime.fromtimestamp(value, tz=UTC)
            if isinstance(value, int | float)
            else datetime.fromisoformat(value.replace("Z", "+00:00"))
        )
    except (ValueError, OverflowError, OSError):
        text = mask_unless_revealed(str(value))[:40]
        return {"timestamp": "", "when": text}
    if moment.tzinfo is None:  # a runtime that writes no zone writes UTC (as the JSONL exports here do)
        moment = moment.replace(tzinfo=UTC)
    return {"timestamp": moment.isoformat(), "moment": moment}


class _RawHtmlAsText(markdown_lib.Extension):
    """Raw HTML in the Markdown stays text (a summary that quotes ``<script>`` shows it, escaped)."""

    def extendMarkdown(self, md: markdown_lib.Markdown) -> None:  # noqa: N802 - Markdown's API
        md.preprocessors.deregister("html_block")
        md.inlinePatterns.deregister("html")


def render_markdown(text: str) -> SafeString:
    """Markdown to HTML: raw HTML escaped, then nh3's allow-list (no script, handler or ``javascript:`` URL)."""
    html = markdown_lib.markdown(
        mask_unless_revealed(text), extensions=["fenced_code", "tables", "sane_lists", _RawHtmlAsText()]
    )
    return mark_safe(_clean(html))  # noqa: S308 - sanitized by nh3


def _clean(html: str) -> str:
    return nh3.clean(
        html,
        tags=_MARKDOWN_TAGS,
        attributes={"a": {"href", "title", "class"}, "code": {"class"}, "th": {"align"}, "td": {"align"}},
        url_schemes={"http", "https", "mailto"},
        link_rel="noopener noreferrer nofollow",
    )


#: a ``#N`` reference in a summary's text (not ``&#39;``, not part of a word or a longer number)
_REFERENCE = re.compile(r"(?<![&\w#])#(\d{1,9})(?!\w)")
#: a tag as nh3 serializes it (attribute values always double-quoted, ``"`` in them escaped)
_TAG = re.compile(r'(<(?:[^>"]|"[^"]*")*>)')


def link_references(html: SafeString | str, href_for: Callable[[int], str | None]) -> SafeString:
    """Sanitized summary HTML (from :func:`render_markdown`) with every ``#N`` made a link to ``href_for(N)``.

    Only text between tags is touched, never inside a tag or an existing link; the href comes from
    ``href_for`` (URLs the console builds, escaped again here) and the visible text stays ``#N``, so no
    content of the summary becomes markup. A reference ``href_for`` cannot place stays plain text.
    """
    out: list[str] = []
    depth = 0  # inside <a>…</a>: leave the text alone
    for part in _TAG.split(str(html)):
        if part.startswith("<"):
            name = part[1:].split(None, 1)[0].rstrip(">/").lower() if len(part) > 2 else ""
            if name == "a":
                depth += 1
            elif name == "/a":
                depth = max(0, depth - 1)
            out.append(part)
        elif depth or "#" not in part:
            out.append(part)
        else:
            out.append(_REFERENCE.sub(lambda m: _reference_link(m, href_for), part))
    # and through the allow-list once more: whatever the input was, the output is sanitized HTML
    return mark_safe(_clean("".join(out)))  # noqa: S308 - sanitized by nh3


def _reference_link(match: re.Match[str], href_for: Callable[[int], str | None]) -> str:
    href = href_for(int(match.group(1)))
    if not href:
        return match.group(0)
    return f'<a class="ref" href="{escape(href)}">{match.group(0)}</a>'
