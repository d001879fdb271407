"""Sessions: create, list, read, append, compress, search the archives."""

from contextlib import nullcontext
from typing import Any

from django.conf import settings
from django.http import HttpRequest
from ninja import Query, Router, Status
from ninja.errors import HttpError
from ninja.pagination import paginate

from ...models import CompressionRun, Session
from ...queries import archive_hits, session_search
from ...roles import ADD, CHANGE, COMPRESS, VIEW
from ...services import runs
from ...services.sessions import ImportedSession, append_messages, create_session
from ..common import ERRORS, Pages, require, session_named
from ..schemas import (
    AppendIn,
    AppendOut,
    ArchiveSearchOut,
    ArchiveSearchQuery,
    CompressIn,
    CompressOut,
    ErrorOut,
    SessionDetailOut,
    SessionIn,
    SessionOut,
    SessionsQuery,
)

sessions = Router(tags=["sessions"])


@sessions.post("", response={201: SessionOut, **ERRORS}, summary="Create a session with its history")
def create(request: HttpRequest, payload: SessionIn) -> Status:
    require(request, ADD, "create sessions")
    data = ImportedSession(
        key=payload.key,
        messages=payload.messages,
        metadata=payload.metadata,
        last_consolidated=payload.last_consolidated,
        context_window_tokens=payload.context_window_tokens,
    )
    return Status(201, create_session(data, user=request.user))


@sessions.get("", response=list[SessionOut], summary="List sessions (q= searches key and channel, as masked for you)")
@paginate(Pages)
def list_sessions(request: HttpRequest, filters: Query[SessionsQuery]) -> Any:
    require(request, VIEW, "read sessions")
    return session_search(Session.objects.all(), filters.q)


@sessions.get("/{key}", response={200: SessionDetailOut, **ERRORS}, summary="A session and its history")
def get_session(request: HttpRequest, key: str) -> dict[str, Any]:
    require(request, VIEW, "read sessions")
    session = session_named(key)
    return SessionOut.from_orm(session).dict() | {"messages": session.messages()}


@sessions.post("/{key}/messages", response={200: AppendOut, **ERRORS}, summary="Append messages")
def append(request: HttpRequest, key: str, payload: AppendIn) -> dict[str, Any]:
    require(request, CHANGE, "append to sessions")
    session, run = append_messages(key, payload.messages, payload.expected_version, user=request.user)
    return {
        "key": session.key,
        "version": session.version,
        "message_count": session.message_count,
        "token_count": session.token_count,
        "queued_run_id": run.pk if run else None,
    }


@sessions.post(
    "/{key}/compress",
    response={200: CompressOut, 202: CompressOut, 429: ErrorOut, **ERRORS},
    summary="Compress a session in a worker (wait=seconds to get the compressed history back)",
)
def compress(request: HttpRequest, key: str, payload: CompressIn) -> Status:
    require(request, COMPRESS, "compress sessions")
    # a waiting request holds a thread: 429 past MAX_COMPRESS_WAITERS, before anything is written
    with runs.waiter_slot() if payload.wait else nullcontext():
        run, created = runs.request_compression(
            key,
            user=request.user,
            trigger=CompressionRun.Trigger.API,
            focus_topic=payload.focus_topic or "",
            config=payload.config.dict(exclude_none=True) if payload.config else None,
        )
        body: dict[str, Any] = {"run_id": run.pk, "status": run.status, "created": created}
        if payload.wait:
            run = runs.wait_for_run(run.pk, min(payload.wait, settings.COMPRESS_WAIT_MAX_SECONDS))
            body["status"] = run.status
            if run.finished:
                session = Session.objects.get(pk=run.session_id)
                body |= {
                    "run": run,
                    "version": session.version,
                    "messages": session.messages(),
                }
                return Status(200, body)
    return Status(202, body)


@sessions.get(
    "/{key}/archive/search",
    response={200: ArchiveSearchOut, **ERRORS},
    summary="Search the session's archived originals",
)
def search_archives(request: HttpRequest, key: str, query: Query[ArchiveSearchQuery]) -> dict[str, Any]:
    require(request, VIEW, "read sessions")
    session = session_named(key)
    needle, limit = query.q.strip(), query.limit
    if not needle:
        raise HttpError(422, "q: give a word or phrase to search for")
    return {"query": needle, "hits": archive_hits(session, needle, limit)}
