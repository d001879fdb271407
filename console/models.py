"""The system of record: sessions and their histories, stored content-addressed.

A message is stored once, keyed by the sha256 of its canonical JSON; a history
is an ordered list of those keys (one row per entry, so an append costs what is
appended). Runs keep their input and output histories as key lists, so a run
shares storage with its session and a diff is an alignment of two key lists.
Archives and summary texts are immutable once written; every operator change
writes an AuditEvent.
"""

from __future__ import annotations

import hashlib
import secrets
from typing import Any

from django.conf import settings
from django.db import models
from django.utils import timezone
from django.utils.translation import gettext_lazy as _

from agent_compression import SUMMARY_MARKER
from agent_compression import Archive as PipelineArchive
from agent_compression.messages import content_text, message_sha256
from agent_compression.summary_message import parse_summary_message
from agent_compression.tokens import count_tokens

from .errors import ArchiveCorrupted
from .masking import mask_text, mask_value, masked_key


class Immutable(models.Model):
    """Rows written once. ``MUTABLE_FIELDS`` may still change through ``save(update_fields=...)``."""

    MUTABLE_FIELDS: frozenset[str] = frozenset()

    class Meta:
        abstract = True

    def save(self, *args: Any, **kwargs: Any) -> None:
        if not self._state.adding:
            fields = set(kwargs.get("update_fields") or ())
            if not fields or not fields <= self.mutable_fields():
                raise ValueError(f"{type(self).__name__} rows are immutable once written")
        super().save(*args, **kwargs)

    def delete(self, *args: Any, **kwargs: Any) -> Any:
        raise ValueError(f"{type(self).__name__} rows cannot be deleted")

    def mutable_fields(self) -> frozenset[str]:
        return self.MUTABLE_FIELDS


def searchable_text(message: dict[str, Any]) -> str:
    """What search looks at: the content plus tool names and arguments."""
    parts = [content_text(message)]
    for call in message.get("tool_calls") or []:
        if isinstance(call, dict) and isinstance(call.get("function"), dict):
            parts.append(f"{call['function'].get('name', '')} {call['function'].get('arguments', '')}")
    return "\n".join(p for p in parts if p)


def masked_search_text(message: dict[str, Any]) -> str:
    """What ``Message.text`` holds: :func:`searchable_text` of the message masked as a reader sees it (a tool
    call's arguments as JSON, so a value under a secret-named key is masked too), then as text."""
    return mask_text(searchable_text(mask_value(message)))


class Message(models.Model):
    sha256 = models.CharField(max_length=64, primary_key=True)
    role = models.CharField(max_length=16)
    data = models.JSONField()
    #: content and tool-call text with secrets masked, for search (a search must not find what a page hides)
    text = models.TextField(blank=True, default="")
    tokens = models.PositiveIntegerField()
    created_at = models.DateTimeField(auto_now_add=True)

    def __str__(self) -> str:
        return f"{self.role} {self.sha256[:12]}"

    @classmethod
    def store(cls, messages: list[dict[str, Any]]) -> list[str]:
        """Store each distinct message once; return their keys in order."""
        keys = [message_sha256(m) for m in messages]
        existing = set(cls.objects.filter(sha256__in=set(keys)).values_list("sha256", flat=True))
        new: dict[str, Any] = {}
        for key, data in zip(keys, messages, strict=True):
            if key not in existing and key not in new:
                new[key] = cls(
                    sha256=key,
                    role=str(data.get("role", "")),
                    data=data,
                    text=masked_search_text(data),
                    tokens=count_tokens([data]),
                )
        cls.objects.bulk_create(list(new.values()), ignore_conflicts=True, batch_size=500)
        return keys

    @classmethod
    def load(cls, keys: list[str]) -> list[dict[str, Any]]:
        """The messages for ``keys``, in order (one query per 2,000 distinct keys)."""
        found: dict[str, dict[str, Any]] = {}
        distinct = list(dict.fromkeys(keys))
        for i in range(0, len(distinct), 2000):
            found.update(cls.objects.filter(sha256__in=distinct[i : i + 2000]).values_list("sha256", "data"))
        missing = [k for k in distinct if k not in found]
        if missing:
            raise LookupError(f"{len(missing)} stored messages are missing (first {missing[0][:12]})")
        return [found[k] for k in keys]

    @classmethod
    def load_counted(cls, keys: list[str]) -> tuple[list[dict[str, Any]], list[int]]:
        """The messages for ``keys`` and the token count stored with each, in order: the pipeline
        takes the counts, so a compression never tokenizes a stored message again."""
        found: dict[str, tuple[dict[str, Any], int]] = {}
        distinct = list(dict.fromkeys(keys))
        for i in range(0, len(distinct), 2000):
            rows = cls.objects.filter(sha256__in=distinct[i : i + 2000]).values_list("sha256", "data", "tokens")
            found.update((key, (data, tokens)) for key, data, tokens in rows)
        missing = [k for k in distinct if k not in found]
        if missing:
            raise LookupError(f"{len(missing)} stored messages are missing (first {missing[0][:12]})")
        return [found[k][0] for k in keys], [found[k][1] for k in keys]

    @classmethod
    def token_total(cls, keys: list[str]) -> int:
        tokens: dict[str, int] = {}
        distinct = list(dict.fromkeys(keys))
        for i in range(0, len(distinct), 2000):
            tokens.update(cls.objects.filter(sha256__in=distinct[i : i + 2000]).values_list("sha256", "tokens"))
        return sum(tokens.get(k, 0) for k in keys)


class Session(models.Model):
    key = models.CharField(_("key"), max_length=255, unique=True)
    #: the key with its secrets masked, when it holds one: what readers without reveal search. Null (not "")
    #: means "the key itself", so rows written without save() (bulk_create) are still found by their key.
    masked_key = models.TextField(null=True, blank=True, editable=False)  # noqa: DJ001
    channel = models.CharField(_("channel"), max_length=64, blank=True, db_index=True)
    status = models.CharField(_("status"), max_length=32, default="active")
    metadata = models.JSONField(default=dict, blank=True)
    version = models.PositiveIntegerField(default=0)
    message_count = models.PositiveIntegerField(default=0)
    token_count = models.PositiveIntegerField(default=0)
    #: a prefix of this many messages that compression never rewrites
    last_consolidated = models.PositiveIntegerField(default=0)
    context_window_tokens = models.PositiveIntegerField(default=128_000)
    #: anti-thrash memory shared by every worker: compressions in a row that left it over the trigger
    ineffective_compressions = models.PositiveIntegerField(default=0)
    auto_compression_stopped = models.BooleanField(default=False)
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["-updated_at"]
        indexes = [
            # the sessions list: its default order (newest first, id breaks ties) and its status filter
            models.Index(fields=["updated_at", "id"], name="session_updated_idx"),
            models.Index(fields=["status"], name="session_status_idx"),
        ]
        permissions = [
            ("compress_session", "Can compress sessions"),
            ("resummarize_archive", "Can re-summarize from an archive"),
            ("promote_summary", "Can promote a summary to the live session"),
            ("review_drift", "Can review drift cases"),
            ("open_drift_case", "Can open a drift case by hand"),
            ("reveal_secrets", "Can reveal masked secrets"),
        ]

    def __str__(self) -> str:
        return self.key

    def save(self, *args: Any, **kwargs: Any) -> None:
        if not self.channel and ":" in self.key:
            self.channel = self.key.split(":", 1)[0]
        # a label everyone sees, filters and searches by: never a raw secret
        self.channel = mask_text(self.channel)[:64]
        if kwargs.get("update_fields") is None:  # partial saves never change the key
            self.masked_key = masked_key(self.key)
        super().save(*args, **kwargs)

    def keys(self) -> list[str]:
        return list(self.entries.order_by("position").values_list("message_id", flat=True))

    def messages(self) -> list[dict[str, Any]]:
        return Message.load(self.keys())

    def append(self, messages: list[dict[str, Any]]) -> None:
        """Append to the history; costs what is appended. Call inside a transaction."""
        keys = Message.store(messages)
        start = self.message_count
        SessionEntry.objects.bulk_create(
            [SessionEntry(session=self, position=start + i, message_id=key) for i, key in enumerate(keys)],
            batch_size=500,
        )
        self.message_count = start + len(keys)
        self.token_count += Message.token_total(keys)
        self.version += 1
        self.save(update_fields=["message_count", "token_count", "version", "channel", "updated_at"])

    def replace_from(self, old_keys: list[str], new_keys: list[str]) -> None:
        """Make the history ``new_keys``, rewriting only the entries after the shared prefix.

        ``old_keys`` must be the current history (the caller holds the row lock).
        """
        same = 0
        for a, b in zip(old_keys, new_keys, strict=False):
            if a != b:
                break
            same += 1
        self.entries.filter(position__gte=same).delete()
        SessionEntry.objects.bulk_create(
            [SessionEntry(session=self, position=same + i, message_id=key) for i, key in enumerate(new_keys[same:])],
            batch_size=500,
        )
        self.message_count = len(new_keys)
        self.token_count = Message.token_total(new_keys)
        self.version += 1
        self.save(update_fields=["message_count", "token_count", "version", "updated_at"])

    def live_summary_index(self, summary_ids: set[str]) -> tuple[int, str] | None:
        """Position and id of the live message that carries one of ``summary_ids`` in its header."""
        entries = self.entries.filter(message__role="user", message__text__startswith=SUMMARY_MARKER)
        for position, data in entries.values_list("position", "message__data"):
            parsed = parse_summary_message(data)
            if parsed and parsed[0].get("id") in summary_ids:
                return position, parsed[0]["id"]
        return None


class SessionEntry(models.Model):
    session = models.ForeignKey(Session, on_delete=models.CASCADE, related_name="entries")
    position = models.PositiveIntegerField()
    message = models.ForeignKey(Message, on_delete=models.PROTECT, related_name="+")

    class Meta:
        constraints = [models.UniqueConstraint(fields=["session", "position"], name="unique_session_position")]
        ordering = ["position"]

    def __str__(self) -> str:
        return f"{self.session_id}#{self.position}"


class CompressionRun(models.Model):
    """One compression of one session: queued by a person, an API call, the trigger or a runtime's report."""

    class Trigger(models.TextChoices):
        AUTO = "auto", _("automatic")
        MANUAL = "manual", _("manual")
        API = "api", _("API")
        REPORTED = "reported", _("reported")
        #: compressed in the request path of ``/proxy/v1`` (console/proxy/)
        PROXY = "proxy", _("proxy")

    class Status(models.TextChoices):
        QUEUED = "queued", _("queued")
        RUNNING = "running", _("running")
        SUCCEEDED = "succeeded", _("succeeded")
        DEGRADED = "degraded", _("degraded")
        FAILED = "failed", _("failed")
        CONFLICT = "conflict", _("conflict")
        #: finished without changing anything: the history had nothing to compress (not a compression)
        NOTHING = "nothing", _("nothing to compress")

    ACTIVE = (Status.QUEUED, Status.RUNNING)

    session = models.ForeignKey(Session, on_delete=models.CASCADE, related_name="runs")
    trigger = models.CharField(max_length=16, choices=Trigger.choices)
    status = models.CharField(max_length=16, choices=Status.choices, default=Status.QUEUED, db_index=True)
    #: the pipeline stage a worker is in (prune, boundaries, archive, summarize, assemble, validate, write_back)
    stage = models.CharField(max_length=32, blank=True)
    config = models.JSONField(default=dict, blank=True)
    focus_topic = models.TextField(blank=True)
    #: what the worker compressed: the session's version and length when it started, and the history as keys
    base_version = models.PositiveIntegerField(null=True, blank=True)
    base_length = models.PositiveIntegerField(null=True, blank=True)
    input_keys = models.JSONField(default=list, blank=True)
    output_keys = models.JSONField(default=list, blank=True)
    was_compressed = models.BooleanField(default=False)
    #: the session got the output (false for a conflict, an unchanged history, or a report that did not match)
    applied = models.BooleanField(default=False)
    tokens_before = models.PositiveIntegerField(null=True, blank=True)
    tokens_after = models.PositiveIntegerField(null=True, blank=True)
    stages = models.JSONField(default=list, blank=True)
    boundaries = models.JSONField(default=dict, blank=True)
    pruned = models.JSONField(default=list, blank=True)
    repair = models.JSONField(default=dict, blank=True)
    warnings = models.JSONField(default=list, blank=True)
    error = models.TextField(blank=True)
    attempts = models.PositiveSmallIntegerField(default=0)
    worker = models.CharField(max_length=255, blank=True)
    created_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    created_at = models.DateTimeField(auto_now_add=True, db_index=True)
    started_at = models.DateTimeField(null=True, blank=True)
    #: refreshed at every stage; a running run whose heartbeat is old lost its worker
    heartbeat_at = models.DateTimeField(null=True, blank=True)
    finished_at = models.DateTimeField(null=True, blank=True)
    #: when its task was last handed to the broker (null: never, or the send failed) and how many times
    #: since it was last queued; the recovery sweep re-sends only what is stale, less often each time
    sent_at = models.DateTimeField(null=True, blank=True)
    sends = models.PositiveSmallIntegerField(default=0)
    #: a queued run waiting for the summarizer's cooldown is not sent before this
    not_before = models.DateTimeField(null=True, blank=True)
    #: a reported run: the caller's ``Idempotency-Key`` and the sha256 of what it reported, so a retried
    #: report is answered with this run instead of stored twice ("" for every other run)
    idempotency_key = models.CharField(max_length=255, blank=True, default="")
    request_sha256 = models.CharField(max_length=64, blank=True, default="")

    class Meta:
        ordering = ["-created_at", "-id"]
        indexes = [
            models.Index(fields=["session", "status"]),
            # the sessions list's "compressed" filter: has the session an applied compression?
            models.Index(fields=["session", "applied", "was_compressed"], name="run_session_applied_idx"),
        ]
        constraints = [
            # keys are the caller's: one run per key and caller, also for two requests at the same moment
            models.UniqueConstraint(
                fields=["created_by", "idempotency_key"],
                condition=~models.Q(idempotency_key=""),
                name="run_unique_idempotency_key",
            ),
        ]

    def __str__(self) -> str:
        return f"run {self.pk} ({self.status})"

    @property
    def finished(self) -> bool:
        return self.status not in self.ACTIVE

    def segment_tokens(self, cuts: dict[str, tuple[int, int]]) -> dict[str, list[int]]:
        """Tokens of head / middle / tail of the input (``cuts["in"]``) and the output (``cuts["out"]``).

        ``cuts[side]`` is ``(a, b)``: positions below ``a`` are the head, from ``b`` the tail. The counts
        stored with the messages are read in batches (no database-specific SQL: any backend works).
        """
        keys = {"in": self.input_keys or [], "out": self.output_keys or []}
        tokens: dict[str, int] = {}
        distinct = list(dict.fromkeys(keys["in"] + keys["out"]))
        for i in range(0, len(distinct), 2000):
            rows = Message.objects.filter(sha256__in=distinct[i : i + 2000]).values_list("sha256", "tokens")
            tokens.update(rows)
        counts: dict[str, list[int]] = {}
        for side, (a, b) in cuts.items():
            sums = [0, 0, 0]
            for index, key in enumerate(keys[side]):
                sums[0 if index < a else 1 if index < b else 2] += tokens.get(key, 0)
            counts[side] = sums
        return counts


class Archive(Immutable):
    """The original middle segment a run replaced, ``[start, end)`` of its input, checksummed."""

    session = models.ForeignKey(Session, on_delete=models.CASCADE, related_name="archives")
    run = models.OneToOneField(CompressionRun, on_delete=models.CASCADE, related_name="archive")
    start = models.PositiveIntegerField()
    end = models.PositiveIntegerField()
    message_keys = models.JSONField()
    sha256 = models.CharField(max_length=64)
    #: the id in the header of the message that stands for this archive in the history
    inserted_id = models.CharField(max_length=64, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["-created_at", "-id"]

    def __str__(self) -> str:
        return f"archive {self.pk} ({self.start}-{self.end})"

    def verified_messages(self) -> list[dict[str, Any]]:
        """The archived originals, verified against the archive's sha256 and range (``ArchiveCorrupted`` if not)."""
        try:
            messages = Message.load(self.message_keys)
        except LookupError as exc:
            raise ArchiveCorrupted(f"archive {self.pk} is incomplete: {exc}") from None
        if not PipelineArchive(self.start, self.end, messages, self.sha256).verify():
            raise ArchiveCorrupted(
                f"archive {self.pk} does not match its sha256 {self.sha256[:16]}: its originals were altered"
            )
        return messages


class Summary(Immutable):
    """A summary of one archive. The text never changes; a re-summarize writes a new row with a parent."""

    class Status(models.TextChoices):
        PENDING = "pending", _("pending")
        DRAFT = "draft", _("draft")
        ACTIVE = "active", _("active")
        SUPERSEDED = "superseded", _("superseded")
        FAILED = "failed", _("failed")

    MUTABLE_FIELDS = frozenset(
        {"status", "stage", "drift_findings", "drift_checked_at", "updated_at", "sent_at", "sends", "attempts"}
        | {"promoted_by", "promoted_at", "drift_assessment", "drift_attempts", "drift_error"}
    )
    #: a pending summary gets its text once, when its worker finishes
    RESULT_FIELDS = frozenset({"text", "error", "provenance", "facts"})

    archive = models.ForeignKey(Archive, on_delete=models.CASCADE, related_name="summaries")
    run = models.ForeignKey(CompressionRun, null=True, blank=True, on_delete=models.SET_NULL, related_name="+")
    parent = models.ForeignKey("self", null=True, blank=True, on_delete=models.SET_NULL, related_name="children")
    #: the id written into the summary message's header (``sum_...``)
    summary_id = models.CharField(max_length=64, unique=True)
    status = models.CharField(max_length=16, choices=Status.choices, db_index=True)
    #: a re-summarize in a worker: queued, running, done
    stage = models.CharField(max_length=16, blank=True)
    text = models.TextField(blank=True)
    error = models.TextField(blank=True)
    #: generator, model, endpoint host, prompt version and hash, focus topic, budget, tokens, latency, trigger
    provenance = models.JSONField(default=dict)
    facts = models.JSONField(default=list, blank=True)
    drift_findings = models.JSONField(default=list, blank=True)
    drift_checked_at = models.DateTimeField(null=True, blank=True)
    #: the check's line-by-line reading: each claim of the summary with its verdict and the messages it rests on
    #: (``agent_compression.drift.Assessment.to_dict()``; empty before the check, or for checks older than it)
    drift_assessment = models.JSONField(default=dict, blank=True)
    #: drift checks started on this summary; after ``DRIFT_CHECK_MAX_ATTEMPTS`` without a result the check is
    #: failed (``drift_error`` says why) and the sweep stops sending it until an operator retries
    drift_attempts = models.PositiveSmallIntegerField(default=0)
    drift_error = models.TextField(blank=True)
    created_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    created_at = models.DateTimeField(auto_now_add=True)
    #: also the heartbeat of a running re-summarize
    updated_at = models.DateTimeField(auto_now=True)
    #: who put this version into the live session by promoting it, and when (null: never promoted;
    #: a run's own summary goes live with the run)
    promoted_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    promoted_at = models.DateTimeField(null=True, blank=True)
    #: when its task (the re-summarize, then the drift check) was last sent, and how many times; see CompressionRun
    sent_at = models.DateTimeField(null=True, blank=True)
    sends = models.PositiveSmallIntegerField(default=0)
    #: workers that took the re-summarize (one whose worker died is queued again up to RUN_MAX_ATTEMPTS)
    attempts = models.PositiveSmallIntegerField(default=0)

    class Meta:
        ordering = ["-created_at", "-id"]
        verbose_name_plural = "summaries"
        indexes = [
            # the recovery sweep's "drift check never ran"; few rows once checks have run
            models.Index(
                fields=["created_at"], condition=models.Q(drift_checked_at__isnull=True), name="summary_unchecked_idx"
            )
        ]

    _stored_status: str | None = None

    def __str__(self) -> str:
        return self.summary_id

    @classmethod
    def from_db(cls, db: Any, field_names: Any, values: Any) -> Summary:
        row = super().from_db(db, field_names, values)
        row._stored_status = row.__dict__.get("status")
        return row

    #: a finished, inactive version: what promoting can put live
    PROMOTABLE = (Status.DRAFT, Status.SUPERSEDED)

    @property
    def promotable(self) -> bool:
        return self.status in self.PROMOTABLE

    def mutable_fields(self) -> frozenset[str]:
        if self._stored_status == self.Status.PENDING:
            return self.MUTABLE_FIELDS | self.RESULT_FIELDS
        return self.MUTABLE_FIELDS


class DriftCase(models.Model):
    """A summary suspected of changing what happened, and the team's review of it."""

    class Status(models.TextChoices):
        OPEN = "open", _("open")
        CONFIRMED = "confirmed", _("confirmed")
        DISMISSED = "dismissed", _("dismissed")
        RESOLVED = "resolved", _("resolved")

    #: allowed status changes
    TRANSITIONS: dict[str, set[str]] = {
        "open": {"confirmed", "dismissed"},
        "confirmed": {"resolved", "open"},
        "dismissed": {"open"},
        "resolved": {"open"},
    }

    summary = models.ForeignKey(Summary, on_delete=models.CASCADE, related_name="drift_cases")
    session = models.ForeignKey(Session, on_delete=models.CASCADE, related_name="drift_cases")
    findings = models.JSONField(default=list)
    #: the findings' kinds as ",kind,kind," so the queue can filter by kind on any database
    kinds = models.CharField(max_length=255, blank=True, db_index=True)
    severity = models.CharField(max_length=8, db_index=True)
    status = models.CharField(max_length=16, choices=Status.choices, default=Status.OPEN, db_index=True)
    assignee = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="drift_cases"
    )
    verdict = models.TextField(blank=True)
    opened_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    #: the promoted summary that resolved the case (the corrected summary of a regression set)
    fixed_by = models.ForeignKey(Summary, null=True, blank=True, on_delete=models.SET_NULL, related_name="+")
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["-created_at", "-id"]

    def __str__(self) -> str:
        return f"drift case {self.pk} ({self.status})"

    def save(self, *args: Any, **kwargs: Any) -> None:
        self.kinds = "".join(f",{k}" for k in dict.fromkeys(f.get("kind", "") for f in self.findings)) + ","
        if kwargs.get("update_fields") is not None:
            kwargs["update_fields"] = {*kwargs["update_fields"], "kinds"}
        super().save(*args, **kwargs)

    @property
    def kind_list(self) -> list[str]:
        return [k for k in self.kinds.split(",") if k]

    @staticmethod
    def of_kind(kind: str) -> models.Q:
        """Cases with a finding of ``kind`` (a filter)."""
        return models.Q(kinds__contains=f",{kind},")


class DriftComment(Immutable):
    case = models.ForeignKey(DriftCase, on_delete=models.CASCADE, related_name="comments")
    author = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, on_delete=models.SET_NULL, related_name="+")
    body = models.TextField()
    #: the passage the comment is about, quoted
    quote = models.TextField(blank=True)
    #: teammates named with @username in the body
    mentions = models.ManyToManyField(settings.AUTH_USER_MODEL, blank=True, related_name="drift_mentions")
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["created_at", "id"]

    def __str__(self) -> str:
        return f"comment {self.pk} on case {self.case_id}"


class AuditEvent(Immutable):
    """Append-only: who did what to which object, with the state before and after."""

    actor = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL)
    #: the actor's name at the time (survives the user's deletion), or the system part that acted
    actor_label = models.CharField(max_length=150)
    action = models.CharField(max_length=64, db_index=True)
    object_type = models.CharField(max_length=32)
    object_id = models.CharField(max_length=64)
    before = models.JSONField(null=True, blank=True)
    after = models.JSONField(null=True, blank=True)
    created_at = models.DateTimeField(default=timezone.now, db_index=True)

    class Meta:
        ordering = ["-created_at", "-id"]
        indexes = [models.Index(fields=["object_type", "object_id"])]

    def __str__(self) -> str:
        return f"{self.actor_label} {self.action} {self.object_type}:{self.object_id}"


class ApiKey(models.Model):
    """A bearer key for an agent runtime. Only its sha256 is stored; it acts as its own user (with a role)."""

    PREFIX = "ccs_"

    name = models.CharField(max_length=100, unique=True)
    user = models.OneToOneField(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="api_key")
    #: the first characters of the key, to find the row without storing the key
    lookup = models.CharField(max_length=16, unique=True)
    key_sha256 = models.CharField(max_length=64)
    created_at = models.DateTimeField(auto_now_add=True)
    last_used_at = models.DateTimeField(null=True, blank=True)
    revoked_at = models.DateTimeField(null=True, blank=True)

    def __str__(self) -> str:
        return self.name

    @staticmethod
    def digest(key: str) -> str:
        return hashlib.sha256(key.encode()).hexdigest()

    @classmethod
    def new_key(cls) -> tuple[str, str]:
        """A fresh key and its lookup prefix."""
        lookup = secrets.token_hex(6)
        return f"{cls.PREFIX}{lookup}_{secrets.token_urlsafe(32)}", lookup


class ProxyConversation(models.Model):
    """A runtime's conversation seen through ``/proxy/v1``: the session that holds it, and how much of it is stored.

    The runtime sends its whole history with every call; ``seen_count`` of its messages are stored, and
    ``seen_hash`` chains their normalized hashes (``console.services.proxy``), so a call is matched against
    what was stored without reading the history back. A history that does not extend it (edited, rewound,
    forked) moves the conversation to a new session (a fork), leaving the old one as it was.
    """

    #: the runtime's ``X-Session-Key``, or the key derived from the conversation's opening
    key = models.CharField(max_length=255, unique=True)
    session = models.ForeignKey(Session, on_delete=models.CASCADE, related_name="proxy_conversations")
    seen_count = models.PositiveIntegerField(default=0)
    seen_hash = models.CharField(max_length=64, blank=True)
    #: the chain values of the latest stored lengths (up to ``seen_count``): a retry is not a fork
    recent_chain = models.JSONField(default=list, blank=True)
    #: the session's version right after the proxy last wrote it, and whether its live history still is the
    #: runtime's own (never compressed): then a call is forwarded as the runtime sent it, nothing read back
    synced_version = models.PositiveIntegerField(default=0)
    mirrors = models.BooleanField(default=True)
    forks = models.PositiveIntegerField(default=0)
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    def __str__(self) -> str:
        return self.key


class ProxyCall(models.Model):
    """One call relayed by the proxy: what the upstream answered, how long it took, what the console did."""

    session = models.ForeignKey(Session, on_delete=models.CASCADE, related_name="proxy_calls")
    #: the history index of the stored answer (null: no answer was stored, e.g. an upstream error)
    position = models.PositiveIntegerField(null=True, blank=True)
    model = models.CharField(max_length=255, blank=True)
    stream = models.BooleanField(default=False)
    status_code = models.PositiveSmallIntegerField()
    finish_reason = models.CharField(max_length=32, blank=True)
    usage = models.JSONField(default=dict, blank=True)
    latency_ms = models.PositiveIntegerField(default=0)
    #: what the console did with the history: forwarded, compressed, deferred, diverged, bypass
    handling = models.CharField(max_length=16)
    messages_sent = models.PositiveIntegerField(default=0)
    run = models.ForeignKey(CompressionRun, null=True, blank=True, on_delete=models.SET_NULL, related_name="+")
    created_at = models.DateTimeField(default=timezone.now)

    class Meta:
        ordering = ["-created_at", "-id"]
        indexes = [models.Index(fields=["session", "created_at"], name="proxycall_session_idx")]

    def __str__(self) -> str:
        return f"proxy call {self.pk} ({self.status_code})"


class SummarizerCooldown(models.Model):
    """When a summarizer endpoint may be called again (after a 429), shared by all workers."""

    key = models.CharField(max_length=255, primary_key=True)
    until = models.FloatField()

    def __str__(self) -> str:
        return self.key


# ------------------------------------------------------------ notifications (console/services/notifications.py)


class Notification(models.Model):
    """One line of a user's inbox. ``data`` is masked when written; the text is rendered (translated) from it."""

    class Kind(models.TextChoices):
        MENTION = "mention", _("mention")
        ASSIGNMENT = "assignment", _("assignment")
        DRIFT_CASE = "drift_case", _("new drift case")
        RUN_DEGRADED = "run_degraded", _("degraded run")
        RUN_FAILED = "run_failed", _("failed run")
        AUTO_STOPPED = "auto_stopped", _("automatic compression stopped")

    recipient = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="notifications")
    kind = models.CharField(max_length=32, choices=Kind.choices)
    #: who caused it (a user name, or "system")
    actor_label = models.CharField(max_length=150, blank=True)
    #: the page it is about (a path in the console)
    url = models.CharField(max_length=500, blank=True)
    #: what the template needs: session key, case id, severity, run id... (masked)
    data = models.JSONField(default=dict, blank=True)
    created_at = models.DateTimeField(default=timezone.now)
    read_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["-created_at", "-id"]
        indexes = [models.Index(fields=["recipient", "read_at"], name="notification_unread_idx")]

    def __str__(self) -> str:
        return f"{self.kind} for {self.recipient_id}"


class Webhook(models.Model):
    """An outgoing webhook an admin configured: which events go where, in which format, signed with ``secret``."""

    class Format(models.TextChoices):
        GENERIC = "generic", _("Generic JSON")
        SLACK = "slack", _("Slack-compatible")

    name = models.CharField(_("name"), max_length=100)
    url = models.URLField(_("URL"), max_length=2000)
    format = models.CharField(_("format"), max_length=16, choices=Format.choices, default=Format.GENERIC)
    #: the event names it receives (``console.notifications.EVENTS``)
    events = models.JSONField(_("events"), default=list)
    #: the HMAC-SHA256 key of the ``X-Compression-Signature`` header
    secret = models.CharField(max_length=128)
    active = models.BooleanField(_("active"), default=True)
    created_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["name", "id"]
        permissions = [("manage_webhooks", "Can configure outgoing webhooks and see their deliveries")]

    def __str__(self) -> str:
        return self.name


class WebhookDelivery(models.Model):
    """One event for one webhook: the exact body sent (masked), retried with backoff until delivered or failed."""

    class Status(models.TextChoices):
        PENDING = "pending", _("pending")
        SENDING = "sending", _("sending")
        DELIVERED = "delivered", _("delivered")
        FAILED = "failed", _("failed")

    webhook = models.ForeignKey(Webhook, on_delete=models.CASCADE, related_name="deliveries")
    event = models.CharField(max_length=64)
    #: a unique id per event and webhook (also the ``X-Compression-Delivery`` header): receivers dedupe on it
    delivery_id = models.CharField(max_length=64, unique=True)
    body = models.TextField()
    status = models.CharField(max_length=16, choices=Status.choices, default=Status.PENDING, db_index=True)
    attempts = models.PositiveSmallIntegerField(default=0)
    #: a pending delivery is not attempted before this
    next_attempt_at = models.DateTimeField(default=timezone.now)
    #: when the current attempt was claimed (a sending row silent past the timeout lost its worker)
    claimed_at = models.DateTimeField(null=True, blank=True)
    last_error = models.TextField(blank=True)
    created_at = models.DateTimeField(default=timezone.now, db_index=True)
    delivered_at = models.DateTimeField(null=True, blank=True)
    #: see CompressionRun: when its task was last handed to the broker, and how often (console/services/queue.py)
    sent_at = models.DateTimeField(null=True, blank=True)
    sends = models.PositiveSmallIntegerField(default=0)

    class Meta:
        ordering = ["-created_at", "-id"]
        verbose_name_plural = "webhook deliveries"
        indexes = [models.Index(fields=["status", "next_attempt_at"], name="delivery_due_idx")]

    def __str__(self) -> str:
        return f"{self.event} to {self.webhook_id} ({self.status})"


class WebhookAttempt(models.Model):
    """One HTTP attempt of a delivery: what the receiver answered (or why there was no answer) and how long it took."""

    delivery = models.ForeignKey(WebhookDelivery, on_delete=models.CASCADE, related_name="attempt_rows")
    number = models.PositiveSmallIntegerField()
    status_code = models.PositiveSmallIntegerField(null=True, blank=True)
    error = models.TextField(blank=True)
    duration_ms = models.PositiveIntegerField(default=0)
    started_at = models.DateTimeField(default=timezone.now)

    class Meta:
        ordering = ["delivery", "number"]
        constraints = [models.UniqueConstraint(fields=["delivery", "number"], name="unique_delivery_attempt")]

    def __str__(self) -> str:
        return f"attempt {self.number} of {self.delivery_id}"


class PairwiseReview(models.Model):
    """A reviewer's verdict on two summary versions of one archive, read side by side on the compare page."""

    class Verdict(models.TextChoices):
        A_BETTER = "a_better", _("A is better")
        B_BETTER = "b_better", _("B is better")
        SAME = "same", _("About the same")
        BOTH_WRONG = "both_wrong", _("Both are wrong")

    archive = models.ForeignKey(Archive, on_delete=models.CASCADE, related_name="pairwise_reviews")
    a = models.ForeignKey(Summary, on_delete=models.CASCADE, related_name="+")
    b = models.ForeignKey(Summary, on_delete=models.CASCADE, related_name="+")
    verdict = models.CharField(max_length=16, choices=Verdict.choices)
    note = models.TextField(blank=True)
    reviewer = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    created_at = models.DateTimeField(default=timezone.now)

    class Meta:
        ordering = ["-created_at", "-id"]
        indexes = [models.Index(fields=["archive", "a", "b"], name="pairwise_pair_idx")]

    def __str__(self) -> str:
        return f"{self.a_id} vs {self.b_id}: {self.verdict}"
