"""The filters pages and the API share: sessions, drift cases, the audit log, and archive search.

Each query object is parsed leniently from a page's GET (a value that is not one of the choices is
ignored) or built from the API's validated query schema, then ``apply``d to a queryset. Hand-written
rather than django-filter FilterSets: the lists need lenient parsing, their own round-trip to URLs
(pager, sort links) and a content search whose strategy depends on how many messages match, none of
which a FilterSet does without being rebuilt around it.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from datetime import date, datetime, time, timedelta
from typing import Any
from urllib.parse import urlencode

from django.db.models import Exists, OuterRef, Q, QuerySet
from django.http import QueryDict
from django.utils import timezone

from agent_compression.types import DRIFT_KINDS

from .masking import key_order, key_search
from .models import AuditEvent, CompressionRun, DriftCase, Message, Notification, Session, SessionEntry

#: the drift kinds a case can have (the detector's, plus "other" for cases opened by hand)
KINDS = (*DRIFT_KINDS, "other")
SEVERITIES = ("high", "medium", "low")


def choice(params: QueryDict, name: str, allowed: Iterable[str], default: str = "") -> str:
    """A query parameter that must be one of ``allowed``; anything else (or nothing) gives ``default``."""
    value = params.get(name, default).strip()
    return value if value in allowed else default


@dataclass(frozen=True)
class Problem:
    """A filter value a list does not know: the page ignores it and says so; the API answers 422 with it."""

    name: str
    value: str
    allowed: tuple[str, ...] = ()

    def __str__(self) -> str:
        if not self.allowed:
            return f"{self.name}: {self.value!r} is not valid"
        return f"{self.name}: unknown value {self.value!r}; one of: {', '.join(self.allowed)}"

    @property
    def allowed_text(self) -> str:
        return ", ".join(self.allowed)


def problems(params: QueryDict, choices: Mapping[str, Iterable[str]]) -> tuple[Problem, ...]:
    """The parameters given (not empty) whose value is not one of their choices."""
    found = []
    for name, allowed in choices.items():
        value = params.get(name, "").strip()
        options = tuple(allowed)
        if value and value not in options:
            found.append(Problem(name, value[:100], options))
    return tuple(found)


def mentioning(user: Any) -> Q:
    """Cases with a comment that mentions ``user``."""
    return Q(comments__mentions=user)


# --------------------------------------------------------------------------- sessions


def session_search(sessions: QuerySet[Session], q: str) -> QuerySet[Session]:
    """The API's list: ``q`` in the key (as this reader sees keys) or the channel, recently updated first."""
    sessions = sessions.order_by("-updated_at", "-id")
    if q.strip():
        # channels are stored masked (Session.save)
        sessions = sessions.filter(key_search(q.strip()) | Q(channel__icontains=q.strip()))
    return sessions


#: content search: how many matching distinct messages count as "few", and the most sent as a list
CONTENT_KEYS_FEW = 50
CONTENT_KEYS_MAX = 2000
SORTS = {"updated": "updated_at", "key": "key", "messages": "message_count", "tokens": "token_count"}


@dataclass(frozen=True)
class SessionQuery:
    """The list's search, filters and sort, parsed leniently from GET (unknown values are ignored)."""

    q: str = ""
    #: "all": keys and message content; "key": keys only (faster on huge stores)
    scope: str = "all"
    compressed: str = ""
    drift: str = ""
    status: str = ""
    channel: str = ""
    sort: str = "updated"
    order: str = "desc"
    #: values given that the list does not know (ignored; the page says so)
    problems: tuple[Problem, ...] = field(default=(), compare=False)

    @classmethod
    def parse(cls, params: QueryDict) -> SessionQuery:
        sort = choice(params, "sort", SORTS, "updated")
        choices = {
            "scope": ("all", "key"),
            "compressed": ("yes", "no"),
            "drift": ("open", "none"),
            "sort": tuple(SORTS),
            "order": ("asc", "desc"),
        }
        return cls(
            problems=problems(params, choices),
            q=params.get("q", "").strip()[:200],
            scope=choice(params, "scope", ("all", "key"), "all"),
            compressed=choice(params, "compressed", ("yes", "no")),
            drift=choice(params, "drift", ("open", "none")),
            status=params.get("status", "").strip()[:32],
            channel=params.get("channel", "").strip()[:64],
            sort=sort,
            order=choice(params, "order", ("asc", "desc"), "asc" if sort == "key" else "desc"),
        )

    @property
    def filtered(self) -> bool:
        return bool(self.q or self.compressed or self.drift or self.status or self.channel)

    def apply(self, sessions: QuerySet[Session]) -> QuerySet[Session]:
        if self.q:
            match: Any = key_search(self.q)  # as the list shows keys: masked
            if self.scope == "all":
                match |= self._content_match()
            sessions = sessions.filter(match)
        if self.compressed:
            runs = CompressionRun.objects.filter(session=OuterRef("pk"), applied=True, was_compressed=True)
            compressed = Exists(runs)
            sessions = sessions.filter(compressed if self.compressed == "yes" else ~compressed)
        if self.drift:
            open_drift = Exists(DriftCase.objects.filter(session=OuterRef("pk"), status=DriftCase.Status.OPEN))
            sessions = sessions.filter(open_drift if self.drift == "open" else ~open_drift)
        if self.status:
            sessions = sessions.filter(status=self.status)
        if self.channel:
            sessions = sessions.filter(channel=self.channel)
        sign = "-" if self.order == "desc" else ""
        # the id breaks ties so that pages never repeat or skip a row
        if self.sort == "key":  # on the key as the list shows it (masked): the raw order would leak a hidden key
            order = key_order()
            return sessions.order_by(order.desc() if sign else order.asc(), f"{sign}id")
        return sessions.order_by(f"{sign}{SORTS[self.sort]}", f"{sign}id")

    def _content_match(self) -> Any:
        """Sessions whose history holds a message containing ``q`` (``Message.text`` is stored masked).

        A message is stored once however many sessions share it, so the distinct messages are
        searched first (one query). A few matches (a name, an order number): their sessions come
        from the entries' message index. Many (a common word): each session is checked against
        them, which stops at the first hit and lets the page query stop after 50 rows.
        (Measured with bench/sessions_list.py on SQLite and PostgreSQL.)
        """
        matching = Message.objects.filter(text__icontains=self.q).values_list("sha256", flat=True)
        keys = list(matching[: CONTENT_KEYS_MAX + 1])
        if not keys:
            return Q(pk__in=[])
        if len(keys) <= CONTENT_KEYS_FEW:
            return Q(pk__in=SessionEntry.objects.filter(message_id__in=keys).values("session_id"))
        entries = SessionEntry.objects.filter(session=OuterRef("pk"))
        if len(keys) <= CONTENT_KEYS_MAX:
            return Exists(entries.filter(message_id__in=keys))
        return Exists(entries.filter(message_id__in=matching))

    def params(self, **changes: str) -> str:
        """This query as a URL query string, with ``changes`` applied and defaults left out."""
        values = {
            "q": self.q,
            "scope": self.scope,
            "compressed": self.compressed,
            "drift": self.drift,
            "status": self.status,
            "channel": self.channel,
            "sort": self.sort,
            "order": self.order,
        }
        values.update(changes)
        if values["order"] == ("asc" if values["sort"] == "key" else "desc"):
            values["order"] = ""
        if values["sort"] == "updated":
            values["sort"] = ""
        if values["scope"] == "all":
            values["scope"] = ""
        return urlencode({k: v for k, v in values.items() if v})

    def sort_link(self, name: str) -> str:
        """Clicking the current sort column flips its order; another column starts in its natural order."""
        flipped = "asc" if self.order == "desc" else "desc"
        natural = "asc" if name == "key" else "desc"
        return self.params(sort=name, order=flipped if name == self.sort else natural)


# --------------------------------------------------------------------------- drift cases


@dataclass(frozen=True)
class CaseQuery:
    """The queue's filters, parsed leniently from GET (unknown values are ignored). By default: open cases."""

    status: str = "open"
    severity: str = ""
    kind: str = ""
    session: str = ""
    #: a username, "me" or "none"
    assignee: str = ""
    #: "me": cases with a comment that mentions the viewer
    mentions: str = ""
    #: values given that the queue does not know (ignored; the page says so)
    problems: tuple[Problem, ...] = field(default=(), compare=False)

    @classmethod
    def parse(cls, params: QueryDict) -> CaseQuery:
        mentions = choice(params, "mentions", ("me",))
        choices = {
            "status": (*DriftCase.Status.values, "all"),
            "severity": SEVERITIES,
            "kind": KINDS,
            "mentions": ("me",),
        }
        return cls(
            problems=problems(params, choices),
            # what mentions me matters in any status (a confirmed case's thread goes on): by default, all of them
            status=choice(params, "status", [*DriftCase.Status.values, "all"], cls.default_status(mentions)),
            severity=choice(params, "severity", SEVERITIES),
            kind=choice(params, "kind", KINDS),
            session=params.get("session", "").strip()[:255],
            assignee=params.get("assignee", "").strip()[:150],
            mentions=mentions,
        )

    @staticmethod
    def default_status(mentions: str) -> str:
        return "all" if mentions else "open"

    @property
    def filtered(self) -> bool:
        return self != CaseQuery(status=self.default_status(self.mentions), mentions=self.mentions) or bool(
            self.mentions
        )

    def apply(self, cases: QuerySet[DriftCase], user: Any) -> QuerySet[DriftCase]:
        """The matching cases, newest first. ``session`` is part of a key as this reader sees keys (masked
        unless this request reveals); ``status`` "all" (or "" from the API) is every status."""
        if self.status not in ("all", ""):
            cases = cases.filter(status=self.status)
        if self.severity:
            cases = cases.filter(severity=self.severity)
        if self.kind:
            cases = cases.filter(DriftCase.of_kind(self.kind))
        if self.session:
            cases = cases.filter(key_search(self.session, prefix="session__"))
        if self.assignee == "none":
            cases = cases.filter(assignee=None)
        elif self.assignee:
            cases = cases.filter(assignee__username=user.get_username() if self.assignee == "me" else self.assignee)
        if self.mentions:
            cases = cases.filter(pk__in=DriftCase.objects.filter(mentioning(user)).values("pk"))
        return cases.order_by("-created_at", "-id")

    def params(self) -> str:
        default = self.default_status(self.mentions)
        values = {k: v for k, v in vars(self).items() if v and k != "problems" and (k != "status" or v != default)}
        return urlencode(values)


# --------------------------------------------------------------------------- audit log


#: what people type in the object filter -> object_type (after lower-casing and dropping "_", "-" and spaces)
TYPE_ALIASES = {"run": "compressionrun", "case": "driftcase", "driftcases": "driftcase", "key": "apikey"}


def object_type_of(text: str) -> str:
    """``drift_case``, ``Drift case``, ``run``: the object_type the audit log stores for it."""
    name = "".join(c for c in text.lower() if c not in "_- ")
    return TYPE_ALIASES.get(name, name)


def object_types() -> tuple[str, ...]:
    """What the audit log records events about: the console's models and the user (a reveal, a login)."""
    from django.apps import apps

    names = {m._meta.model_name for m in apps.get_app_config("console").get_models()} | {"user"}
    return tuple(sorted(n for n in names if n))


def day_or_none(value: str | None) -> date | None:
    try:
        return date.fromisoformat(value.strip()) if value else None
    except ValueError:
        return None


def day_start(day: date) -> datetime:
    return timezone.make_aware(datetime.combine(day, time.min))


@dataclass(frozen=True)
class AuditQuery:
    """The filters, parsed leniently from GET (a value that does not parse is ignored).

    ``actor`` matches the actor's name exactly (case-insensitive): an audit question is about one
    person or one system part, and a substring would mix "bob" with "bobby". ``action`` is a prefix
    ("drift_case." is every drift case action). ``obj`` is "type:id" or just "type". The date range
    is inclusive, in the console's time zone.
    """

    actor: str = ""
    action: str = ""
    obj: str = ""
    since: date | None = None
    until: date | None = None
    #: values given that do not parse (ignored; the page says so)
    problems: tuple[Problem, ...] = field(default=(), compare=False)

    @classmethod
    def parse(cls, params: QueryDict) -> AuditQuery:
        found = [
            Problem(name, str(params.get(name, "")).strip()[:100])
            for name in ("since", "until")
            if str(params.get(name, "")).strip() and day_or_none(str(params.get(name, ""))) is None
        ]
        kind = params.get("object", "").strip().partition(":")[0]
        if kind.strip() and object_type_of(kind) not in object_types():
            found.append(Problem("object", kind.strip()[:100], object_types()))
        return cls(
            problems=tuple(found),
            actor=params.get("actor", "").strip()[:150],
            action=params.get("action", "").strip()[:64],
            obj=params.get("object", "").strip()[:100],
            since=day_or_none(params.get("since")),
            until=day_or_none(params.get("until")),
        )

    @property
    def filtered(self) -> bool:
        return bool(self.actor or self.action or self.obj or self.since or self.until)

    def apply(self, events: QuerySet[AuditEvent]) -> QuerySet[AuditEvent]:
        if self.actor:
            events = events.filter(actor_label__iexact=self.actor)
        if self.action:
            events = events.filter(action__startswith=self.action)
        if self.obj:
            kind, _, pk = self.obj.partition(":")
            events = events.filter(object_type=object_type_of(kind))
            if pk.strip():
                events = events.filter(object_id=pk.strip())
        if self.since:
            events = events.filter(created_at__gte=day_start(self.since))
        if self.until:
            events = events.filter(created_at__lt=day_start(self.until + timedelta(days=1)))
        return events.order_by("-created_at", "-id")

    def params(self) -> str:
        """This query as a URL query string (for the pager), empty values left out."""
        values = {
            "actor": self.actor,
            "action": self.action,
            "object": self.obj,
            "since": self.since.isoformat() if self.since else "",
            "until": self.until.isoformat() if self.until else "",
        }
        return urlencode({k: v for k, v in values.items() if v})


# --------------------------------------------------------------------------- archive search


def archive_hits(session: Session, needle: str, limit: int, *, archive_id: int | None = None) -> list[dict[str, Any]]:
    """Archived originals of ``session`` (of one archive: ``archive_id``) containing ``needle``, in archive
    order, with a snippet each; ``message_index`` is the message's index in its run's input (the archive
    page's numbering).

    ``Message.text`` is stored masked: a search never confirms a secret the response would hide.
    """
    rows = session.archives.order_by("created_at", "id")
    if archive_id is not None:
        rows = rows.filter(pk=archive_id)
    archives = list(rows.values_list("pk", "start", "message_keys"))
    keys = {k for _, _, message_keys in archives for k in message_keys}
    matches = dict(Message.objects.filter(sha256__in=keys, text__icontains=needle).values_list("sha256", "text")[:5000])
    roles = dict(Message.objects.filter(sha256__in=matches).values_list("sha256", "role"))
    hits: list[dict[str, Any]] = []
    for pk, start, message_keys in archives:
        for offset, message_key in enumerate(message_keys):
            if message_key in matches and len(hits) < limit:
                hits.append(
                    {
                        "archive_id": pk,
                        "message_index": start + offset,
                        "role": roles.get(message_key, ""),
                        "snippet": snippet(matches[message_key], needle),
                    }
                )
    return hits


def session_hits(session: Session, needle: str, limit: int) -> tuple[list[dict[str, Any]], bool]:
    """Messages of ``session``'s live history containing ``needle``, in order, with a snippet each, and
    whether there were more than ``limit``. ``position`` is the message's number in the history.

    Searches ``Message.text``, which is stored masked (as :func:`archive_hits` and the sessions list do),
    so typing part of a hidden secret finds nothing, and snippets show secrets masked.
    """
    rows = list(
        SessionEntry.objects.filter(session=session, message__text__icontains=needle)
        .order_by("position")
        .values_list("position", "message__role", "message__text")[: limit + 1]
    )
    hits = [
        {"position": position, "role": role, "snippet": snippet(text, needle)} for position, role, text in rows[:limit]
    ]
    return hits, len(rows) > limit


def snippet(text: str, needle: str, width: int = 80) -> str:
    at = text.lower().find(needle.lower())
    start, end = max(0, at - width), min(len(text), at + len(needle) + width)
    return ("…" if start else "") + " ".join(text[start:end].split()) + ("…" if end < len(text) else "")


def unread_count(user: Any) -> int:
    """How many of ``user``'s inbox lines are unread (the header's badge): one indexed count."""
    if not getattr(user, "is_authenticated", False):
        return 0
    return Notification.objects.filter(recipient=user, read_at__isnull=True).count()
