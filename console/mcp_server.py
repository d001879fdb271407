"""The MCP server: an agent reads back what compression archived, with the numbering its summaries use.

Tools (official ``mcp`` SDK): ``search_archive(session, query)``, ``read_archived_message(session,
history_index)`` and ``list_summaries(session)``. ``history_index`` is the ``#N`` of the summaries (the
message's place in the session's full history). Served over streamable HTTP at ``/mcp/`` by
``manage.py mcp`` (its own port, beside gunicorn) or over stdio by ``manage.py mcp --stdio``.

The caller is a console API key whose role may read sessions: ``Authorization: Bearer <key>`` over HTTP,
``CONSOLE_API_KEY`` in the environment over stdio. Everything returned is masked (secrets as placeholders);
a key whose role may reveal secrets gets them raw by passing ``reveal=true``, which is audited.
"""

from __future__ import annotations

import json
from typing import Any

from asgiref.sync import sync_to_async
from django.db import close_old_connections
from mcp.server.mcpserver import Context, MCPServer

from agent_compression.facts import history_indexes, segment_history_range
from agent_compression.messages import content_text

from .apikeys import authenticate_key
from .audit import audit
from .errors import ArchiveCorrupted
from .masking import mask_value
from .models import Archive, Session, Summary
from .queries import snippet
from .roles import REVEAL, VIEW

INSTRUCTIONS = (
    "Read back what the context compressor archived. A summary's #N is a history_index: pass it to "
    "read_archived_message to get the original message; search_archive finds archived messages by text."
)
#: the longest text a tool returns in one message (the rest is cut, and said to be)
MAX_TEXT = 20_000


class ToolError(Exception):
    """A refusal the agent reads (no such session, no permission): the SDK returns it as the tool's error."""


# --------------------------------------------------------------------------- who is calling

_stdio_user: Any = None


def bearer_user(authorization: str | None) -> Any:
    """The user a bearer header's key acts as, if it may read sessions; else None."""
    scheme, _, token = (authorization or "").partition(" ")
    if scheme.lower() != "bearer" or not token.strip():
        return None
    close_old_connections()
    user = authenticate_key(token.strip())
    return user if user is not None and user.has_perm(VIEW) else None


def _user(ctx: Context | None) -> Any:
    headers = ctx.headers if ctx is not None else None
    if headers is None:  # stdio: the key given at start
        if _stdio_user is None:
            raise ToolError("no API key: start the server with CONSOLE_API_KEY set")
        return _stdio_user
    user = bearer_user(headers.get("authorization"))
    if user is None:
        raise ToolError("the API key is unknown, revoked, or may not read sessions")
    return user


def use_stdio_key(key: str) -> Any:
    """Check the stdio server's key once, at start; ``ValueError`` when it cannot read sessions."""
    global _stdio_user
    _stdio_user = bearer_user(f"Bearer {key}")
    if _stdio_user is None:
        raise ValueError("CONSOLE_API_KEY is unknown, revoked, or its role may not read sessions")
    return _stdio_user


# --------------------------------------------------------------------------- the tools' work (sync, Django)


def _session(key: str) -> Session:
    session = Session.objects.filter(key=key).first()
    if session is None:
        raise ToolError(f"no session {key!r}")
    return session


def _revealing(user: Any, reveal: bool, session: Session, tool: str) -> bool:
    """Whether this call shows secrets raw: asked for, allowed (else refused) and audited once."""
    if not reveal:
        return False
    if not user.has_perm(REVEAL):
        raise ToolError("reveal=true needs a key whose role may reveal secrets")
    audit(user, "secrets.reveal", session, after={"via": f"mcp {tool}"})
    return True


def _shown(value: Any, raw: bool) -> Any:
    return value if raw else mask_value(value)


def _archives(session: Session) -> list[tuple[Archive, list[dict[str, Any]], list[int | None]]]:
    out = []
    for archive in session.archives.order_by("created_at", "id"):
        try:
            messages = archive.verified_messages()
        except ArchiveCorrupted as exc:
            raise ToolError(str(exc)) from None
        out.append((archive, messages, history_indexes(messages, archive.start)))
    return out


def _cut(text: str) -> str:
    return text if len(text) <= MAX_TEXT else text[:MAX_TEXT] + f"… [{len(text) - MAX_TEXT} more characters]"


def search(user: Any, key: str, query: str, limit: int = 10, reveal: bool = False) -> dict[str, Any]:
    needle = query.strip()
    if not needle:
        raise ToolError("give a word or phrase to search for")
    session = _session(key)
    raw = _revealing(user, reveal, session, "search_archive")
    limit = max(1, min(limit, 50))
    hits: list[dict[str, Any]] = []
    for archive, messages, indexes in _archives(session):
        for message, index in zip(messages, indexes, strict=True):
            if index is None or len(hits) >= limit:
                continue  # an earlier summary is not an original: its originals are in an older archive
            text = _shown(_searchable(message), raw)
            if needle.lower() in text.lower():
                hits.append(
                    {
                        "history_index": index,
                        "role": message.get("role", ""),
                        "archive_id": archive.pk,
                        "snippet": snippet(text, needle),
                    }
                )
    return {"session": key, "query": needle, "hits": hits}


def _searchable(message: dict[str, Any]) -> str:
    parts = [content_text(message)]
    for call in message.get("tool_calls") or []:
        if isinstance(call, dict) and isinstance(call.get("function"), dict):
            parts.append(f"{call['function'].get('name', '')} {call['function'].get('arguments', '')}")
    return "\n".join(p for p in parts if p)


def read(user: Any, key: str, history_index: int, reveal: bool = False) -> dict[str, Any]:
    session = _session(key)
    for archive, messages, indexes in _archives(session):
        if history_index in indexes:
            message = messages[indexes.index(history_index)]
            shown = _shown(message, _revealing(user, reveal, session, "read_archived_message"))
            return {
                "session": key,
                "history_index": history_index,
                "archive_id": archive.pk,
                "summary_id": archive.inserted_id or None,
                "role": message.get("role", ""),
                "content": _cut(content_text(shown) or json.dumps(shown.get("content"), ensure_ascii=False)),
                "message": shown if len(json.dumps(shown, ensure_ascii=False)) <= MAX_TEXT else None,
            }
    raise ToolError(f"#{history_index} is not in an archive of session {key!r} (list_summaries shows the ranges)")


def summaries(user: Any, key: str) -> dict[str, Any]:
    session = _session(key)
    out = []
    for archive, messages, indexes in _archives(session):
        span = segment_history_range(indexes, messages)
        for summary in archive.summaries.order_by("created_at", "id"):
            out.append(
                {
                    "summary_id": summary.summary_id,
                    "status": summary.status,
                    "live": summary.status == Summary.Status.ACTIVE,
                    "archive_id": archive.pk,
                    "history_range": list(span) if span else None,
                    "generator": (summary.provenance or {}).get("generator"),
                    "created_at": summary.created_at.isoformat(timespec="seconds"),
                    "text": _cut(mask_value(summary.text)),
                }
            )
    return {"session": key, "summaries": out}


# --------------------------------------------------------------------------- the server


def build_server() -> MCPServer:
    server: MCPServer = MCPServer("compression-console", instructions=INSTRUCTIONS)

    @server.tool()
    async def search_archive(
        ctx: Context, session: str, query: str, limit: int = 10, reveal: bool = False
    ) -> dict[str, Any]:
        """Search a session's archived originals (what compression replaced by a summary) for a word or phrase.
        Each hit has the history_index (the #N of the summaries) to read the whole message with."""
        return await _call(ctx, search, session, query, limit, reveal)

    @server.tool()
    async def read_archived_message(
        ctx: Context, session: str, history_index: int, reveal: bool = False
    ) -> dict[str, Any]:
        """Read one archived original message of a session by its history_index (the #N a summary cites)."""
        return await _call(ctx, read, session, history_index, reveal)

    @server.tool()
    async def list_summaries(ctx: Context, session: str) -> dict[str, Any]:
        """List a session's summaries: which history indexes each stands for, whether it is live, its text."""
        return await _call(ctx, summaries, session)

    return server


async def _call(ctx: Context | None, work: Any, *args: Any) -> dict[str, Any]:
    def run() -> dict[str, Any]:
        close_old_connections()
        return work(_user(ctx), *args)

    result: dict[str, Any] = await sync_to_async(run, thread_sensitive=True)()
    return result


class KeyRequired:
    """ASGI middleware: every HTTP request to the MCP server carries a console API key that may read sessions."""

    def __init__(self, app: Any) -> None:
        self.app = app

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] == "http":
            headers = {k.decode("latin-1").lower(): v.decode("latin-1") for k, v in scope.get("headers", [])}
            user = await sync_to_async(bearer_user, thread_sensitive=True)(headers.get("authorization"))
            if user is None:
                detail = "send a console API key that may read sessions: Authorization: Bearer <key>"
                body = json.dumps({"detail": detail})
                await send(
                    {
                        "type": "http.response.start",
                        "status": 401,
                        "headers": [(b"content-type", b"application/json"), (b"www-authenticate", b"Bearer")],
                    }
                )
                await send({"type": "http.response.body", "body": body.encode()})
                return
        await self.app(scope, receive, send)


def http_app() -> Any:
    """The streamable-HTTP ASGI app, at ``/mcp/``, behind the API-key check."""
    return KeyRequired(build_server().streamable_http_app(streamable_http_path="/mcp/", stateless_http=True))
