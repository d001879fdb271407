"""The JSON API for agent runtimes and integrations: ``/api/v1/`` (OpenAPI docs at ``/api/v1/docs``).

Authentication: ``Authorization: Bearer <key>`` (``manage.py create_api_key``) or the browser
session (with CSRF). Every response is masked (``console.masking``: secrets as placeholders, in
content, metadata, typed text and errors alike); a key whose role holds ``console.reveal_secrets``
may add ``?reveal=1`` to get it raw, which is audited. Every error is JSON ``{"detail": "..."}``
saying what to fix; a rejected request writes nothing (each write is one transaction in ``services``/
``runs``/``summaries``).
"""

import hmac
import json
import math
from contextlib import nullcontext
from datetime import timedelta
from typing import Any

from django.conf import settings
from django.core.exceptions import RequestDataTooBig
from django.db import InterfaceError, OperationalError
from django.db.models import Q
from django.http import HttpRequest, HttpResponse
from django.shortcuts import get_object_or_404
from django.utils import timezone
from ninja import NinjaAPI, Query, Router, Status
from ninja.errors import AuthenticationError, HttpError, Throttled, ValidationError
from ninja.pagination import PageNumberPagination, paginate
from ninja.parser import Parser
from ninja.security import HttpBearer, django_auth

from . import drift, notifications_api, runs, schemas, summaries
from .masking import MaskingRenderer, api_reveal, key_search, reveals
from .middleware import database_unavailable
from .models import ApiKey, Archive, AuditEvent, CompressionRun, DriftCase, Message, Session, Summary
from .services import (
    MAX_JSON_DEPTH,
    ImportedSession,
    NotFound,
    ServiceError,
    append_messages,
    create_session,
    may_hold_unstorable,
    unstorable,
)
from .throttling import FailedAuthThrottle, KeyRateThrottle
from .views.audit_log import AuditQuery

FAILED_AUTH = FailedAuthThrottle()

# --------------------------------------------------------------------------- plumbing


class BearerKey(HttpBearer):
    """``Authorization: Bearer ccs_...``: the key's own user (in its role's group) makes the request.

    A client IP whose keys failed ``API_AUTH_FAILURE_LIMIT`` times is refused (429) before its key is looked at.
    """

    def __call__(self, request: HttpRequest) -> Any:
        if request.headers.get("Authorization") and FAILED_AUTH.blocked(request):
            wait = FAILED_AUTH.wait()
            raise Throttled(wait=math.ceil(wait) if wait else None)
        return super().__call__(request)

    def authenticate(self, request: HttpRequest, token: str) -> Any:
        lookup = token.removeprefix(ApiKey.PREFIX).split("_", 1)[0]
        key = ApiKey.objects.select_related("user").filter(lookup=lookup, revoked_at__isnull=True).first()
        if key is None or not hmac.compare_digest(ApiKey.digest(token), key.key_sha256) or not key.user.is_active:
            return None
        now = timezone.now()
        if key.last_used_at is None or now - key.last_used_at > timedelta(minutes=1):  # not a write per request
            ApiKey.objects.filter(pk=key.pk).update(last_used_at=now)
        request.user = key.user
        return key.user


class BadBody(ServiceError):
    """A request body refused before any schema sees it: 400 not JSON, 415 not sent as JSON, 422 not storable."""

    def __init__(self, detail: str, status: int = 400) -> None:
        super().__init__(detail)
        self.status = status


class StrictJsonParser(Parser):
    """The API's one JSON decoding step: what cannot be stored is refused here, naming where it is.

    Refused: a Content-Type other than JSON (415), bytes that are not UTF-8, what is not JSON (NaN, Infinity,
    numbers too large for a float or of over 4300 digits), a top level other than an object (every body is one),
    and anything ``services.unstorable`` names: NUL characters and lone surrogates anywhere, keys included,
    and nesting deeper than ``MAX_JSON_DEPTH``. (NUL in the URL is refused by ``console.input_checks``.)
    """

    def parse_body(self, request: HttpRequest) -> Any:
        content_type = request.content_type or ""
        if content_type != "application/json" and not (
            content_type.startswith("application/") and content_type.endswith("+json")
        ):
            raise BadBody(f"send the body as JSON with 'Content-Type: application/json', not {content_type!r}", 415)
        try:
            text = request.body.decode("utf-8")
            data = json.loads(text, parse_constant=_not_json, parse_float=_finite)
        except UnicodeDecodeError as exc:
            raise BadBody(f"the request body is not UTF-8: {exc}") from None
        except RecursionError:
            raise BadBody(f"the request body is not valid JSON: nested deeper than {MAX_JSON_DEPTH} levels") from None
        except ValueError as exc:  # JSONDecodeError, and int() of a number over 4300 digits
            raise BadBody(f"the request body is not valid JSON: {exc}") from None
        if not isinstance(data, dict):
            raise BadBody(f"the request body must be a JSON object, not {_json_type(data)}", 422)
        problem = unstorable(data, strings=may_hold_unstorable(text))
        if problem:
            raise BadBody(problem, 422)
        return data


def _json_type(value: Any) -> str:
    return {list: "an array", str: "a string", bool: "a boolean", type(None): "null"}.get(type(value), "a number")


def _not_json(constant: str) -> Any:
    raise ValueError(f"{constant} is not a JSON number")


def _finite(text: str) -> float:
    value = float(text)
    if not math.isfinite(value):
        raise ValueError(f"the number {text[:40]} is too large")
    return value


api = NinjaAPI(
    title="Compression console API",
    version="1",
    urls_namespace="api",
    auth=[BearerKey(), django_auth],
    parser=StrictJsonParser(),
    renderer=MaskingRenderer(),
    throttle=[KeyRateThrottle()],
    docs_url="/docs",
)
api.add_decorator(api_reveal)


def _error(request: HttpRequest, status: int, detail: str, **extra: Any) -> HttpResponse:
    return api.create_response(request, {"detail": detail, **extra}, status=status)


@api.exception_handler(ServiceError)
def service_error(request: HttpRequest, exc: ServiceError) -> HttpResponse:
    response = _error(request, exc.status, str(exc))
    retry_after = getattr(exc, "retry_after", None)  # TooManyWaiters
    if retry_after:
        response["Retry-After"] = str(retry_after)
    return response


@api.exception_handler(OperationalError)
@api.exception_handler(InterfaceError)
def database_down(request: HttpRequest, exc: Exception) -> HttpResponse:
    return database_unavailable(request)  # 503 + Retry-After, as for pages (console.middleware)


@api.exception_handler(RequestDataTooBig)
def too_big(request: HttpRequest, exc: RequestDataTooBig) -> HttpResponse:
    limit = settings.DATA_UPLOAD_MAX_MEMORY_SIZE
    return _error(
        request, 413, f"request body is larger than the limit of {limit} bytes (MAX_REQUEST_BYTES); send less at once"
    )


@api.exception_handler(Throttled)
def throttled(request: HttpRequest, exc: Throttled) -> HttpResponse:
    wait = math.ceil(exc.wait) if exc.wait else 60
    response = _error(request, 429, f"too many requests: try again in {wait} s", retry_after=wait)
    response["Retry-After"] = str(wait)
    return response


@api.exception_handler(AuthenticationError)
def unauthenticated(request: HttpRequest, exc: AuthenticationError) -> HttpResponse:
    given = request.headers.get("Authorization")
    if given:
        FAILED_AUTH.record_failure(request)
    detail = (
        "the API key is unknown or revoked"
        if given
        else "authentication required: send 'Authorization: Bearer <key>' (manage.py create_api_key) or log in"
    )
    return _error(request, 401, detail)


@api.exception_handler(HttpError)
def http_error(request: HttpRequest, exc: HttpError) -> HttpResponse:
    cause = exc.__cause__  # ninja wraps what the parser raised in a 400 "Cannot parse request body"
    if isinstance(cause, BadBody):
        return _error(request, cause.status, str(cause))
    return _error(request, exc.status_code, str(exc))


@api.exception_handler(ValidationError)
def invalid(request: HttpRequest, exc: ValidationError) -> HttpResponse:
    problems = []
    for error in exc.errors:
        where = ".".join(str(part) for part in error.get("loc", ()) if part not in ("body", "payload", "query"))
        message = str(error.get("msg", "invalid")).removeprefix("Value error, ")  # pydantic's for our validators
        problems.append(f"{where or 'body'}: {message}")
    return _error(request, 422, "; ".join(problems) or "invalid request", errors=exc.errors)


def require(request: HttpRequest, perm: str, doing: str) -> None:
    """Permissions are checked here, in the view, for keys and browser sessions alike."""
    if not request.user.has_perm(perm):
        raise HttpError(403, f"your role may not {doing} (needs the {perm} permission)")


ERRORS: dict[int, type] = {400: schemas.ErrorOut, 401: schemas.ErrorOut, 403: schemas.ErrorOut}
ERRORS |= {404: schemas.ErrorOut, 409: schemas.ErrorOut, 413: schemas.ErrorOut, 415: schemas.ErrorOut}
ERRORS |= {422: schemas.ErrorOut, 429: schemas.ErrorOut}


class Pages(PageNumberPagination):
    """50 a page; ``page`` and ``page_size`` bounded, so no offset overflows a database integer."""

    Input = schemas.PagesIn  # type: ignore[assignment]

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(page_size=50, max_page_size=100, **kwargs)


def _session(key: str) -> Session:
    session = Session.objects.filter(key=key).first()
    if session is None:
        raise NotFound(f"no session {key!r}")
    return session


# --------------------------------------------------------------------------- payloads


def summary_payload(summary: Summary) -> dict[str, Any]:
    return schemas.SummaryOut.from_orm(summary).dict()


def run_payload(run: CompressionRun) -> dict[str, Any]:
    archive = Archive.objects.filter(run=run).first()
    summary = None
    if archive is not None:
        summary = archive.summaries.filter(run=run).first()
    return {
        "id": run.pk,
        "session": run.session.key,
        "trigger": run.trigger,
        "status": run.status,
        "stage": run.stage,
        "focus_topic": run.focus_topic,
        "config": run.config,
        "was_compressed": run.was_compressed,
        "applied": run.applied,
        "tokens_before": run.tokens_before,
        "tokens_after": run.tokens_after,
        "input_messages": len(run.input_keys),
        "output_messages": len(run.output_keys),
        "stages": run.stages,
        "boundaries": run.boundaries,
        "warnings": run.warnings,
        "error": run.error,
        "attempts": run.attempts,
        "archive_id": archive.pk if archive else None,
        "summary": summary_payload(summary) if summary else None,
        "created_at": run.created_at,
        "started_at": run.started_at,
        "finished_at": run.finished_at,
    }


# --------------------------------------------------------------------------- sessions

sessions = Router(tags=["sessions"])


@sessions.post("", response={201: schemas.SessionOut, **ERRORS}, summary="Create a session with its history")
def create(request: HttpRequest, payload: schemas.SessionIn) -> Status:
    require(request, "console.add_session", "create sessions")
    data = ImportedSession(
        key=payload.key,
        messages=payload.messages,
        metadata=payload.metadata,
        last_consolidated=payload.last_consolidated,
        context_window_tokens=payload.context_window_tokens,
    )
    return Status(201, create_session(data, user=request.user))


@sessions.get(
    "", response=list[schemas.SessionOut], summary="List sessions (q= searches key and channel, as masked for you)"
)
@paginate(Pages)
def list_sessions(request: HttpRequest, filters: Query[schemas.SessionsQuery]) -> Any:
    require(request, "console.view_session", "read sessions")
    found = Session.objects.order_by("-updated_at", "-id")
    q = filters.q
    if q.strip():
        # channels are stored masked (Session.save)
        found = found.filter(key_search(q.strip(), reveal=reveals(request)) | Q(channel__icontains=q.strip()))
    return found


@sessions.get("/{key}", response={200: schemas.SessionDetailOut, **ERRORS}, summary="A session and its history")
def get_session(request: HttpRequest, key: str) -> dict[str, Any]:
    require(request, "console.view_session", "read sessions")
    session = _session(key)
    return schemas.SessionOut.from_orm(session).dict() | {"messages": session.messages()}


@sessions.post("/{key}/messages", response={200: schemas.AppendOut, **ERRORS}, summary="Append messages")
def append(request: HttpRequest, key: str, payload: schemas.AppendIn) -> dict[str, Any]:
    require(request, "console.change_session", "append to sessions")
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
    response={200: schemas.CompressOut, 202: schemas.CompressOut, 429: schemas.ErrorOut, **ERRORS},
    summary="Compress a session in a worker (wait=seconds to get the compressed history back)",
)
def compress(request: HttpRequest, key: str, payload: schemas.CompressIn) -> Status:
    require(request, "console.compress_session", "compress sessions")
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
                body |= {"run": run_payload(run), "version": session.version, "messages": session.messages()}
                return Status(200, body)
    return Status(202, body)


@sessions.get(
    "/{key}/archive/search",
    response={200: schemas.ArchiveSearchOut, **ERRORS},
    summary="Search the session's archived originals",
)
def search_archives(request: HttpRequest, key: str, query: Query[schemas.ArchiveSearchQuery]) -> dict[str, Any]:
    require(request, "console.view_session", "read sessions")
    session = _session(key)
    needle, limit = query.q.strip(), query.limit
    if not needle:
        raise HttpError(422, "q: give a word or phrase to search for")
    archives = list(session.archives.order_by("created_at", "id").values_list("pk", "start", "message_keys"))
    keys = {k for _, _, message_keys in archives for k in message_keys}
    # Message.text is stored masked: a search never confirms a secret the response would hide
    matches = dict(Message.objects.filter(sha256__in=keys, text__icontains=needle).values_list("sha256", "text")[:5000])
    roles = dict(Message.objects.filter(sha256__in=matches).values_list("sha256", "role"))
    hits: list[dict[str, Any]] = []
    for archive_id, start, message_keys in archives:
        for offset, message_key in enumerate(message_keys):
            if message_key in matches and len(hits) < limit:
                hits.append(
                    {
                        "archive_id": archive_id,
                        "message_index": start + offset,
                        "role": roles.get(message_key, ""),
                        "snippet": _snippet(matches[message_key], needle),
                    }
                )
    return {"query": needle, "hits": hits}


def _snippet(text: str, needle: str, width: int = 80) -> str:
    at = text.lower().find(needle.lower())
    start, end = max(0, at - width), min(len(text), at + len(needle) + width)
    return ("…" if start else "") + " ".join(text[start:end].split()) + ("…" if end < len(text) else "")


# --------------------------------------------------------------------------- runs

runs_router = Router(tags=["runs"])


@runs_router.post("/report", response={201: schemas.RunOut, **ERRORS}, summary="Report a compression done in-process")
def report(request: HttpRequest, payload: schemas.ReportIn) -> Status:
    require(request, "console.compress_session", "report compressions")
    run = runs.record_reported_run(
        session_key=payload.session_key,
        input_messages=payload.input_messages,
        output_messages=payload.output_messages,
        archive_messages=payload.archive_messages,
        summary_text=payload.summary_text,
        provenance=payload.provenance,
        user=request.user,
    )
    return Status(201, run_payload(run))


@runs_router.get("/{int:run_id}", response={200: schemas.RunOut, **ERRORS}, summary="A run: status, stage, stats")
def get_run(request: HttpRequest, run_id: int) -> dict[str, Any]:
    require(request, "console.view_session", "read runs")
    return run_payload(get_object_or_404(CompressionRun.objects.select_related("session"), pk=run_id))


@runs_router.get("/{int:run_id}/messages", response={200: schemas.RunMessagesOut, **ERRORS}, summary="Run output")
def run_messages(request: HttpRequest, run_id: int) -> dict[str, Any]:
    require(request, "console.view_session", "read runs")
    run = get_object_or_404(CompressionRun, pk=run_id)
    if not run.finished:
        raise HttpError(409, f"run {run_id} is {run.status}; its output exists once it ends")
    if not run.output_keys:
        raise HttpError(409, f"run {run_id} ended {run.status} without an output history")
    return {"run_id": run.pk, "messages": Message.load(run.output_keys)}


# --------------------------------------------------------------------------- archives and summaries

archives = Router(tags=["archives and summaries"])


@archives.get("/archives/{int:archive_id}", response={200: schemas.ArchiveOut, **ERRORS}, summary="Archived originals")
def get_archive(request: HttpRequest, archive_id: int) -> dict[str, Any]:
    require(request, "console.view_session", "read archives")
    archive = get_object_or_404(Archive.objects.select_related("session"), pk=archive_id)
    messages = summaries.archive_messages(archive)  # raises when the checksum does not match
    return {
        "id": archive.pk,
        "session": archive.session.key,
        "run_id": archive.run_id,
        "start": archive.start,
        "end": archive.end,
        "sha256": archive.sha256,
        "verified": True,
        "messages": messages,
        "summaries": list(archive.summaries.order_by("created_at", "id").values_list("pk", flat=True)),
    }


@archives.post(
    "/archives/{int:archive_id}/summaries",
    response={202: schemas.SummaryOut, **ERRORS},
    summary="Re-summarize from the archived originals (in a worker)",
)
def resummarize(request: HttpRequest, archive_id: int, payload: schemas.ResummarizeIn) -> Status:
    require(request, "console.resummarize_archive", "re-summarize archives")
    summary = summaries.request_resummarize(
        archive_id,
        summarizer=payload.summarizer,
        model=payload.model,
        focus_topic=payload.focus_topic,
        prompt_version=payload.prompt_version,
        user=request.user,
    )
    return Status(202, summary_payload(summary))


@archives.get("/summaries/{int:summary_id}", response={200: schemas.SummaryOut, **ERRORS}, summary="A summary")
def get_summary(request: HttpRequest, summary_id: int) -> dict[str, Any]:
    require(request, "console.view_session", "read summaries")
    return summary_payload(get_object_or_404(Summary, pk=summary_id))


@archives.post(
    "/summaries/{int:summary_id}/promote",
    response={200: schemas.PromoteOut, **ERRORS},
    summary="Put this summary into the live session in place of the current one",
)
def promote(request: HttpRequest, summary_id: int) -> dict[str, Any]:
    require(request, "console.promote_summary", "promote summaries")
    session = summaries.promote_summary(summary_id, user=request.user)
    return {
        "summary": summary_payload(Summary.objects.get(pk=summary_id)),
        "session": session.key,
        "version": session.version,
    }


# --------------------------------------------------------------------------- drift cases

cases = Router(tags=["drift cases"])


@cases.get("", response=list[schemas.DriftCaseOut], summary="Drift cases (filter by status, severity, kind, ...)")
@paginate(Pages)
def list_cases(request: HttpRequest, filters: Query[schemas.CasesQuery]) -> Any:
    require(request, "console.view_session", "read drift cases")
    status, severity, session, assignee, kind = (
        filters.status,
        filters.severity,
        filters.session,
        filters.assignee,
        filters.kind,
    )
    cases = DriftCase.objects.select_related("session", "assignee", "opened_by").order_by("-created_at", "-id")
    if status:
        cases = cases.filter(status=status)
    if severity:
        cases = cases.filter(severity=severity)
    if session:
        cases = cases.filter(key_search(session, reveal=reveals(request), prefix="session__", exact=True))
    if assignee:
        cases = cases.filter(assignee__username=assignee)
    if kind:
        cases = cases.filter(DriftCase.of_kind(kind))
    return cases


@cases.post("", response={201: schemas.DriftCaseDetailOut, **ERRORS}, summary="Open a case by hand about a passage")
def open_case(request: HttpRequest, payload: schemas.DriftCaseIn) -> Status:
    require(request, "console.open_drift_case", "open drift cases")
    case = drift.open_case(payload.summary, **payload.dict(exclude={"summary"}), user=request.user)
    return Status(201, _case(case.pk))


def _case(case_id: int) -> DriftCase:
    return get_object_or_404(DriftCase.objects.select_related("session", "assignee", "opened_by"), pk=case_id)


@cases.get("/{int:case_id}", response={200: schemas.DriftCaseDetailOut, **ERRORS}, summary="A drift case")
def get_case(request: HttpRequest, case_id: int) -> DriftCase:
    require(request, "console.view_session", "read drift cases")
    return _case(case_id)


@cases.patch(
    "/{int:case_id}",
    response={200: schemas.DriftCaseDetailOut, **ERRORS},
    summary="Claim, change status, assignee or verdict; add a comment (@username mentions)",
)
def patch_case(request: HttpRequest, case_id: int, payload: schemas.DriftCasePatch) -> DriftCase:
    require(request, "console.review_drift", "review drift cases")
    drift.update_drift_case(case_id, payload.dict(exclude_unset=True), request.user)
    return _case(case_id)


@cases.post("/{int:case_id}/comments", response={201: schemas.DriftCommentOut, **ERRORS}, summary="Comment on a case")
def comment_case(request: HttpRequest, case_id: int, payload: schemas.DriftCommentIn) -> Status:
    require(request, "console.review_drift", "comment on drift cases")
    comment = drift.add_comment(_case(case_id), payload.body, payload.quote, request.user)
    return Status(201, comment)


# --------------------------------------------------------------------------- audit log

audit_router = Router(tags=["audit log"])


@audit_router.get(
    "",
    response=list[schemas.AuditEventOut],
    summary="The audit log, newest first (as on the page: actor, action prefix, object type[:id], since, until)",
)
@paginate(Pages)
def list_audit_events(request: HttpRequest, filters: Query[schemas.AuditQueryIn]) -> Any:
    require(request, "console.view_auditevent", "read the audit log")
    query = AuditQuery(
        actor=filters.actor.strip(),
        action=filters.action.strip(),
        obj=filters.object.strip(),
        since=filters.since,
        until=filters.until,
    )
    return query.apply(AuditEvent.objects.all())


api.add_router("/sessions", sessions)
api.add_router("/runs", runs_router)
api.add_router("", archives)
api.add_router("/drift-cases", cases)
api.add_router("/audit-events", audit_router)
api.add_router("", notifications_api.router)  # /notifications, /webhooks
