"""Request and response bodies of the JSON API (``/api/v1/``)."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from ninja import Field, Schema

Messages = list[Any]  # checked by services.check_messages, which names the message at fault


class SessionIn(Schema):
    key: str = Field(min_length=1, max_length=255, description="e.g. `wechat:wxid_123`; no `/`")
    messages: Messages = Field(default_factory=list, description="OpenAI chat-format messages")
    metadata: dict[str, Any] = Field(default_factory=dict)
    context_window_tokens: int | None = Field(None, ge=256, le=10_000_000)
    last_consolidated: int = Field(0, ge=0, description="a prefix compression never rewrites")


class SessionOut(Schema):
    key: str
    channel: str
    status: str
    metadata: dict[str, Any]
    version: int
    message_count: int
    token_count: int
    last_consolidated: int
    context_window_tokens: int
    auto_compression_stopped: bool
    created_at: datetime
    updated_at: datetime


class SessionDetailOut(SessionOut):
    messages: list[dict[str, Any]]


class AppendIn(Schema):
    messages: Messages = Field(min_length=1)
    expected_version: int | None = Field(None, ge=0, description="409 unless the session is at this version")


class AppendOut(Schema):
    key: str
    version: int
    message_count: int
    token_count: int
    queued_run_id: int | None = Field(None, description="an automatic compression this append triggered")


class CompressIn(Schema):
    focus_topic: str | None = Field(None, max_length=2_000)
    config: dict[str, Any] | None = Field(None, description="CompressionConfig overrides for this run")
    wait: float | None = Field(None, ge=0, description="seconds to block until the run ends")


class SummaryOut(Schema):
    id: int
    summary_id: str
    archive_id: int
    parent_id: int | None
    status: str
    stage: str
    text: str
    error: str
    provenance: dict[str, Any]
    facts: list[Any]
    drift_findings: list[Any]
    drift_checked_at: datetime | None
    created_at: datetime


class RunOut(Schema):
    id: int
    session: str
    trigger: str
    status: str
    stage: str
    focus_topic: str
    config: dict[str, Any]
    was_compressed: bool
    applied: bool
    tokens_before: int | None
    tokens_after: int | None
    input_messages: int
    output_messages: int
    stages: list[Any]
    boundaries: dict[str, Any]
    warnings: list[Any]
    error: str
    attempts: int
    archive_id: int | None
    summary: SummaryOut | None
    created_at: datetime
    started_at: datetime | None
    finished_at: datetime | None


class CompressOut(Schema):
    run_id: int
    status: str
    created: bool = Field(description="false: a run was already queued or running for the session; this is it")
    run: RunOut | None = None
    version: int | None = None
    messages: list[dict[str, Any]] | None = Field(None, description="the live history once the run ended (wait)")


class RunMessagesOut(Schema):
    run_id: int
    messages: list[dict[str, Any]]


class ReportIn(Schema):
    session_key: str = Field(min_length=1, max_length=255)
    input_messages: Messages
    output_messages: Messages
    archive_messages: Messages | None = None
    summary_text: str | None = None
    provenance: dict[str, Any] | None = None


class ArchiveOut(Schema):
    id: int
    session: str
    run_id: int
    start: int
    end: int
    sha256: str
    verified: bool
    messages: list[dict[str, Any]]
    summaries: list[int]


class ArchiveHit(Schema):
    archive_id: int
    message_index: int
    role: str
    snippet: str


class ArchiveSearchOut(Schema):
    query: str
    hits: list[ArchiveHit]


class ResummarizeIn(Schema):
    summarizer: str = Field(description="extractive or openai")
    model: str | None = None
    focus_topic: str | None = Field(None, max_length=2_000)
    prompt_version: str | None = None


class PromoteOut(Schema):
    summary: SummaryOut
    session: str
    version: int


class DriftCommentOut(Schema):
    author: str | None
    body: str
    quote: str
    mentions: list[str]
    created_at: datetime

    @staticmethod
    def resolve_author(obj: Any) -> str | None:
        return obj.author.get_username() if obj.author else None

    @staticmethod
    def resolve_mentions(obj: Any) -> list[str]:
        return sorted(user.get_username() for user in obj.mentions.all())


class DriftCommentIn(Schema):
    body: str = Field(..., min_length=1, max_length=20000, description="@username mentions a teammate")
    quote: str = Field("", max_length=4000, description="the passage the comment is about")


class DriftCaseIn(Schema):
    summary: int = Field(..., description="the summary's id (its row id, as in /summaries/{id})")
    quote: str = Field(..., min_length=1, max_length=4000, description="the passage of the summary in question")
    kind: str = Field("other", description="a drift kind (constraint_inverted, ...) or other")
    severity: str = Field("medium", description="low, medium or high")
    note: str = Field("", max_length=4000, description="what is wrong")


class DriftCaseOut(Schema):
    id: int
    summary_id: int
    session: str
    severity: str
    status: str
    assignee: str | None
    verdict: str
    kinds: list[str]
    findings: list[Any]
    opened_by: str | None = Field(None, description="who opened it by hand (null: the drift check did)")
    fixed_by_id: int | None = Field(None, description="the promoted summary that resolved it")
    created_at: datetime
    updated_at: datetime

    @staticmethod
    def resolve_session(obj: Any) -> str:
        return obj.session.key

    @staticmethod
    def resolve_kinds(obj: Any) -> list[str]:
        return list(obj.kind_list)

    @staticmethod
    def resolve_opened_by(obj: Any) -> str | None:
        return obj.opened_by.get_username() if obj.opened_by else None

    @staticmethod
    def resolve_assignee(obj: Any) -> str | None:
        return obj.assignee.get_username() if obj.assignee else None


class DriftCaseDetailOut(DriftCaseOut):
    comments: list[DriftCommentOut]

    @staticmethod
    def resolve_comments(obj: Any) -> list[Any]:
        return list(obj.comments.select_related("author").prefetch_related("mentions"))


class DriftCasePatch(Schema):
    claim: bool | None = Field(None, description="true: assign to yourself (refused while someone else holds it)")
    status: str | None = None
    assignee: str | None = Field(None, description="a username; empty string unassigns")
    verdict: str | None = None
    comment: str | None = None
    quote: str | None = Field(None, description="the passage the comment is about")


class AuditEventOut(Schema):
    id: int
    actor: str = Field(..., description="the actor's name at the time, or the system part that acted")
    action: str
    object_type: str
    object_id: str
    before: Any = None
    after: Any = None
    created_at: datetime

    @staticmethod
    def resolve_actor(obj: Any) -> str:
        return str(obj.actor_label)


class ErrorOut(Schema):
    detail: str
