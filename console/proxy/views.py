"""``/proxy/v1/chat/completions`` and ``/proxy/v1/models``: OpenAI-compatible, relayed to the configured upstream.

Request headers: ``Authorization: Bearer <console API key>`` (a role that may store sessions),
``X-Session-Key`` (else a key derived from the conversation's opening, ``console.services.proxy.derived_key``),
``X-Context-Window-Tokens`` (a new session's window), ``X-Upstream-Authorization`` (the upstream's key for this
call, instead of ``PROXY_UPSTREAM_API_KEY``). Response headers: ``X-Compression-Proxy`` (forwarded, compressed,
deferred, diverged, bypass), ``X-Compression-Proxy-Reason`` when the console stepped aside, and
``X-Compression-Session`` (the session's key). Upstream errors come back as the upstream sent them.
"""

from __future__ import annotations

import json
import logging
import time
from typing import Any

import httpx
from django.conf import settings
from django.contrib.auth.decorators import login_not_required
from django.db import InterfaceError, OperationalError
from django.http import HttpRequest, HttpResponse, JsonResponse, StreamingHttpResponse
from django.views.decorators.csrf import csrf_exempt

from ..services import proxy
from ..services.validation import key_problem
from . import relay
from .auth import Refused, caller

log = logging.getLogger(__name__)

SESSION_HEADER = "X-Session-Key"
WINDOW_HEADER = "X-Context-Window-Tokens"
UPSTREAM_KEY_HEADER = "X-Upstream-Authorization"
HANDLING_HEADER = "X-Compression-Proxy"
REASON_HEADER = "X-Compression-Proxy-Reason"
SESSION_OUT_HEADER = "X-Compression-Session"
DATABASE_DOWN = "the console's database is unavailable; the call will be recorded later"


def openai_error(status: int, message: str, kind: str = "invalid_request_error", **headers: str) -> JsonResponse:
    """An error in the OpenAI format (``{"error": {...}}``), so SDKs raise their usual exceptions."""
    body = {"error": {"message": message, "type": kind, "param": None, "code": None}}
    return JsonResponse(body, status=status, headers=headers or None)


class RecordedResponse(HttpResponse):
    """A response that records the call once it has been sent (``close`` runs after the last byte)."""

    after: Any = None

    def close(self) -> None:
        after, self.after = self.after, None  # once, however many times the server closes it
        try:
            if after is not None:
                after()
        finally:
            super().close()


def _refused(exc: Refused) -> JsonResponse:
    kind = {401: "authentication_error", 403: "permission_error", 429: "rate_limit_error"}.get(exc.status, "api_error")
    headers = {"Retry-After": str(exc.retry_after)} if exc.retry_after else {}
    return openai_error(exc.status, str(exc), kind, **headers)


def _upstream_key(request: HttpRequest) -> str:
    given = request.headers.get(UPSTREAM_KEY_HEADER, "").strip()
    if given:
        scheme, _, rest = given.partition(" ")
        return rest.strip() if scheme.lower() == "bearer" and rest.strip() else given
    return settings.PROXY_UPSTREAM_API_KEY


def _window(request: HttpRequest) -> int | None:
    raw = request.headers.get(WINDOW_HEADER, "").strip()
    if not raw:
        return None
    if not raw.isdigit() or not 256 <= int(raw) <= 10_000_000:
        raise ValueError(f"{WINDOW_HEADER} must be a whole number of tokens between 256 and 10000000, not {raw!r}")
    return int(raw)


def _request_body(request: HttpRequest) -> dict[str, Any]:
    try:
        body = json.loads(request.body)
    except ValueError as exc:
        raise ValueError(f"the request body is not JSON: {exc}") from None
    if not isinstance(body, dict):
        raise ValueError("the request body must be a JSON object")
    messages = body.get("messages")
    if not isinstance(messages, list) or not messages or not all(isinstance(m, dict) for m in messages):
        raise ValueError("'messages' must be a non-empty array of message objects")
    return body


def _plan(request: HttpRequest, user: Any, messages: list[dict[str, Any]], window: int | None) -> proxy.Plan:
    key = request.headers.get(SESSION_HEADER, "").strip() or proxy.derived_key(messages)
    problem = key_problem(key)
    if problem:
        raise ValueError(f"{SESSION_HEADER}: {problem}")
    try:
        return proxy.plan_call(key, messages, user, window)
    except (OperationalError, InterfaceError):
        log.warning("proxy %s: the database is unavailable; forwarding as sent", key, exc_info=True)
        reason = DATABASE_DOWN
    except Exception:
        log.exception("proxy %s: planning the call failed; forwarding as sent", key)
        reason = "the console failed to prepare the history; forwarded as sent"
    hashes = [proxy.message_hash(m) for m in messages]
    plan = proxy.Plan(key=key, user=user, messages=messages, hashes=hashes, upstream=messages, window=window)
    plan.handling, plan.reason = proxy.BYPASS, reason
    return plan


def _mark(response: HttpResponse | StreamingHttpResponse, plan: proxy.Plan) -> None:
    response[HANDLING_HEADER] = plan.handling
    response[SESSION_OUT_HEADER] = plan.key
    if plan.reason:
        response[REASON_HEADER] = plan.reason


def _record(plan: proxy.Plan, answer: proxy.Answer) -> None:
    if plan.handling == proxy.BYPASS and plan.reason == DATABASE_DOWN:
        proxy.defer_record(plan, answer)  # tried by the next call that reaches the database
        return
    proxy.recorder.submit(plan, answer)  # recorded by the process's recorder thread, in order


@csrf_exempt
@login_not_required
def chat_completions(request: HttpRequest) -> HttpResponse | StreamingHttpResponse:
    started = time.monotonic()
    if request.method != "POST":
        return openai_error(405, "use POST")
    try:
        user = caller(request)
    except Refused as exc:
        return _refused(exc)
    if not settings.PROXY_UPSTREAM_BASE_URL:
        return openai_error(503, "no upstream is configured: set PROXY_UPSTREAM_BASE_URL (or OPENAI_BASE_URL)")
    try:
        body = _request_body(request)
        plan = _plan(request, user, body["messages"], _window(request))
    except ValueError as exc:
        return openai_error(400, str(exc))
    body["messages"] = plan.upstream
    stream = body.get("stream") is True
    outgoing = relay.client().build_request(
        "POST",
        relay.upstream_url("/chat/completions"),
        headers=relay.upstream_headers(_upstream_key(request)),
        content=json.dumps(body, ensure_ascii=False).encode(),
    )
    try:
        upstream = relay.client().send(outgoing, stream=True)
    except httpx.HTTPError as exc:
        _record(plan, proxy.Answer(status_code=502, latency_ms=_ms(started), stream=stream))
        response = openai_error(502, f"the upstream could not be reached: {type(exc).__name__}", "api_error")
        _mark(response, plan)
        return response
    if not stream or upstream.status_code >= 400 or "event-stream" not in upstream.headers.get("content-type", ""):
        return _whole(plan, upstream, started, stream)
    return _streamed(plan, upstream, started)


def _whole(plan: proxy.Plan, upstream: httpx.Response, started: float, stream: bool) -> HttpResponse:
    """An answer read whole (not streamed, or an error): relayed with its status, body and rate-limit headers."""
    try:
        content = upstream.read()
    finally:
        upstream.close()
    response = RecordedResponse(
        content,
        status=upstream.status_code,
        content_type=upstream.headers.get("content-type", "application/json"),
        headers=relay.relayed_headers(upstream),
    )
    answer = relay.completion_answer(upstream.status_code, content, _ms(started))
    if upstream.status_code >= 400:
        answer.message = None
    answer.stream = stream
    response.after = lambda: _record(plan, answer)
    _mark(response, plan)
    return response


def _streamed(plan: proxy.Plan, upstream: httpx.Response, started: float) -> StreamingHttpResponse:
    def done(assembler: relay.StreamAssembler) -> None:
        _record(plan, assembler.answer(upstream.status_code, _ms(started)))

    response = StreamingHttpResponse(
        relay.Relay(upstream, done),
        status=upstream.status_code,
        content_type=upstream.headers.get("content-type", "text/event-stream"),
        headers=relay.relayed_headers(upstream),
    )
    response["Cache-Control"] = "no-cache"
    response["X-Accel-Buffering"] = "no"  # a reverse proxy in front must not buffer it either
    _mark(response, plan)
    return response


@csrf_exempt
@login_not_required
def models(request: HttpRequest) -> HttpResponse:
    """The upstream's model list, passed through."""
    if request.method != "GET":
        return openai_error(405, "use GET")
    try:
        caller(request)
    except Refused as exc:
        return _refused(exc)
    if not settings.PROXY_UPSTREAM_BASE_URL:
        return openai_error(503, "no upstream is configured: set PROXY_UPSTREAM_BASE_URL (or OPENAI_BASE_URL)")
    try:
        headers = relay.upstream_headers(_upstream_key(request))
        upstream = relay.client().get(relay.upstream_url("/models"), headers=headers)
    except httpx.HTTPError as exc:
        return openai_error(502, f"the upstream could not be reached: {type(exc).__name__}", "api_error")
    return HttpResponse(
        upstream.content,
        status=upstream.status_code,
        content_type=upstream.headers.get("content-type", "application/json"),
        headers=relay.relayed_headers(upstream),
    )


def _ms(started: float) -> int:
    return int((time.monotonic() - started) * 1000)
