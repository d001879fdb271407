"""The JSON API for agent runtimes and integrations: ``/api/v1/`` (OpenAPI docs at ``/api/v1/docs``).

Authentication: ``Authorization: Bearer <key>`` (``manage.py create_api_key``) or the browser
session (with CSRF). Every response is masked (``console.masking``: secrets as placeholders, in
content, metadata, typed text and errors alike); a key whose role holds ``console.reveal_secrets``
may add ``?reveal=1`` to get it raw, which is audited. Every error is JSON ``{"detail": "..."}``
saying what to fix; a rejected request writes nothing (each write is one transaction in ``console.services``).
"""

import json
import math
from functools import wraps
from typing import Any

from django.conf import settings
from django.core.exceptions import PermissionDenied, RequestDataTooBig
from django.db import InterfaceError, OperationalError
from django.http import HttpRequest, HttpResponse
from ninja import NinjaAPI
from ninja.errors import AuthenticationError, HttpError, Throttled, ValidationError
from ninja.operation import Operation
from ninja.parser import Parser
from ninja.security import HttpBearer, django_auth

from ..apikeys import authenticate_key
from ..errors import ServiceError
from ..middleware import database_unavailable
from ..reveal import reveal_for
from ..services.validation import MAX_JSON_DEPTH, may_hold_unstorable, unstorable
from ..throttling import API_AUTH_FAILURES, KeyRateThrottle
from .rendering import MaskingRenderer
from .routers import archives, audit_events, drift_cases, notifications, runs, sessions

# --------------------------------------------------------------------------- plumbing


class BearerKey(HttpBearer):
    """``Authorization: Bearer ccs_...``: the key's own user (in its role's group) makes the request.

    A valid key is always served. A bad key from an address whose keys failed ``API_AUTH_FAILURE_LIMIT`` times
    gets 429 instead of 401 (and is not counted again): other clients' bad keys behind the same address (a NAT,
    a proxy) never lock out a good one, and guessing stays pointless (a key holds 256 random bits).
    """

    def __call__(self, request: HttpRequest) -> Any:
        user = super().__call__(request)
        if user is None and request.headers.get("Authorization") and API_AUTH_FAILURES.blocked(request):
            raise Throttled(wait=API_AUTH_FAILURES.retry_after())
        return user

    def authenticate(self, request: HttpRequest, token: str) -> Any:
        user = authenticate_key(token)
        if user is None:
            if API_AUTH_FAILURES.blocked(request):
                raise Throttled(wait=API_AUTH_FAILURES.retry_after())
            # a 401 naming the key: falling through to the session auth would answer a POST "CSRF check Failed"
            raise AuthenticationError()
        request.user = user
        return user


class BadBody(ServiceError):
    """A request body refused before any schema sees it: 400 not JSON, 415 not sent as JSON, 422 not storable."""

    def __init__(self, detail: str, status: int = 400) -> None:
        super().__init__(detail)
        self.status = status


class StrictJsonParser(Parser):
    """The API's one JSON decoding step: what cannot be stored is refused here, naming where it is.

    Refused: a Content-Type other than JSON (415), bytes that are not UTF-8, what is not JSON (NaN, Infinity,
    numbers too large for a float or of over 4300 digits), a top level other than an object (every body is one),
    and anything ``services.validation.unstorable`` names: NUL characters and lone surrogates anywhere, keys included,
    and nesting deeper than ``MAX_JSON_DEPTH``. (NUL in the URL is refused by ``console.input_checks``.)
    """

    def parse_body(self, request: HttpRequest) -> Any:
        if not is_json(request.content_type):
            raise BadBody(not_json_detail(request.content_type), 415)
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


def is_json(content_type: str | None) -> bool:
    """``application/json`` or a ``+json`` type (``application/merge-patch+json``): what the API reads."""
    content_type = (content_type or "").lower()
    return content_type == "application/json" or (
        content_type.startswith("application/") and content_type.endswith("+json")
    )


def not_json_detail(content_type: str | None) -> str:
    return f"send the body as JSON with 'Content-Type: application/json', not {content_type or ''!r}"


#: the methods whose requests carry a body the API reads
WRITE_METHODS = frozenset({"POST", "PUT", "PATCH", "DELETE"})


def _has_body(request: HttpRequest) -> bool:
    try:
        length = int(request.META.get("CONTENT_LENGTH") or 0)
    except ValueError:
        length = 1  # a length Django cannot read is a body it cannot read either
    return length > 0 or "HTTP_TRANSFER_ENCODING" in request.META


def json_bodies_only(run: Any) -> Any:
    """A view decorator on every operation: a write whose body is not JSON is a 415, decided on the header alone.

    Before any parsing, so a multipart or form body is never read (ninja's body model would read
    ``request.POST`` and then ``request.body``, a 500), and operations that take no body refuse one
    too: a client sending a form to the API learns it at once, whichever endpoint it hits. A write without
    a body (``DELETE``, a ``POST`` that takes nothing) needs no content type.
    """

    @wraps(run)
    def wrapper(request: HttpRequest, *args: Any, **kwargs: Any) -> Any:
        if request.method in WRITE_METHODS and _has_body(request) and not is_json(request.content_type):
            return _error(request, 415, not_json_detail(request.content_type))
        return run(request, *args, **kwargs)

    return wrapper


def _json_type(value: Any) -> str:
    return {list: "an array", str: "a string", bool: "a boolean", type(None): "null"}.get(type(value), "a number")


def _not_json(constant: str) -> Any:
    raise ValueError(f"{constant} is not a JSON number")


def _finite(text: str) -> float:
    value = float(text)
    if not math.isfinite(value):
        raise ValueError(f"the number {text[:40]} is too large")
    return value


def api_reveal(view: Any) -> Any:
    """An API operation decorator: ``?reveal=1`` with the permission unmasks this response (audited)."""

    @wraps(view)
    def wrapper(request: HttpRequest, *args: Any, **kwargs: Any) -> Any:
        try:
            # the API audits the reveal against the user: the object is not known before the operation runs
            reveal_for(request, request.user)
        except PermissionDenied as exc:
            raise HttpError(403, str(exc)) from None
        return view(request, *args, **kwargs)

    return wrapper


class ConsoleApi(NinjaAPI):
    def get_openapi_operation_id(self, operation: Operation) -> str:
        # the ids the API had as one module (console/api.py), so generated clients keep their method names
        return f"console_api_{operation.view_func.__name__}"


api = ConsoleApi(
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
api.add_decorator(json_bodies_only, mode="view")


def _error(request: HttpRequest, status: int, detail: str, **extra: Any) -> HttpResponse:
    return api.create_response(request, {"detail": detail, **extra}, status=status)


@api.exception_handler(ServiceError)
def service_error(request: HttpRequest, exc: ServiceError) -> HttpResponse:
    response = _error(request, exc.status, str(exc), **getattr(exc, "extra", {}))
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
        API_AUTH_FAILURES.record_failure(request)
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


api.add_router("/sessions", sessions.sessions)
api.add_router("/runs", runs.runs_router)
api.add_router("", archives.archives)
api.add_router("/drift-cases", drift_cases.cases)
api.add_router("/audit-events", audit_events.audit_router)
api.add_router("", notifications.router)  # /notifications, /webhooks
