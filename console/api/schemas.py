"""Request and response bodies of the JSON API (``/api/v1/``)."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from datetime import date, datetime
from typing import Annotated, Any, Literal

from ninja import Field, Schema
from pydantic import AfterValidator, ConfigDict, StringConstraints, WithJsonSchema

from agent_compression.drift import REASONS

from ..models import CompressionRun, DriftCase, Summary
from ..services.drift import MANUAL_KINDS, drift_check_failed
from ..services.validation import KEY_MAX, key_problem

Messages = list[Any]  # checked by services.validation.check_messages, which names the message at fault

# --------------------------------------------------------------------------- input types


class StrictIn(Schema):
    """A request body: types are not coerced (``false`` is not 0, ``"yes"`` not true) and unknown fields are errors."""

    model_config = ConfigDict(strict=True, extra="forbid")


#: a row id as a database column holds it (a bigger number is a 422, not an overflow in the driver)
RowId = Annotated[int, Field(ge=1, le=2**63 - 1)]


def _key(value: str) -> str:
    problem = key_problem(value)
    if problem:
        raise ValueError(problem)
    return value


def _one_of(what: str, choices: Sequence[str]) -> Callable[[str], str]:
    def check(value: str) -> str:
        if value and value not in choices:
            raise ValueError(f"unknown {what} {value!r}; one of: {', '.join(choices)}")
        return value

    return check


#: the key of a new session (``services.key_problem``: reachable as one URL segment, nothing invisible)
SessionKey = Annotated[
    str, AfterValidator(_key), WithJsonSchema({"type": "string", "minLength": 1, "maxLength": KEY_MAX})
]
SEVERITIES = ("low", "medium", "high")
CASE_STATUSES = tuple(DriftCase.Status.values)
Severity = Annotated[
    str, AfterValidator(_one_of("severity", SEVERITIES)), WithJsonSchema({"type": "string", "enum": SEVERITIES})
]
CaseStatus = Annotated[
    str, AfterValidator(_one_of("status", CASE_STATUSES)), WithJsonSchema({"type": "string", "enum": CASE_STATUSES})
]
Kind = Annotated[
    str, AfterValidator(_one_of("kind", MANUAL_KINDS)), WithJsonSchema({"type": "string", "enum": MANUAL_KINDS})
]
#: filters: the choices, or empty for no filter
SeverityFilter = Annotated[
    str, AfterValidator(_one_of("severity", SEVERITIES)), WithJsonSchema({"type": "string", "enum": ["", *SEVERITIES]})
]
StatusFilter = Annotated[
    str,
    AfterValidator(_one_of("status", CASE_STATUSES)),
    WithJsonSchema({"type": "string", "enum": ["", *CASE_STATUSES]}),
]
KindFilter = Annotated[
    str, AfterValidator(_one_of("kind", MANUAL_KINDS)), WithJsonSchema({"type": "string", "enum": ["", *MANUAL_KINDS]})
]
ShortText = Annotated[str, StringConstraints(max_length=255)]
#: the most pages a list offers: beyond it an offset would overflow a database integer long before
MAX_PAGE = 1_000_000


class PagesIn(Schema):
    page: int = Field(1, ge=1, le=MAX_PAGE)
    page_size: int | None = Field(None, ge=1, le=100)


class SessionsQuery(Schema):
    q: str = Field("", max_length=255, description="part of a key or channel")


class CasesQuery(Schema):
    status: StatusFilter = ""
    severity: SeverityFilter = ""
    session: ShortText = Field("", description="part of a session key (as the drift queue page matches it)")
    assignee: ShortText = Field("", description='a username, "me" or "none"')
    kind: KindFilter = ""
    mentions: Literal["", "me"] = Field("", description='"me": cases with a comment that mentions you')


class AuditQueryIn(Schema):
    actor: str = Field("", max_length=150, description="the actor's name, exactly")
    action: str = Field("", max_length=64, description="an action prefix, e.g. drift_case.")
    object: str = Field("", max_length=100, description="type[:id], e.g. session:3")
    since: date | None = None
    until: date | None = None


class ArchiveSearchQuery(Schema):
    q: str = Field(min_length=1, max_length=1000, description="a word or phrase")
    limit: int = Field(20, ge=1, le=200)


class ConfigIn(StrictIn):
    """CompressionConfig overrides for one run (see the library's ``CompressionConfig``); bounds as the pipeline's."""

    context_window_tokens: int | None = Field(None, ge=256, le=10_000_000)
    trigger_ratio: float | None = Field(None, ge=0.05, le=1.0)
    protect_head_messages: int | None = Field(None, ge=0, le=10_000)
    tail_tokens: int | None = Field(None, ge=0, le=10_000_000)
    prune_protect_tokens: int | None = Field(None, ge=0, le=10_000_000)
    max_tool_arg_chars: int | None = Field(None, ge=64, le=10_000_000)
    summary_max_tokens: int | None = Field(None, ge=0, le=10_000_000)
    summary_input_tokens: int | None = Field(None, ge=0, le=10_000_000)
    max_ineffective_compressions: int | None = Field(None, ge=0, le=1_000)


# --------------------------------------------------------------------------- bodies


class SessionIn(StrictIn):
    key: SessionKey = Field(description="e.g. `wechat:wxid_123`; no `/`, no control or invisible characters")
    messages: Messages = Field(default_factory=list, description="OpenAI chat-format messages")
    metadata: dict[str, Any] = Field(default_factory=dict)
    context_window_tokens: int | None = Field(None, ge=256, le=10_000_000)
    last_consolidated: int = Field(0, ge=0, le=2**31 - 1, description="a prefix compression never rewrites")


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


class AppendIn(StrictIn):
    messages: Messages = Field(min_length=1)
    expected_version: int | None = Field(
        None, ge=0, le=2**63 - 1, description="409 unless the session is at this version"
    )


class AppendOut(Schema):
    key: str
    version: int
    message_count: int
    token_count: int
    queued_run_id: int | None = Field(None, description="an automatic compression this append triggered")


class CompressIn(StrictIn):
    focus_topic: str | None = Field(None, max_length=2_000)
    config: ConfigIn | None = Field(None, description="CompressionConfig overrides for this run")
    wait: float | None = Field(None, ge=0, le=3600, description="seconds to block until the run ends")


class ClaimOut(Schema):
    """One claim of a summary line, as the drift check read it against the archived originals."""

    line: int = Field(description="0-based line of the summary text the claim is on")
    text: str
    claim_type: str = Field(description="requirement, state, cause, identifier or other")
    certainty: str = Field(description="certain or hedged")
    verdict: str = Field(description="supported, contradicted, unsupported or cannot_tell")
    messages: list[int] = Field(description="history indexes of the messages the verdict rests on")
    reason: str = Field(description="a code; reason_text is its English sentence")
    reason_text: str
    note: str


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
    drift_check: str = Field(
        "waiting", description="waiting (not checked yet), checked, or failed (retry with POST .../drift-check)"
    )
    drift_attempts: int
    drift_error: str
    drift_claims: list[ClaimOut] = Field(default_factory=list)
    created_at: datetime


#: a run's outcome; ``nothing``: it left the history as it was (nothing to compress), not a compression
RunStatus = Annotated[
    str,
    WithJsonSchema(
        {
            "type": "string",
            "enum": list(CompressionRun.Status.values),
            "description": "queued and running: in progress; succeeded and degraded: compressed (degraded: "
            "the summary failed or the history is still over the trigger); nothing: nothing to compress, the "
            "history was left as it was; failed, conflict: nothing was changed",
        }
    ),
]


class RunOut(Schema):
    id: int
    session: str
    trigger: str
    status: RunStatus
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

    @staticmethod
    def resolve_session(run: CompressionRun) -> str:
        return run.session.key

    @staticmethod
    def resolve_input_messages(run: CompressionRun) -> int:
        return len(run.input_keys)

    @staticmethod
    def resolve_output_messages(run: CompressionRun) -> int:
        return len(run.output_keys)

    @staticmethod
    def resolve_archive_id(run: CompressionRun) -> int | None:
        return run.archive.pk if hasattr(run, "archive") else None

    @staticmethod
    def resolve_summary(run: CompressionRun) -> dict[str, Any] | None:
        archive = run.archive if hasattr(run, "archive") else None
        summary = archive.summaries.filter(run=run).first() if archive is not None else None
        return summary_payload(summary) if summary is not None else None


def summary_payload(summary: Summary) -> dict[str, Any]:
    data = SummaryOut.from_orm(summary).dict()
    checked, failed = summary.drift_checked_at is not None, drift_check_failed(summary)
    data["drift_check"] = "checked" if checked else "failed" if failed else "waiting"
    data["drift_claims"] = [_claim(c) for c in (summary.drift_assessment or {}).get("claims", [])]
    return data


def _claim(claim: dict[str, Any]) -> dict[str, Any]:
    reason = str(claim.get("reason") or "")
    return {
        "line": claim.get("line", 0),
        "text": claim.get("text", ""),
        "claim_type": claim.get("claim_type", "other"),
        "certainty": claim.get("certainty", "certain"),
        "verdict": claim.get("verdict", "cannot_tell"),
        "messages": claim.get("messages", []),
        "reason": reason,
        "reason_text": REASONS.get(reason, ""),
        "note": claim.get("note", ""),
    }


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


class ReportIn(StrictIn):
    session_key: SessionKey = Field(description="created when it does not exist (rules as for POST /sessions)")
    input_messages: Messages
    output_messages: Messages
    archive_messages: Messages | None = None
    summary_text: str | None = Field(None, max_length=1_000_000)
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


class ResummarizeIn(StrictIn):
    summarizer: str = Field(max_length=32, description="extractive or openai")
    model: str | None = Field(None, max_length=200)
    focus_topic: str | None = Field(None, max_length=2_000)
    prompt_version: str | None = Field(None, max_length=64)


class PromoteIn(StrictIn):
    acknowledge_drift: bool = Field(
        False, description="promote although the summary has open high-severity drift findings (audited)"
    )


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


class DriftCommentIn(StrictIn):
    body: str = Field(..., min_length=1, max_length=20000, description="@username mentions a teammate")
    quote: str = Field("", max_length=4000, description="the passage the comment is about")


class DriftCaseIn(StrictIn):
    summary: int = Field(..., ge=1, le=2**63 - 1, description="the summary's id (its row id, as in /summaries/{id})")
    quote: str = Field(..., min_length=1, max_length=4000, description="the passage of the summary in question")
    kind: Kind = Field("other", description="a drift kind (constraint_inverted, ...) or other")
    severity: Severity = Field("medium", description="low, medium or high")
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


class DriftCasePatch(StrictIn):
    claim: bool | None = Field(None, description="true: assign to yourself (refused while someone else holds it)")
    status: CaseStatus | None = None
    assignee: str | None = Field(None, max_length=150, description="a username; empty string unassigns")
    verdict: str | None = Field(None, max_length=20000)
    comment: str | None = Field(None, max_length=20000)
    quote: str | None = Field(None, max_length=4000, description="the passage the comment is about")


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


class DriftBulkIn(StrictIn):
    cases: list[Annotated[int, Field(ge=1, le=2**63 - 1)]] = Field(..., min_length=1, max_length=200)
    action: Literal["claim", "assign", "dismiss"]
    assignee: str = Field("", max_length=150, description="assign: a username (empty unassigns)")
    verdict: str = Field("", max_length=4000, description="dismiss: why the cases are fine")


class PairwiseReviewIn(StrictIn):
    a: int = Field(..., ge=1, le=2**63 - 1, description="summary id of version A")
    b: int = Field(..., ge=1, le=2**63 - 1, description="summary id of version B (same archive)")
    verdict: Literal["a_better", "b_better", "same", "both_wrong"]
    note: str = Field("", max_length=4000, description="what decided it (needed for both_wrong)")


class PairwiseReviewOut(Schema):
    id: int
    archive_id: int
    a: str = Field(..., description="version A's summary_id")
    b: str = Field(..., description="version B's summary_id")
    verdict: str
    note: str
    reviewer: str | None
    created_at: datetime

    @staticmethod
    def resolve_a(obj: Any) -> str:
        return str(obj.a.summary_id)

    @staticmethod
    def resolve_b(obj: Any) -> str:
        return str(obj.b.summary_id)

    @staticmethod
    def resolve_reviewer(obj: Any) -> str | None:
        return obj.reviewer.get_username() if obj.reviewer else None
