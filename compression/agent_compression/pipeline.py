"""The five-stage pipeline: prune -> boundaries -> archive -> summarize -> assemble + validate.

``compress`` and ``acompress`` share every step but the summarizer call:
``_prepare`` runs stages 1 to 3 and builds the summary request, ``_finish``
assembles and validates whatever the summarizer answered.
"""

from __future__ import annotations

import logging
import time
import uuid
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field, replace
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from .archive import Archive
from .assemble import assemble, is_inserted_message, render_failure_body
from .boundaries import (
    SUMMARY_OVERHEAD_TOKENS,
    Boundaries,
    fixed_part_tokens,
    resolve_boundaries,
    shorten_head,
)
from .config import CompressionConfig
from .facts import (
    PINNED_HEADING,
    extract_facts,
    find_previous_summary,
    history_indexes,
    render_fact,
    render_pinned_facts,
    segment_history_range,
    select_facts,
)
from .messages import latest_user_index
from .prune import PrunedItem, PruneResult, prune_tool_outputs
from .secrets import mask_message, mask_messages, mask_secrets
from .summary_body import finalize_summary
from .summary_message import SummaryHeader, is_summary_message
from .tokens import HistoryTally, TokenCounter, check_token_counts, default_counter
from .types import Fact, Summarizer, SummaryOutcome, SummaryRequest
from .validate import Profile, RepairReport, repair_messages, validate_messages

if TYPE_CHECKING:
    from .reporting import Reporter

log = logging.getLogger(__name__)

STAGES = ("prune", "boundaries", "archive", "summarize", "assemble", "validate")

#: a summary is not cut below this many tokens to fit the output under the trigger
MIN_SUMMARY_TOKENS = 64

#: warning codes that make a result :attr:`CompressionResult.degraded`
DEGRADED_CODES = frozenset({"summary_failed", "still_over_threshold", "fixed_part_over_trigger", "no_token_savings"})

OnStage = Callable[[str], None]
OnArchive = Callable[[Archive], None]


#: every code a :class:`CompressionWarning` can carry
WARNING_CODES = (
    "summary_failed",
    "still_over_threshold",
    "fixed_part_over_trigger",
    "repeated_compression",
    "auto_compression_stopped",
    "nothing_to_compress",
    "no_token_savings",
    "facts_failed",
    "summary_over_budget",
    "input_repaired",
    "pruned_only",
)


@dataclass(frozen=True)
class CompressionWarning:
    """A degradation the caller should know about.

    codes: summary_failed, still_over_threshold, fixed_part_over_trigger (the system prompt, first and
    latest user messages alone exceed the trigger), repeated_compression,
    auto_compression_stopped, nothing_to_compress, no_token_savings,
    facts_failed, summary_over_budget, input_repaired, pruned_only (compressed by pruning alone:
    no archive, no summary)
    """

    code: str
    message: str
    #: the numbers and names ``message`` is built from, so a reader can word it in another language
    params: dict[str, Any] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        return {"code": self.code, "message": self.message, "params": dict(self.params)}


@dataclass
class StageStat:
    """How long one stage took, and what it counted."""

    name: str
    ms: float = 0.0
    counts: dict[str, Any] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        return {"name": self.name, "ms": round(self.ms, 3), "counts": self.counts}


@dataclass
class ThrashState:
    """Anti-thrash memory: consecutive compressions that ended over the trigger.

    Kept per ``Compressor`` by default; inject one per session to persist it.
    """

    ineffective: int = 0
    stopped: bool = False

    def reset(self) -> None:
        self.ineffective = 0
        self.stopped = False


@dataclass
class CompressionResult:
    """Everything one pass of the pipeline produced. ``to_dict()`` is JSON-serializable."""

    messages: list[dict[str, Any]]
    was_compressed: bool
    tokens_before: int
    tokens_after: int
    summary_text: str | None = None
    summary: SummaryOutcome | None = None
    summary_id: str | None = None
    archive: Archive | None = None
    boundaries: Boundaries | None = None
    stages: list[StageStat] = field(default_factory=list)
    pruned: list[PrunedItem] = field(default_factory=list)
    facts: list[Fact] = field(default_factory=list)
    warnings: list[CompressionWarning] = field(default_factory=list)
    repair: RepairReport | None = None

    @property
    def tokens_saved(self) -> int:
        return self.tokens_before - self.tokens_after

    def warning_codes(self) -> list[str]:
        return [w.code for w in self.warnings]

    @property
    def degraded(self) -> bool:
        """The run did not do its job: the summary failed, the output is still over the trigger,
        or nothing was saved."""
        return self.tokens_after >= self.tokens_before or bool(DEGRADED_CODES & set(self.warning_codes()))

    def to_dict(self) -> dict[str, Any]:
        return {
            "was_compressed": self.was_compressed,
            "tokens_before": self.tokens_before,
            "tokens_after": self.tokens_after,
            "summary_id": self.summary_id,
            "summary_text": self.summary_text,
            "summary": asdict(self.summary) if self.summary else None,
            "boundaries": self.boundaries.to_dict() if self.boundaries else None,
            "archive": self.archive.to_dict() if self.archive else None,
            "stages": [s.to_dict() for s in self.stages],
            "pruned": [p.to_dict() for p in self.pruned],
            "facts": [f.to_dict() for f in self.facts],
            "warnings": [w.to_dict() for w in self.warnings],
            "repair": self.repair.to_dict() if self.repair else None,
            "messages": self.messages,
        }


class _Stages:
    """Times stages that may span the sync/async split; announces each start."""

    def __init__(self, on_stage: OnStage | None) -> None:
        self.on_stage = on_stage
        self.stats: list[StageStat] = []
        self._t0 = 0.0

    def start(self, name: str) -> dict[str, Any]:
        self.end()
        if self.on_stage is not None:
            self.on_stage(name)
        self.stats.append(StageStat(name))
        self._t0 = time.perf_counter()
        return self.stats[-1].counts

    def end(self) -> None:
        if self.stats and self._t0:
            self.stats[-1].ms = (time.perf_counter() - self._t0) * 1000
            self._t0 = 0.0


@dataclass
class _Plan:
    """State carried from ``_prepare`` to ``_finish``."""

    messages: list[dict[str, Any]]
    stages: _Stages
    tokens_before: int
    pruned: PruneResult
    boundaries: Boundaries
    archive: Archive
    facts: list[Fact]
    request: SummaryRequest
    #: the head as output (stage 2 may shorten a message in it) and every kept message shortened
    head: list[dict[str, Any]]
    shortened: list[PrunedItem]
    repeated: bool
    warnings: list[CompressionWarning]
    #: token count of each input and pruned message, by ``id()``: the output reuses them instead of recounting
    known: dict[int, int]


def _failed(summarizer: Any, error: BaseException) -> SummaryOutcome:
    name = getattr(summarizer, "name", type(summarizer).__name__)
    return SummaryOutcome(text=None, generator=str(name), error=f"{type(error).__name__}: {error}")


def _summarize(summarizer: Summarizer, request: SummaryRequest) -> SummaryOutcome:
    try:
        return summarizer.summarize(request)
    except Exception as exc:  # the protocol says never raise; a broken one must not crash us
        return _failed(summarizer, exc)


async def _asummarize(summarizer: Summarizer, request: SummaryRequest) -> SummaryOutcome:
    try:
        return await summarizer.asummarize(request)
    except Exception as exc:
        return _failed(summarizer, exc)


class Compressor:
    """Runs the pipeline with one config and one summarizer.

    The default summarizer is the offline :class:`ExtractiveSummarizer`.
    ``thrash_state`` may be injected (one per session) to persist the
    anti-thrash memory; by default each ``Compressor`` keeps its own.
    ``reporter`` (e.g. :class:`~agent_compression.reporting.ConsoleReporter`) is handed
    every result of ``compress``/``acompress`` with its input, the ``session_key`` the call
    names and the config's ``secret_mask_key``; it queues and returns, and an exception it
    raises is logged, never passed to the caller.
    """

    def __init__(
        self,
        config: CompressionConfig | None = None,
        summarizer: Summarizer | None = None,
        *,
        thrash_state: ThrashState | None = None,
        counter: TokenCounter | None = None,
        profile: Profile = "openai",
        reporter: Reporter | None = None,
    ) -> None:
        self.config = config or CompressionConfig()
        self._summarizer = summarizer
        self.reporter = reporter
        self.thrash_state = thrash_state if thrash_state is not None else ThrashState()
        self.counter = counter or default_counter
        self.profile: Profile = profile
        self._tally = HistoryTally(self.counter)

    @property
    def summarizer(self) -> Summarizer:
        if self._summarizer is None:
            # the summarizer modules load on first use: ``import agent_compression`` does not need them
            from .summarize import ExtractiveSummarizer

            self._summarizer = ExtractiveSummarizer()
        return self._summarizer

    # ------------------------------------------------------------------ public

    def should_compress(self, messages: Sequence[dict[str, Any]], *, token_counts: Sequence[int] | None = None) -> bool:
        """True when the history reached the trigger (tokens, not messages) and auto compression is on.

        ``token_counts``: each message's count when the caller has them (nothing is tokenized then).
        Otherwise the compressor remembers the histories it counted, so asking again after appends
        costs the appended messages (see :class:`~agent_compression.tokens.HistoryTally` for in-place edits).
        """
        if self.thrash_state.stopped:
            return False
        if token_counts is not None:
            total = sum(check_token_counts(messages, token_counts))
        else:
            total = self._tally.total(messages)
        return total >= self.config.trigger_tokens

    def compress(
        self,
        messages: Sequence[dict[str, Any]],
        *,
        focus_topic: str | None = None,
        keep_prefix: int = 0,
        on_stage: OnStage | None = None,
        on_archive: OnArchive | None = None,
        token_counts: Sequence[int] | None = None,
        session_key: str | None = None,
    ) -> CompressionResult:
        """Compress ``messages`` (never mutated). The output always validates.

        ``token_counts``: each message's token count as ``count_tokens([message])`` gave it, when
        the caller has them (a store that counted each message once): the input is then not
        tokenized at all, only what the pipeline writes (pruned descriptions, the summary,
        repaired messages). One whole number per message, or ``ValueError``.
        ``session_key``: the session the reporter files this compression under (no reporter: unused).
        """
        plan = self._prepare(messages, focus_topic, keep_prefix, on_stage, on_archive, token_counts)
        if isinstance(plan, CompressionResult):
            result = self._flag_unfit(plan, messages, keep_prefix, token_counts)
        else:
            result = self._finish(plan, _summarize(self.summarizer, plan.request))
            result = self._flag_unfit(result, messages, keep_prefix, token_counts)
        return self._report(messages, result, session_key, focus_topic)

    async def acompress(
        self,
        messages: Sequence[dict[str, Any]],
        *,
        focus_topic: str | None = None,
        keep_prefix: int = 0,
        on_stage: OnStage | None = None,
        on_archive: OnArchive | None = None,
        token_counts: Sequence[int] | None = None,
        session_key: str | None = None,
    ) -> CompressionResult:
        """Like :meth:`compress`, awaiting the summarizer."""
        plan = self._prepare(messages, focus_topic, keep_prefix, on_stage, on_archive, token_counts)
        if isinstance(plan, CompressionResult):
            result = self._flag_unfit(plan, messages, keep_prefix, token_counts)
        else:
            outcome = await _asummarize(self.summarizer, plan.request)
            result = self._flag_unfit(self._finish(plan, outcome), messages, keep_prefix, token_counts)
        return self._report(messages, result, session_key, focus_topic)

    def resummarize(
        self,
        archive_messages: Sequence[dict[str, Any]],
        *,
        start_index: int = 0,
        focus_topic: str | None = None,
        summarizer: Summarizer | None = None,
    ) -> tuple[SummaryOutcome, list[Fact]]:
        """Summarize archived originals again (the console's re-summarize). Never raises."""
        request, facts, _ = self._request(list(archive_messages), start_index, focus_topic)
        return _summarize(summarizer or self.summarizer, request), facts

    async def aresummarize(
        self,
        archive_messages: Sequence[dict[str, Any]],
        *,
        start_index: int = 0,
        focus_topic: str | None = None,
        summarizer: Summarizer | None = None,
    ) -> tuple[SummaryOutcome, list[Fact]]:
        """Async :meth:`resummarize`."""
        request, facts, _ = self._request(list(archive_messages), start_index, focus_topic)
        return await _asummarize(summarizer or self.summarizer, request), facts

    # ------------------------------------------------------------------ steps

    def _report(
        self,
        messages: Sequence[dict[str, Any]],
        result: CompressionResult,
        session_key: str | None,
        focus_topic: str | None,
    ) -> CompressionResult:
        if self.reporter is not None:
            try:
                self.reporter.report(
                    messages,
                    result,
                    session_key=session_key,
                    focus_topic=focus_topic,
                    mask_key=self.config.secret_mask_key,
                )
            except Exception:  # reporting is for the operators: it never breaks the agent's compression
                log.exception("the compression reporter failed; the result is returned unreported")
        return result

    def _request(
        self,
        segment: list[dict[str, Any]],
        start_index: int,
        focus_topic: str | None,
        lossy: Sequence[tuple[int, dict[str, Any]]] = (),
        indexes: list[int | None] | None = None,
        free_tokens: int | None = None,
        middle_tokens: int | None = None,
    ) -> tuple[SummaryRequest, list[Fact], list[CompressionWarning]]:
        """Build the summary request. ``lossy``: (history index, original) of kept messages that pruning
        shortened, whose facts would otherwise be in neither the summary nor the output. ``indexes``: the
        segment's history indexes (default: counted from ``start_index``, earlier summaries expanded)."""

        warnings: list[CompressionWarning] = []
        facts: list[Fact] = []
        previous: str | None = None
        if indexes is None:
            indexes = history_indexes(segment, start_index)

        # masked once, here: facts, the serialized prompt and any summarizer see no raw secret
        # (the archive keeps the originals)
        key = self.config.secret_mask_key
        segment = mask_messages(segment, key)
        lossy = [(index, mask_message(original, key)) for index, original in lossy]
        if focus_topic:
            focus_topic = mask_secrets(focus_topic, key)
        try:
            facts = extract_facts(segment, start_index=start_index, indexes=indexes)
            if lossy:
                for index, original in lossy:
                    facts.extend(extract_facts([original], start_index=index))
                facts = select_facts(facts)
            previous = find_previous_summary(segment)
        except Exception as exc:  # facts are a bonus: a bug there must not stop compression
            warnings.append(
                CompressionWarning(
                    "facts_failed",
                    f"fact extraction failed: {type(exc).__name__}: {exc}",
                    {"error": f"{type(exc).__name__}: {exc}"},
                )
            )
        if middle_tokens is None:
            middle_tokens = self.counter.count(segment)
        request = SummaryRequest(
            messages=segment,
            start_index=start_index,
            facts=facts,
            focus_topic=focus_topic,
            previous_summary=previous,
            max_tokens=self._budget(segment, facts, free_tokens, middle_tokens),
            input_tokens=self.config.effective_summary_input_tokens,
            history_indexes=indexes,
            segment_tokens=middle_tokens,
        )
        return request, facts, warnings

    def _budget(
        self, segment: list[dict[str, Any]], facts: list[Fact], free_tokens: int | None, middle_tokens: int | None
    ) -> int:
        """The summary budget: it follows the middle's size and the room under the trigger (see
        :meth:`CompressionConfig.summary_budget`); the pinned facts get their own share."""
        if self.config.summary_max_tokens is not None:
            return self.config.summary_max_tokens

        pinned = self.counter.text(render_pinned_facts(facts)) if facts else 0
        if middle_tokens is None:
            middle_tokens = self.counter.count(segment)
        return self.config.summary_budget(middle_tokens, free_tokens, pinned)

    def _prepare(
        self,
        messages: Sequence[dict[str, Any]],
        focus_topic: str | None,
        keep_prefix: int,
        on_stage: OnStage | None,
        on_archive: OnArchive | None,
        given_counts: Sequence[int] | None = None,
    ) -> _Plan | CompressionResult:
        messages = list(messages)
        given = check_token_counts(messages, given_counts) if given_counts is not None else None
        stages = _Stages(on_stage)
        counts = stages.start("prune")
        # counted before any stage copies or rewrites a message (masking, pruning): budgets are about the
        # originals, and the counts stay valid for every message that reaches the output unchanged
        token_counts = given if given is not None else self.counter.per_message(messages)
        tokens_before = sum(token_counts)
        pruned = prune_tool_outputs(
            messages,
            self.config,
            self.counter,
            token_counts=token_counts,
            stop_after_tokens=self.config.effective_tail_tokens,
            keep_from=latest_user_index(messages),
        )
        counts.update(messages=len(messages), tokens=tokens_before, **pruned.counts())

        counts = stages.start("boundaries")
        bounds = resolve_boundaries(
            pruned.messages,
            self.config,
            self.counter,
            keep_prefix,
            token_counts=pruned.token_counts,
            head_token_counts=token_counts,
        )
        head, head_items = self._head(messages, bounds, token_counts, keep_prefix)
        counts.update(head=bounds.head_end, middle=bounds.middle_size, tail=bounds.total - bounds.tail_start)
        known = _known_counts(messages, token_counts, pruned)
        middle = messages[bounds.head_end : bounds.tail_start]
        if all(_is_ours(m) for m in middle) and not self._summary_must_shrink(middle, pruned, head_items):
            if pruned.items or head_items:
                return self._pruned_only(messages, pruned, stages, tokens_before, bounds, head, head_items, known)
            reason = "no_middle" if not middle else "only_summary"
            why = "no middle segment" if not middle else "the middle holds only an earlier summary"
            warning = CompressionWarning("nothing_to_compress", f"nothing to compress: {why}", {"reason": reason})
            return self._unchanged(messages, stages, tokens_before, bounds, [warning], known)

        counts = stages.start("archive")
        archive = Archive.of(messages, bounds.head_end, bounds.tail_start)
        counts.update(messages=len(archive), sha256=archive.sha256)
        if on_archive is not None:
            on_archive(archive)  # the caller stores it before any model sees the segment

        counts = stages.start("summarize")

        numbering = history_indexes(messages)  # the one numbering of every #N and source index
        # kept messages shortened (a head one too big, old tail output): their facts come from the originals
        shortened = [*head_items, *(p for p in pruned.items if p.index >= bounds.tail_start)]
        lossy = [(numbering[p.index] or p.index, messages[p.index]) for p in shortened]
        # room under the trigger left by what stays verbatim (head, pruned tail, a lifted request) and the
        # inserted messages
        kept = sum(token_counts[: bounds.head_end]) - sum(p.tokens_before - p.tokens_after for p in head_items)
        kept += sum(pruned.token_counts[bounds.tail_start :])
        if bounds.lifted is not None:
            kept += token_counts[bounds.lifted]
        free = self.config.trigger_tokens - kept - 160
        request, facts, warnings = self._request(
            archive.messages,
            archive.start,
            focus_topic,
            lossy,
            numbering[archive.start : archive.end],
            free,
            sum(token_counts[bounds.head_end : bounds.tail_start]),
        )
        counts.update(
            facts=len(facts), previous_summary=request.previous_summary is not None, budget_tokens=request.max_tokens
        )
        return _Plan(
            messages=messages,
            stages=stages,
            tokens_before=tokens_before,
            pruned=pruned,
            boundaries=bounds,
            archive=archive,
            facts=facts,
            request=request,
            head=head,
            shortened=shortened,
            repeated=any(_is_summary(m) for m in messages),
            warnings=warnings,
            known=known,
        )

    def _summary_must_shrink(
        self, middle: Sequence[dict[str, Any]], pruned: PruneResult, head_items: Sequence[PrunedItem]
    ) -> bool:
        """Whether a middle holding only an earlier summary is summarized again: when the history is still
        over the trigger after pruning (a runtime's loop: the summary of a small window, then a few long
        turns), the earlier summary is rebuilt within the room left, its pinned facts carried over, rather
        than kept whole and the output left over the trigger."""
        if not any(_is_summary(m) for m in middle):
            return False
        after = sum(pruned.token_counts) - sum(p.tokens_before - p.tokens_after for p in head_items)
        return after > self.config.trigger_tokens

    def _finish(self, plan: _Plan, outcome: SummaryOutcome) -> CompressionResult:
        stages, bounds, archive = plan.stages, plan.boundaries, plan.archive
        warnings = plan.warnings
        summary_counts = stages.stats[-1].counts
        outcome = self._checked(outcome, plan)
        summary_counts.update(ok=outcome.ok, generator=outcome.generator)

        counts = stages.start("assemble")
        summary_id = f"sum_{uuid.uuid4().hex[:16]}"
        if outcome.ok:
            body = outcome.text or ""
            limit = plan.request.max_tokens
            size = self.counter.text(body)
            if size > limit * 1.25:
                warnings.append(
                    CompressionWarning(
                        "summary_over_budget",
                        f"summary has {size} tokens, budget {limit}",
                        {"tokens": size, "budget": limit},
                    )
                )
        else:
            body = render_failure_body(len(archive), plan.facts, outcome.error, max_chars=plan.request.max_tokens * 3)
            warnings.append(
                CompressionWarning(
                    "summary_failed",
                    f"summarizer {outcome.generator} failed ({outcome.error}); "
                    f"{len(archive)} messages archived without a summary",
                    {"generator": outcome.generator, "error": outcome.error, "archived": len(archive)},
                )
            )

        header = SummaryHeader(
            summary_id=summary_id,
            generator=outcome.generator if outcome.ok else "none",
            model=outcome.model,
            created=datetime.now(UTC).isoformat(timespec="seconds"),
            archived_range=(archive.start, archive.end),
            archive_sha256=archive.sha256,
            history_range=segment_history_range(plan.request.history_indexes or [], archive.messages),
            recall_hint=self.config.recall_hint,
        )
        head = plan.head  # original messages, but for one too big to keep (stage 2)
        tail = plan.pruned.messages[bounds.tail_start :]
        if bounds.lifted is not None:  # the latest request, archived with the work since it, stays verbatim
            tail = [plan.messages[bounds.lifted], *tail]
        assembled = assemble(head, tail, body, header)
        # the summary gives way when head + summary + tail is over the trigger (a small window, a big tail),
        # counted as stage 5 will write it: repairs add results and rename ids
        for _ in range(3):
            as_written = repair_messages(assembled, self.profile)[0]
            over = self.counter.count_reusing(as_written, plan.known) - self.config.trigger_tokens
            size = self.counter.text(body)
            if over <= 0 or size - over - 16 < MIN_SUMMARY_TOKENS:
                break
            smaller = self._shrunk_body(body, outcome, plan, size - over - 16)
            if self.counter.text(smaller) >= size:
                break
            body = smaller
            assembled = assemble(head, tail, body, header)
        if outcome.ok and body != outcome.text:
            outcome = replace(outcome, text=body)
        counts.update(messages=len(assembled))

        repaired, report, tokens_after = self._validate(assembled, stages, plan.known)
        if tokens_after >= plan.tokens_before:
            warning = CompressionWarning(
                "no_token_savings",
                f"compressed history ({tokens_after} tokens) is not smaller than the input ({plan.tokens_before})",
                {"tokens_after": tokens_after, "tokens_before": plan.tokens_before},
            )
            return self._unchanged(plan.messages, stages, plan.tokens_before, bounds, [*warnings, warning], plan.known)

        warnings.extend(self._track_thrash(tokens_after, plan.repeated))
        return CompressionResult(
            messages=repaired,
            was_compressed=True,
            tokens_before=plan.tokens_before,
            tokens_after=tokens_after,
            summary_text=outcome.text if outcome.ok else None,
            summary=outcome,
            summary_id=summary_id,
            archive=archive,
            boundaries=bounds,
            stages=stages.stats,
            pruned=plan.shortened,
            facts=plan.facts,
            warnings=warnings,
            repair=report,
        )

    def _shrunk_body(self, body: str, outcome: SummaryOutcome, plan: _Plan, max_tokens: int) -> str:
        """``body`` within ``max_tokens``: the same trimming as the summarizers' (pinned facts first)."""
        if outcome.ok:
            return finalize_summary(body, plan.facts, max_tokens)
        return render_failure_body(len(plan.archive), plan.facts, outcome.error, max_chars=max_tokens * 3)

    def _checked(self, outcome: SummaryOutcome, plan: _Plan) -> SummaryOutcome:
        """What the pipeline guarantees whatever the summarizer answered (built-in, a model, a custom one):
        an empty answer is a failure; the text holds no raw secret; the pinned facts are there, verbatim."""
        if not outcome.ok:
            return outcome
        text = outcome.text or ""
        if not text.strip():
            return replace(outcome, text=None, error=outcome.error or "the summarizer returned an empty summary")

        text = mask_secrets(text, self.config.secret_mask_key)
        if not _pins_facts(text, plan.facts):
            text = finalize_summary(text, plan.facts, plan.request.max_tokens)
        return outcome if text == outcome.text else replace(outcome, text=text)

    def _flag_unfit(
        self,
        result: CompressionResult,
        messages: Sequence[dict[str, Any]],
        keep_prefix: int,
        token_counts: Sequence[int] | None,
    ) -> CompressionResult:
        """Say so when the output is over the trigger because what is always kept verbatim is."""
        trigger = self.config.trigger_tokens
        if result.tokens_after <= trigger:
            return result
        fixed = fixed_part_tokens(messages, self.counter, keep_prefix, token_counts=token_counts)
        if fixed + SUMMARY_OVERHEAD_TOKENS + MIN_SUMMARY_TOKENS > trigger:
            result.warnings.append(
                CompressionWarning(
                    "fixed_part_over_trigger",
                    f"the system prompt, the first and the latest user messages (and the kept prefix) take "
                    f"{fixed} tokens: with the smallest summary they leave no room under the trigger ({trigger})",
                    {"fixed": fixed, "trigger": trigger},
                )
            )
        return result

    def _head(
        self, messages: list[dict[str, Any]], bounds: Boundaries, token_counts: list[int], keep_prefix: int
    ) -> tuple[list[dict[str, Any]], list[PrunedItem]]:
        """The head as output: the original messages, with those still too big for it shortened."""
        head, changed = shorten_head(messages, bounds.head_end, self.config, token_counts, self.counter, keep_prefix)
        items = [PrunedItem(i, "pruned", _label(messages[i]), token_counts[i], after) for i, after in changed]
        return head, items

    def _validate(
        self, messages: list[dict[str, Any]], stages: _Stages, known: dict[int, int]
    ) -> tuple[list[dict[str, Any]], RepairReport, int]:
        """Stage 5's last step: repair, check and count the output (only the messages not counted before)."""
        counts = stages.start("validate")
        repaired, report = repair_messages(messages, self.profile)
        violations = validate_messages(repaired, self.profile)
        counts.update(violations=len(violations), repaired=report.changed)
        tokens_after = self.counter.count_reusing(repaired, known)
        stages.end()
        return repaired, report, tokens_after

    def _pruned_only(
        self,
        messages: list[dict[str, Any]],
        pruned: PruneResult,
        stages: _Stages,
        tokens_before: int,
        bounds: Boundaries,
        head: list[dict[str, Any]],
        head_items: list[PrunedItem],
        known: dict[int, int],
    ) -> CompressionResult:
        """Pruning old tool output was enough: everything left fits the tail, so there is nothing to summarize."""
        items = [*head_items, *(p for p in pruned.items if p.index >= bounds.head_end)]
        if not items:  # only the head was pruned, and the head is protected
            warning = CompressionWarning(
                "nothing_to_compress", "nothing to compress: no middle segment", {"reason": "no_middle"}
            )
            return self._unchanged(messages, stages, tokens_before, bounds, [warning], known)
        # the head as in a full compression: its original messages, but for one too big to keep
        kept = head + pruned.messages[bounds.head_end :]
        repaired, report, tokens_after = self._validate(kept, stages, known)
        if tokens_after >= tokens_before:
            warning = CompressionWarning(
                "no_token_savings",
                "pruning tool output did not make the history smaller",
                {"tokens_after": tokens_after, "tokens_before": tokens_before},
            )
            return self._unchanged(messages, stages, tokens_before, bounds, [warning], known)
        warnings = [
            CompressionWarning(
                "pruned_only",
                f"pruned {len(items)} old tool results; the rest fits the tail, so nothing was summarized",
                {"pruned": len(items)},
            )
        ]
        warnings.extend(self._track_thrash(tokens_after, any(_is_summary(m) for m in messages)))
        return CompressionResult(
            messages=repaired,
            was_compressed=True,
            tokens_before=tokens_before,
            tokens_after=tokens_after,
            boundaries=bounds,
            stages=stages.stats,
            pruned=items,
            warnings=warnings,
            repair=report,
        )

    def _unchanged(
        self,
        messages: list[dict[str, Any]],
        stages: _Stages,
        tokens_before: int,
        bounds: Boundaries | None,
        warnings: list[CompressionWarning],
        known: dict[int, int],
    ) -> CompressionResult:
        counts = stages.start("validate")
        repaired, report = repair_messages(messages, self.profile)
        counts.update(repaired=report.changed)
        stages.end()
        tokens_after = self.counter.count_reusing(repaired, known) if report.changed else tokens_before
        if report.changed:
            warnings.append(CompressionWarning("input_repaired", "the input's tool-call structure was repaired"))
        if tokens_after >= self.config.trigger_tokens:
            warnings.extend(self._track_thrash(tokens_after, repeated=True))
        return CompressionResult(
            messages=repaired,
            was_compressed=False,
            tokens_before=tokens_before,
            tokens_after=tokens_after,
            boundaries=bounds,
            stages=stages.stats,
            warnings=warnings,
            repair=report,
        )

    def _track_thrash(self, tokens_after: int, repeated: bool) -> list[CompressionWarning]:
        state, trigger = self.thrash_state, self.config.trigger_tokens
        if tokens_after < trigger:
            state.reset()
            return []
        out = [
            CompressionWarning(
                "still_over_threshold",
                f"{tokens_after} tokens left, trigger is {trigger}",
                {"tokens": tokens_after, "trigger": trigger},
            )
        ]
        state.ineffective += 1
        if repeated:
            out.append(
                CompressionWarning(
                    "repeated_compression",
                    f"compressed again and still over the trigger ({state.ineffective} times in a row)",
                    {"times": state.ineffective},
                )
            )
        if state.ineffective >= self.config.max_ineffective_compressions and not state.stopped:
            state.stopped = True
            out.append(
                CompressionWarning(
                    "auto_compression_stopped",
                    "automatic compression is off for this history: compressing does not get it under the trigger",
                )
            )
        return out


#: fact kinds every summary must carry verbatim (the user's own words)
_MUST_PIN = ("constraint", "approval")


def _pins_facts(body: str, facts: Sequence[Fact]) -> bool:
    """Whether ``body`` ends with the code's ``## Pinned facts``: every constraint and approval,
    and no fact line the code did not write (a model's own pinned facts are not trusted)."""

    start = body.rfind(PINNED_HEADING)
    if start < 0:
        return False
    lines = {line.strip() for line in body[start + len(PINNED_HEADING) :].splitlines()}
    rendered = {render_fact(f) for f in facts}
    if any(line.startswith("- [") and line not in rendered for line in lines):
        return False
    return all(render_fact(f) in lines for f in facts if f.kind in _MUST_PIN)


def _label(message: dict[str, Any]) -> str:
    name = message.get("name")
    if message.get("role") == "tool":
        return name if isinstance(name, str) and name else "tool"
    return str(message.get("role"))


def _known_counts(messages: list[dict[str, Any]], token_counts: list[int], pruned: PruneResult) -> dict[int, int]:
    """Each input message's count and each pruned replacement's, by ``id()``: what an output can
    hold besides the messages the pipeline writes, so the output is not counted again."""
    known = {id(m): n for m, n in zip(messages, token_counts, strict=True)}
    known.update((id(pruned.messages[p.index]), pruned.token_counts[p.index]) for p in pruned.items)
    return known


def _is_summary(message: Any) -> bool:
    return isinstance(message, dict) and is_summary_message(message)


def _is_ours(message: Any) -> bool:
    """A message an earlier compression inserted (summary, bridge, acknowledgement)."""
    return isinstance(message, dict) and (is_summary_message(message) or is_inserted_message(message))
