"""Report each compression a runtime does in-process to the console (``POST /api/v1/runs/report``).

:class:`ConsoleReporter` is the standard-library client: ``Compressor(config, reporter=reporter)``
hands it every result, ``compress()`` only enqueues it (a few microseconds), and one background
daemon thread sends the reports in order. The thread masks secrets first, with the pipeline's own
masking and key (:mod:`agent_compression.secrets`, ``CompressionConfig.secret_mask_key``), so the
console never receives a raw secret and the summary's placeholders match the history's.

Delivery: a timeout per request; connection errors, timeouts, 408, 425, 429 and 5xx answers are
retried with exponential backoff and jitter (``Retry-After`` is honoured up to ``max_backoff``);
any other 4xx is the report's own fault and is not retried. Every report carries an
``Idempotency-Key`` made when it is queued, the same on each attempt, so a report whose answer
was lost is stored once. The queue is bounded: when it is full the OLDEST report is dropped and
counted. Nothing here raises into the agent: failures are counted in :attr:`ConsoleReporter.stats`
and logged (logger ``agent_compression.reporting``).
"""

from __future__ import annotations

import json
import logging
import os
import random
import threading
import time
import urllib.error
import urllib.request
import uuid
from collections import deque
from collections.abc import Sequence
from dataclasses import dataclass
from email.message import Message as Headers
from typing import TYPE_CHECKING, Any, Protocol

from .secrets import MaskKey, mask_message, mask_secrets

if TYPE_CHECKING:
    from .pipeline import CompressionResult

log = logging.getLogger(__name__)

#: the console's endpoint, under the ``base_url`` the reporter is given
REPORT_PATH = "/api/v1/runs/report"

#: answers worth sending the same report again: the console (or what is in front of it) may answer
#: differently later. Any other 4xx says the report itself is refused.
RETRY_STATUSES = frozenset({408, 425, 429, 500, 502, 503, 504})

#: the provenance fields the endpoint accepts (it refuses unknown ones)
_PROVENANCE_FIELDS = (
    "generator",
    "model",
    "endpoint_host",
    "prompt_version",
    "prompt_hash",
    "input_tokens",
    "output_tokens",
    "latency_ms",
)


class Reporter(Protocol):
    """What ``Compressor(reporter=...)`` calls after each ``compress()``; must return at once and never raise."""

    def report(
        self,
        messages: Sequence[dict[str, Any]],
        result: CompressionResult,
        *,
        session_key: str | None = None,
        focus_topic: str | None = None,
        mask_key: MaskKey = None,
    ) -> None: ...


@dataclass(frozen=True)
class ReporterStats:
    """Counts since the reporter was made (a snapshot: read ``reporter.stats`` again for new ones)."""

    #: reports accepted by ``report()``
    queued: int = 0
    #: reports the console stored (``replayed`` included)
    sent: int = 0
    #: of ``sent``: the console had stored it already (an attempt whose answer was lost)
    replayed: int = 0
    #: attempts made after a failed one
    retries: int = 0
    #: never sent: the queue was full (the oldest goes), or they came after ``close()`` or were still queued then
    dropped: int = 0
    #: given up: the console refused them (4xx), they still failed after ``retries``, or they had no session key
    failed: int = 0
    #: queued or being sent now
    pending: int = 0
    #: the last failure, for a log line or a health check ("" when none)
    last_error: str = ""


@dataclass
class _Report:
    session_key: str
    messages: list[dict[str, Any]]
    output: list[dict[str, Any]]
    result: CompressionResult
    focus_topic: str | None
    mask_key: MaskKey
    idempotency_key: str


@dataclass(frozen=True)
class _Answer:
    #: the HTTP status, 0 when none came (refused, reset, timed out)
    status: int
    replayed: bool = False
    #: seconds the answer's Retry-After asks for
    retry_after: float = 0.0
    error: str = ""


class ConsoleReporter:
    """Sends each compression to the console from one background daemon thread. See the module docstring.

    ``base_url``: the console's address (``https://console.example``); ``api_key``: a key of a role that may
    compress (``manage.py create_api_key --name NAME --role operator``). ``session_key``: the console session reports go
    to when ``compress()`` names none (``compress(..., session_key=...)``). ``queue_size``: reports held at
    most; ``timeout``: seconds per request; ``retries``: attempts after the first for a transient failure
    (``None``: until the console answers or ``close()``); ``backoff``: the first wait in seconds, doubled per
    retry up to ``max_backoff``, each wait drawn between half and all of it.
    """

    def __init__(
        self,
        base_url: str,
        api_key: str,
        *,
        session_key: str | None = None,
        queue_size: int = 1000,
        timeout: float = 10.0,
        retries: int | None = 8,
        backoff: float = 0.5,
        max_backoff: float = 30.0,
    ) -> None:
        if not base_url.startswith(("http://", "https://")):
            raise ValueError(f"base_url must start with http:// or https://, got {base_url!r}")
        if not api_key:
            raise ValueError("api_key is empty: create one with `manage.py create_api_key --name NAME --role operator`")
        if queue_size < 1:
            raise ValueError("queue_size must be at least 1")
        if timeout <= 0 or backoff < 0 or max_backoff < backoff:
            raise ValueError("timeout must be positive, and 0 <= backoff <= max_backoff")
        if retries is not None and retries < 0:
            raise ValueError("retries must be 0 or more (None: retry until close)")
        self.url = base_url.rstrip("/") + REPORT_PATH
        self.session_key = session_key
        self.queue_size = queue_size
        self.timeout = timeout
        self.retries = retries
        self.backoff = backoff
        self.max_backoff = max_backoff
        self._api_key = api_key
        self._closed = False
        self._counts = {"queued": 0, "sent": 0, "replayed": 0, "retries": 0, "dropped": 0, "failed": 0}
        self._last_error = ""
        self._start()

    def _start(self) -> None:
        """A queue, a lock and a thread of this process's own (again in a child after ``fork``: the
        parent's thread does not exist there, and the parent's queued reports are the parent's to send)."""
        self._pid = os.getpid()
        self._queue: deque[_Report] = deque()
        self._changed = threading.Condition()
        self._stop = threading.Event()
        self._busy = False
        self._thread = threading.Thread(target=self._run, name="agent-compression-reporter", daemon=True)
        self._thread.start()

    def __repr__(self) -> str:  # never shows the key
        return f"ConsoleReporter({self.url!r}, session_key={self.session_key!r})"

    # ------------------------------------------------------------------ the agent's side

    def report(
        self,
        messages: Sequence[dict[str, Any]],
        result: CompressionResult,
        *,
        session_key: str | None = None,
        focus_topic: str | None = None,
        mask_key: MaskKey = None,
    ) -> None:
        """Queue one compression (``messages``: its input) for the console; returns at once, never raises."""
        key = session_key or self.session_key
        if self._pid != os.getpid() and not self._closed:  # a forked worker process (gunicorn, Celery prefork)
            self._start()
        with self._changed:
            if self._closed:
                self._counts["dropped"] += 1
                return
            if not key:
                self._fail("no session key: pass compress(..., session_key=...) or ConsoleReporter(session_key=...)")
                return
            # copies of the lists (not the messages): the agent goes on appending to its history
            item = _Report(key, list(messages), list(result.messages), result, focus_topic, mask_key, uuid.uuid4().hex)
            if len(self._queue) >= self.queue_size:
                self._queue.popleft()
                self._counts["dropped"] += 1
            self._queue.append(item)
            self._counts["queued"] += 1
            self._changed.notify_all()

    @property
    def stats(self) -> ReporterStats:
        with self._changed:
            pending = len(self._queue) + int(self._busy)
            return ReporterStats(**self._counts, pending=pending, last_error=self._last_error)

    @property
    def dropped(self) -> int:
        return self.stats.dropped

    def flush(self, timeout: float | None = None) -> bool:
        """Wait until every queued report was sent or given up; False if ``timeout`` seconds passed first."""
        with self._changed:
            return self._changed.wait_for(lambda: not self._queue and not self._busy, timeout)

    def close(self, timeout: float | None = 5.0) -> bool:
        """Flush for up to ``timeout`` seconds, then stop the thread; reports still queued are dropped (and
        counted). Later ``report()`` calls are dropped too. True when everything queued was sent or given up.

        A report being sent when the thread is stopped finishes its attempt (it is not retried after it).
        Closing again returns at once."""
        with self._changed:
            if self._stop.is_set():
                return not self._queue and not self._busy
            self._closed = True
        done = self.flush(timeout)
        self._stop.set()
        with self._changed:
            self._counts["dropped"] += len(self._queue)
            self._queue.clear()
            self._changed.notify_all()
        self._thread.join(timeout=1.0 if timeout is None else min(timeout, 1.0))
        return done

    def __enter__(self) -> ConsoleReporter:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # ------------------------------------------------------------------ the thread's side

    def _run(self) -> None:
        while True:
            with self._changed:
                self._changed.wait_for(lambda: self._queue or self._stop.is_set())
                if self._stop.is_set():
                    return
                item = self._queue.popleft()
                self._busy = True
            try:
                self._deliver(item)
            except Exception as exc:  # a bug here must not end the thread and leave flush() waiting
                log.exception("reporting a compression failed")
                with self._changed:
                    self._fail(f"{type(exc).__name__}: {exc}")
            finally:
                with self._changed:
                    self._busy = False
                    self._changed.notify_all()

    def _deliver(self, item: _Report) -> None:
        fields = report_body(
            item.session_key,
            item.messages,
            item.result,
            output=item.output,
            focus_topic=item.focus_topic,
            mask_key=item.mask_key,
        )
        body = json.dumps(fields, ensure_ascii=False).encode("utf-8")
        attempt = 0
        while True:
            answer = self._attempt(body, item.idempotency_key)
            with self._changed:
                if answer.status in (200, 201):
                    self._counts["sent"] += 1
                    self._counts["replayed"] += int(answer.replayed)
                    return
                if answer.status and answer.status not in RETRY_STATUSES:
                    self._fail(f"the console refused a report for {item.session_key!r}: {answer.error}")
                    return
                if self.retries is not None and attempt >= self.retries:
                    self._fail(f"a report for {item.session_key!r} failed {attempt + 1} times; last: {answer.error}")
                    return
                self._last_error = answer.error
                self._counts["retries"] += 1
            delay = min(self.max_backoff, self.backoff * 2**attempt)
            delay = max(random.uniform(delay / 2, delay), min(answer.retry_after, self.max_backoff))
            attempt += 1
            if self._stop.wait(delay):  # close() ended the wait
                with self._changed:
                    self._counts["dropped"] += 1
                return

    def _attempt(self, body: bytes, idempotency_key: str) -> _Answer:
        """One POST of one report."""
        request = urllib.request.Request(
            self.url,
            data=body,
            method="POST",
            headers={
                "Authorization": f"Bearer {self._api_key}",
                "Content-Type": "application/json",
                "Accept": "application/json",
                "Idempotency-Key": idempotency_key,
                "User-Agent": "agent-compression-reporter",
            },
        )
        started = time.monotonic()
        try:
            with urllib.request.urlopen(request, timeout=self.timeout) as response:  # noqa: S310 (http/s checked)
                response.read()
                return _Answer(response.status, replayed=response.headers.get("Idempotent-Replayed") == "true")
        except urllib.error.HTTPError as exc:
            return _Answer(exc.code, retry_after=_retry_after(exc.headers), error=f"HTTP {exc.code}: {_detail(exc)}")
        except (OSError, ValueError) as exc:  # refused, reset, timed out, DNS, a broken answer
            reason = getattr(exc, "reason", exc)
            waited = time.monotonic() - started
            return _Answer(0, error=f"no answer after {waited:.1f} s: {type(reason).__name__}: {reason}")

    def _fail(self, error: str) -> None:
        """Count a report given up (the lock is held)."""
        self._counts["failed"] += 1
        self._last_error = error
        log.warning("agent_compression reporter: %s", error)


def report_body(
    session_key: str,
    messages: Sequence[dict[str, Any]],
    result: CompressionResult,
    *,
    output: Sequence[dict[str, Any]] | None = None,
    focus_topic: str | None = None,
    mask_key: MaskKey = None,
) -> dict[str, Any]:
    """The endpoint's JSON body for one compression of ``messages``, every string masked under ``mask_key``.

    ``output``: the result's messages as they were when it was queued (default ``result.messages``). The
    archive is sent as the masked input's own slice, so the console finds it there.
    """
    masked: dict[int, Any] = {}

    def mask(message: dict[str, Any]) -> Any:
        found = masked.get(id(message))
        if found is None:
            found = masked[id(message)] = mask_message(message, mask_key)
        return found

    body: dict[str, Any] = {
        "session_key": session_key,
        "input_messages": [mask(m) for m in messages],
        "output_messages": [mask(m) for m in (result.messages if output is None else output)],
    }
    archive = result.archive
    if archive is not None and archive.end > archive.start:
        body["archive_messages"] = body["input_messages"][archive.start : archive.end]
        if result.summary_text:
            body["summary_text"] = mask_secrets(result.summary_text, mask_key)
            provenance: dict[str, Any] = {}
            if result.summary is not None:
                provenance = {f: getattr(result.summary, f) for f in _PROVENANCE_FIELDS}
                provenance["latency_ms"] = round(result.summary.latency_ms, 1)
            if focus_topic:
                provenance["focus_topic"] = mask_secrets(focus_topic, mask_key)
            body["provenance"] = provenance
    return body


def _detail(error: urllib.error.HTTPError) -> str:
    try:
        text = error.read(2000).decode("utf-8", "replace")
    except OSError:
        return str(error.reason)
    try:
        detail = json.loads(text).get("detail")
    except (ValueError, AttributeError):
        detail = None
    return str(detail or text or error.reason)[:500]


def _retry_after(headers: Headers | None) -> float:
    value = headers.get("Retry-After") if headers is not None else None
    try:
        return max(0.0, float(value)) if value else 0.0
    except ValueError:
        return 0.0  # an HTTP date: the backoff decides
