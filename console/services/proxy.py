"""Proxy mode's bookkeeping: match a runtime's history with what is stored, decide what goes upstream, record.

A runtime calling ``/proxy/v1/chat/completions`` sends its whole history every time. The console keeps it
as a session (``ProxyConversation`` says which, and how much of the runtime's history is stored):

- **Matching** costs no read of the history: ``seen_hash`` chains the normalized hash of each stored runtime
  message (role, content, name, tool calls, tool_call_id: what a provider reads, so the runtime's echo of an
  answer the console stored matches it whatever extra fields its SDK adds). A call whose history extends the
  stored one adds what is new; one that does not (edited, rewound, forked) is *diverged*: it is forwarded as
  sent and recorded as a new session (a fork), the old one left as it was, the divergence audited.
- **What goes upstream**: while the session was never compressed its live history *is* the runtime's, so the
  runtime's own messages go (nothing read back). Once compressed: the live (compressed) history plus the new
  messages. Over the trigger, a compression runs as an ordinary run (trigger ``proxy``) within
  ``PROXY_COMPRESS_BUDGET_MS``; past the budget the uncompressed history goes and the run finishes on its own.
  What goes upstream always keeps the latest user message verbatim and validates, else the runtime's own goes.
- **Recording** happens after the answer was relayed (``record_call``): the new messages, the answer, a
  ``ProxyCall`` row. A database that fails leaves the call in a per-process queue, recorded by the next call
  that succeeds.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import queue
import threading
from collections import OrderedDict, deque
from dataclasses import dataclass, field
from typing import Any

from django.conf import settings
from django.db import DatabaseError, connection, transaction
from django.utils import timezone

from agent_compression import validate_messages
from agent_compression.messages import content_text
from agent_compression.tokens import count_tokens

from ..audit import audit, person
from ..models import CompressionRun, ProxyCall, ProxyConversation, Session
from . import runs
from .sessions import ImportedSession, create_session
from .summarizer_factory import build_summarizer
from .validation import check_key, check_messages, session_config

log = logging.getLogger(__name__)

#: how a call's history was handled (``ProxyCall.handling`` and the ``X-Compression-Proxy`` header)
FORWARDED = "forwarded"  # the session's live history (the runtime's own while never compressed)
COMPRESSED = "compressed"  # compressed in the request path, within the budget
DEFERRED = "deferred"  # over the trigger; the compression did not finish in the budget and goes on
DIVERGED = "diverged"  # the history does not extend what was stored: forwarded as sent, recorded as a fork
BYPASS = "bypass"  # the console could not take part (its database, a check): forwarded as sent

#: a derived session key: this prefix and the hash of the conversation's opening (see ``derived_key``)
DERIVED_PREFIX = "proxy-"


# --------------------------------------------------------------------------- hashing


def message_hash(message: Any) -> str:
    """The sha256 of what a provider reads in ``message``: equal for an answer and the runtime's echo of it."""
    if not isinstance(message, dict):
        return hashlib.sha256(json.dumps(message, sort_keys=True, default=str).encode()).hexdigest()
    content = message.get("content")
    content = "" if content is None else content
    if isinstance(content, str) and not message.get("tool_calls"):  # most messages: no JSON to build
        fields = (
            str(message.get("role")),
            content,
            str(message.get("name") or ""),
            str(message.get("tool_call_id") or ""),
        )
        return hashlib.sha256(("t\x1f" + "\x1e".join(fields)).encode("utf-8", "surrogatepass")).hexdigest()
    shape: dict[str, Any] = {"role": message.get("role"), "content": content}
    for name in ("name", "tool_call_id"):
        if message.get(name):
            shape[name] = message[name]
    calls = message.get("tool_calls")
    if calls:
        shape["tool_calls"] = [
            [call.get("id"), (call.get("function") or {}).get("name"), (call.get("function") or {}).get("arguments")]
            if isinstance(call, dict)
            else call
            for call in calls
        ]
    text = json.dumps(shape, sort_keys=True, ensure_ascii=False, separators=(",", ":"), default=str)
    return hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()


def chain(hashes: list[str]) -> list[str]:
    """``chain(h)[n]`` identifies the first ``n`` messages (``[0]`` is the empty history)."""
    out = [""]
    for value in hashes:
        out.append(hashlib.sha256((out[-1] + value).encode()).hexdigest())
    return out


def derived_key(messages: list[dict[str, Any]]) -> str:
    """A session key from the conversation's opening: its system message(s) and its first user message.

    Two conversations that open the same way share it; a runtime running several should send ``X-Session-Key``.
    """
    opening: list[str] = []
    for message in messages:
        if not isinstance(message, dict):
            continue
        if message.get("role") in ("system", "developer"):
            opening.append(message_hash(message))
        elif message.get("role") == "user":
            opening.append(message_hash(message))
            break
    return DERIVED_PREFIX + hashlib.sha256("".join(opening).encode()).hexdigest()[:24]


def latest_user_message(messages: list[dict[str, Any]]) -> dict[str, Any] | None:
    for message in reversed(messages):
        if isinstance(message, dict) and message.get("role") == "user":
            return message
    return None


# --------------------------------------------------------------------------- planning a call


@dataclass
class Plan:
    """What one call forwards, and what recording it needs afterwards."""

    key: str
    user: Any
    messages: list[dict[str, Any]]
    hashes: list[str]
    upstream: list[dict[str, Any]]
    handling: str = FORWARDED
    window: int | None = None
    run_id: int | None = None
    #: why the console stepped aside (``BYPASS``), for the response header
    reason: str = ""


def plan_call(key: str, messages: list[dict[str, Any]], user: Any, window: int | None = None) -> Plan:
    """Decide what goes upstream for a call (raises DatabaseError when the database fails: the caller bypasses)."""
    hashes = [message_hash(m) for m in messages]
    plan = Plan(key=key, user=user, messages=messages, hashes=hashes, upstream=messages, window=window)
    conversation = ProxyConversation.objects.select_related("session").filter(key=key).first()
    if conversation is None:
        trial = Session(context_window_tokens=window or settings.PROXY_CONTEXT_WINDOW_TOKENS)
        if count_tokens(messages) >= session_config(trial).trigger_tokens:
            record_call(plan)  # creates the session, so the compression is an ordinary run of it
            return _compress(plan)
        return plan
    session = conversation.session
    chains = chain(hashes)
    mirrors = conversation.mirrors and session.version == conversation.synced_version
    if conversation.seen_count > len(messages) or chains[conversation.seen_count] != conversation.seen_hash:
        # a prefix of what is stored (a retry) goes as sent; a history that was rewritten is a fork
        retry = mirrors and stored_prefix(conversation, len(messages), chains[-1])
        plan.handling = FORWARDED if retry else DIVERGED
        return plan
    new = messages[conversation.seen_count :]
    tokens = session.token_count + sum(count_tokens([m]) for m in new)
    if tokens >= session_config(session).trigger_tokens and not _active_run(session):
        record_call(plan)
        return _compress(plan)
    if not mirrors:
        plan.upstream = live_history(key, messages)
        return checked(plan)
    return plan


def _active_run(session: Session) -> bool:
    return session.runs.filter(status__in=CompressionRun.ACTIVE).exists()


class LiveCache:
    """A compressed session's live history per process, by version: a call reads the version, not the history.

    The recorder extends an entry with what it appends (the version it appended to must be the cached one);
    any other change of the session (a compression, a promote) moves its version past the entry.
    """

    def __init__(self, size: int = 256) -> None:
        self.entries: OrderedDict[int, tuple[int, list[dict[str, Any]]]] = OrderedDict()
        self.size = size
        self.lock = threading.Lock()

    def get(self, session_id: int, version: int) -> list[dict[str, Any]] | None:
        with self.lock:
            entry = self.entries.get(session_id)
            if entry is None or entry[0] != version:
                return None
            self.entries.move_to_end(session_id)
            return entry[1]

    def put(self, session_id: int, version: int, messages: list[dict[str, Any]]) -> None:
        with self.lock:
            self.entries[session_id] = (version, messages)
            self.entries.move_to_end(session_id)
            while len(self.entries) > self.size:
                self.entries.popitem(last=False)

    def appended(self, session_id: int, before: int, after: int, new: list[dict[str, Any]]) -> None:
        with self.lock:
            entry = self.entries.get(session_id)
            if entry is not None and entry[0] == before:
                self.entries[session_id] = (after, entry[1] + new)


live_cache = LiveCache()


def live_history(key: str, messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The session's live history plus the runtime's messages it does not hold yet (read under its row lock)."""
    with transaction.atomic():
        conversation = ProxyConversation.objects.select_related("session").get(key=key)
        session = Session.objects.select_for_update().get(pk=conversation.session_id)
        live = live_cache.get(session.pk, session.version)
        if live is None:
            live = session.messages()
            live_cache.put(session.pk, session.version, live)
        return live + messages[conversation.seen_count :]


def _compress(plan: Plan) -> Plan:
    """Compress the session as a ``proxy`` run within the budget; forward its output, or the history as it is."""
    conversation = ProxyConversation.objects.select_related("session").get(key=plan.key)
    session = conversation.session
    latest = latest_user_message(plan.messages)
    run = CompressionRun.objects.create(
        session=session,
        trigger=CompressionRun.Trigger.PROXY,
        created_by=person(plan.user),
        focus_topic=content_text(latest)[:2000] if latest else "",
    )  # queued and not sent: the thread below claims it; if this process dies first, the recovery sweep sends it
    plan.run_id = run.pk
    done = threading.Event()

    def work() -> None:
        try:
            runs.execute_run(run.pk, summarizer=build_summarizer(settings.PROXY_SUMMARIZER))
        except Exception:
            log.exception("proxy run %s failed", run.pk)
        finally:
            connection.close()
            done.set()

    threading.Thread(target=work, name=f"proxy-run-{run.pk}", daemon=True).start()
    finished = done.wait(settings.PROXY_COMPRESS_BUDGET_MS / 1000)
    applied = finished and CompressionRun.objects.filter(pk=run.pk, applied=True).exists()
    plan.handling = COMPRESSED if applied else DEFERRED
    plan.upstream = live_history(plan.key, plan.messages)
    return checked(plan)


def checked(plan: Plan) -> Plan:
    """What goes upstream keeps the latest user message verbatim and validates; else the runtime's own goes."""
    if plan.upstream is plan.messages:
        return plan
    latest = latest_user_message(plan.messages)
    problem = ""
    if latest is not None and latest not in plan.upstream:
        problem = "the latest user message would not have gone verbatim"
    elif validate_messages(plan.upstream):
        problem = "the history to send did not validate"
    if problem:
        log.warning("proxy %s: %s; forwarding the runtime's own messages", plan.key, problem)
        plan.upstream, plan.handling, plan.reason = plan.messages, BYPASS, problem
    return plan


# --------------------------------------------------------------------------- recording


@dataclass
class Answer:
    """What the upstream answered (assembled from the stream for a streamed call)."""

    status_code: int
    message: dict[str, Any] | None = None
    model: str = ""
    finish_reason: str = ""
    usage: dict[str, Any] = field(default_factory=dict)
    latency_ms: int = 0
    stream: bool = False


#: calls whose recording failed (the database was away), recorded by the next call that succeeds
_pending: deque[tuple[Plan, Answer | None]] = deque(maxlen=1000)
_pending_lock = threading.Lock()
_drain_lock = threading.Lock()
#: chain values kept for the latest stored lengths: a call whose history is a recent prefix of what is
#: stored (a retry, or a call recorded after a later one by another web process) is recognised as such
RECENT_CHAIN = 64


class Recorder:
    """Records relayed calls from one thread per web process, in the order they were relayed.

    The web thread hands the call over and is free at once: recording (about ten queries) is never in the
    path of the runtime's next call, whose connection the same web thread serves. The thread keeps its
    database connection while busy and closes it after a second idle. A full queue records inline.
    """

    def __init__(self, size: int = 10_000) -> None:
        self.queue: queue.Queue[tuple[Plan, Answer]] = queue.Queue(maxsize=size)
        self.thread: threading.Thread | None = None
        self.pid = 0
        self.lock = threading.Lock()

    def submit(self, plan: Plan, answer: Answer) -> None:
        self._ensure_thread()
        try:
            self.queue.put_nowait((plan, answer))
        except queue.Full:
            record_after_relay(plan, answer)

    def _ensure_thread(self) -> None:
        with self.lock:
            if self.thread is None or not self.thread.is_alive() or self.pid != os.getpid():  # forked: a new one
                self.pid = os.getpid()
                self.thread = threading.Thread(target=self._run, name="proxy-recorder", daemon=True)
                self.thread.start()

    def _run(self) -> None:
        while True:
            try:
                plan, answer = self.queue.get(timeout=1.0)
            except queue.Empty:
                connection.close()
                continue
            try:
                record_after_relay(plan, answer)
            finally:
                self.queue.task_done()

    def wait(self) -> None:
        """Until everything handed over is recorded (tests, a graceful stop)."""
        self.queue.join()


recorder = Recorder()


def record_after_relay(plan: Plan, answer: Answer) -> None:
    """Record a relayed call, after those kept from an outage (in order); never raises (the runtime has its answer)."""
    if _pending:  # calls kept from an outage go first, in order: this one joins them
        defer_record(plan, answer)
        _drain_pending()
        return
    try:
        record_call(plan, answer)
    except DatabaseError:
        log.warning("proxy %s: the database failed; the call is kept to be recorded later", plan.key, exc_info=True)
        connection.close()
        defer_record(plan, answer)
    except Exception:
        log.exception("proxy %s: recording the call failed", plan.key)


def defer_record(plan: Plan, answer: Answer | None) -> None:
    with _pending_lock:
        _pending.append((plan, answer))


def _drain_pending() -> None:
    """Record the kept calls, oldest first, one thread at a time; stop at the first database failure."""
    if not _drain_lock.acquire(blocking=False):
        return  # another thread is draining: it takes this call too
    try:
        _drain()
    finally:
        _drain_lock.release()


def _drain() -> None:
    while True:
        with _pending_lock:
            if not _pending:
                return
            plan, answer = _pending.popleft()
        try:
            record_call(plan, answer)
        except DatabaseError:
            log.warning("proxy %s: the database failed; the call is kept to be recorded later", plan.key, exc_info=True)
            connection.close()
            with _pending_lock:
                _pending.appendleft((plan, answer))
            return
        except Exception:
            log.exception("proxy %s: recording the call failed; dropped", plan.key)


def pending_count() -> int:
    return len(_pending)


def stored_prefix(conversation: ProxyConversation, length: int, value: str) -> bool:
    """Whether the runtime history whose chain value is ``value`` (``length`` messages) is already stored."""
    recent = conversation.recent_chain or []
    first = conversation.seen_count - len(recent) + 1  # the length recent[0] stands for
    return first <= length <= conversation.seen_count and recent[length - first] == value


def record_call(plan: Plan, answer: Answer | None = None) -> None:
    """Store the runtime's new messages (once) and the answer; a call row when there is an answer."""
    full, hashes = list(plan.messages), list(plan.hashes)
    if answer is not None and answer.message is not None:
        full.append(answer.message)
        hashes.append(message_hash(answer.message))
    chains = chain(hashes)
    with transaction.atomic():
        # one query locks both rows (PostgreSQL's FOR UPDATE covers the joined session)
        conversation = (
            ProxyConversation.objects.select_for_update().select_related("session").filter(key=plan.key).first()
        )
        if conversation is None:
            session = _new_session(plan.key, full, plan.window, plan.user, {})
            conversation = ProxyConversation(key=plan.key, session=session, synced_version=session.version)
            _advance(conversation, session, chains)
        else:
            session = conversation.session
            seen = conversation.seen_count
            if seen <= len(full) and chains[seen] == conversation.seen_hash:
                mirrored = conversation.mirrors and session.version == conversation.synced_version
                if full[seen:]:
                    before = session.version
                    session.append(check_messages(full[seen:], first_index=session.message_count))
                    live_cache.appended(session.pk, before, session.version, full[seen:])
                conversation.mirrors = mirrored
                _advance(conversation, session, chains)
            elif not stored_prefix(conversation, len(full), chains[-1]):
                session = _fork(conversation, session, full, plan.user)
                conversation.session, conversation.mirrors = session, True
                _advance(conversation, session, chains)
            # else: all of it is stored already (a retry, or recorded after a later call): only the call row
        if answer is not None:
            ProxyCall.objects.create(
                session=session,
                # the answer's history index: its place in the runtime's full (never compressed) history
                position=len(full) - 1 if answer.message is not None else None,
                model=answer.model[:255],
                stream=answer.stream,
                status_code=answer.status_code,
                finish_reason=(answer.finish_reason or "")[:32],
                usage=answer.usage if isinstance(answer.usage, dict) else {},
                latency_ms=answer.latency_ms,
                handling=plan.handling,
                messages_sent=len(plan.upstream),
                run_id=plan.run_id,
                created_at=timezone.now(),
            )


def _advance(conversation: ProxyConversation, session: Session, chains: list[str]) -> None:
    """The conversation now stores the history ``chains`` stands for."""
    conversation.seen_count, conversation.seen_hash = len(chains) - 1, chains[-1]
    conversation.recent_chain = chains[1:][-RECENT_CHAIN:]
    conversation.synced_version = session.version
    conversation.save()


def _new_session(
    key: str, messages: list[dict[str, Any]], window: int | None, user: Any, extra: dict[str, Any]
) -> Session:
    metadata = {"proxied": True, "proxy_conversation": key} | extra
    if ":" not in key:
        metadata["channel"] = "proxy"
    data = ImportedSession(
        key=check_key(key),
        messages=messages,
        metadata=metadata,
        context_window_tokens=window or settings.PROXY_CONTEXT_WINDOW_TOKENS,
    )
    return create_session(data, user=user)


def _fork(conversation: ProxyConversation, old: Session, full: list[dict[str, Any]], user: Any) -> Session:
    """A new session for a history that does not extend the stored one; the old one stays as it was."""
    number = conversation.forks + 1
    while Session.objects.filter(key=f"{conversation.key[:240]}~{number}").exists():
        number += 1
    key = f"{conversation.key[:240]}~{number}"
    extra = {"forked_from": old.key, "stored_messages": conversation.seen_count, "sent_messages": len(full)}
    session = _new_session(key, full, old.context_window_tokens, user, extra)
    conversation.forks = number
    audit(user, "proxy.diverge", old, after={"fork": key} | {k: v for k, v in extra.items() if k != "forked_from"})
    return session
