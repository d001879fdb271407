"""The system of record: sessions and their histories, stored content-addressed.

A message is stored once, keyed by the sha256 of its canonical JSON; a history
is an ordered list of those keys (one row per entry, so an append costs what is
appended). Later issues add compression runs, archives, summaries and drift
cases on top of the same message table.
"""

from __future__ import annotations

from typing import Any

from django.db import models
from django.utils.translation import gettext_lazy as _

from compression.messages import message_sha256
from compression.tokens import count_tokens


class Message(models.Model):
    sha256 = models.CharField(max_length=64, primary_key=True)
    role = models.CharField(max_length=16)
    data = models.JSONField()
    tokens = models.PositiveIntegerField()
    created_at = models.DateTimeField(auto_now_add=True)

    def __str__(self) -> str:
        return f"{self.role} {self.sha256[:12]}"

    @classmethod
    def store(cls, messages: list[dict[str, Any]]) -> list[str]:
        """Store each distinct message once; return their keys in order."""
        keys = [message_sha256(m) for m in messages]
        existing = set(cls.objects.filter(sha256__in=set(keys)).values_list("sha256", flat=True))
        new: dict[str, Message] = {}
        for key, data in zip(keys, messages, strict=True):
            if key not in existing and key not in new:
                new[key] = cls(sha256=key, role=str(data.get("role", "")), data=data, tokens=count_tokens([data]))
        cls.objects.bulk_create(new.values(), ignore_conflicts=True, batch_size=500)
        return keys


class Session(models.Model):
    key = models.CharField(_("key"), max_length=255, unique=True)
    channel = models.CharField(_("channel"), max_length=64, blank=True, db_index=True)
    status = models.CharField(_("status"), max_length=32, default="active")
    metadata = models.JSONField(default=dict, blank=True)
    version = models.PositiveIntegerField(default=0)
    message_count = models.PositiveIntegerField(default=0)
    token_count = models.PositiveIntegerField(default=0)
    #: a prefix of this many messages that compression never rewrites
    last_consolidated = models.PositiveIntegerField(default=0)
    context_window_tokens = models.PositiveIntegerField(default=128_000)
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["-updated_at"]
        permissions = [
            ("compress_session", "Can compress sessions"),
            ("resummarize_archive", "Can re-summarize from an archive"),
            ("promote_summary", "Can promote a summary to the live session"),
            ("review_drift", "Can review drift cases"),
            ("reveal_secrets", "Can reveal masked secrets"),
        ]

    def __str__(self) -> str:
        return self.key

    def save(self, *args: Any, **kwargs: Any) -> None:
        if not self.channel and ":" in self.key:
            self.channel = self.key.split(":", 1)[0][:64]
        super().save(*args, **kwargs)

    def messages(self) -> list[dict[str, Any]]:
        entries = self.entries.select_related("message").order_by("position")
        return [entry.message.data for entry in entries]

    def append(self, messages: list[dict[str, Any]]) -> None:
        """Append to the history; costs what is appended. Call inside a transaction."""
        keys = Message.store(messages)
        tokens = dict(Message.objects.filter(sha256__in=set(keys)).values_list("sha256", "tokens"))
        start = self.message_count
        SessionEntry.objects.bulk_create(
            [SessionEntry(session=self, position=start + i, message_id=key) for i, key in enumerate(keys)],
            batch_size=500,
        )
        self.message_count = start + len(keys)
        self.token_count += sum(tokens[key] for key in keys)
        self.version += 1
        self.save(update_fields=["message_count", "token_count", "version", "channel", "updated_at"])


class SessionEntry(models.Model):
    session = models.ForeignKey(Session, on_delete=models.CASCADE, related_name="entries")
    position = models.PositiveIntegerField()
    message = models.ForeignKey(Message, on_delete=models.PROTECT, related_name="+")

    class Meta:
        constraints = [models.UniqueConstraint(fields=["session", "position"], name="unique_session_position")]
        ordering = ["position"]

    def __str__(self) -> str:
        return f"{self.session_id}#{self.position}"
