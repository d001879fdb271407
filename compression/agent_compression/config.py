"""One configuration object, passed to every stage."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field, fields
from typing import Any

#: fields set in code only: not budgets (no number checks), never in ``to_dict``, refused by ``from_dict``
_CODE_ONLY = frozenset({"secret_mask_key", "recall_hint"})


@dataclass(frozen=True)
class CompressionConfig:
    """Budgets and switches for the five-stage pipeline.

    Token budgets left as ``None`` are derived from ``context_window_tokens``
    so that one number (the window) is enough for most callers.
    """

    context_window_tokens: int = 128_000
    #: compress once the history reaches this share of the window
    trigger_ratio: float = 0.7
    #: opening messages never summarized (system prompt, first request)
    protect_head_messages: int = 3
    #: cap on the protected head, by tokens: past it, opening messages beyond the system prompt and the
    #: first request join the middle, or are shortened (default: what the trigger leaves after the tail
    #: budget and a summary: the smaller of the summary ceiling and a quarter of the trigger)
    head_tokens: int | None = None
    #: recent messages kept verbatim, by tokens (default: 25% of the window)
    tail_tokens: int | None = None
    #: stage 1 leaves tool output alone inside this recent budget (default: 30% of the window)
    prune_protect_tokens: int | None = None
    #: tool-call argument strings longer than this are shortened inside the parsed JSON
    max_tool_arg_chars: int = 2_000
    #: fixed cap on the summary's own size; ``None`` (the default): a budget that follows the room,
    #: see :meth:`summary_budget`
    summary_max_tokens: int | None = None
    #: the room-following budget's floor, in tokens (when the room under the trigger allows it)
    summary_floor_tokens: int = 2_000
    #: the room-following budget's ceiling, as a share of the window (the floor wins when larger)
    summary_ceiling_ratio: float = 0.2
    #: cap on what is sent to a model summarizer (default: 25% of the window, at most 30,000)
    summary_input_tokens: int | None = None
    #: after this many consecutive compressions that stay over the trigger, stop compressing automatically
    max_ineffective_compressions: int = 2
    #: HMAC key of the ``[secret:...]`` placeholders in facts, summaries and summarizer prompts (see
    #: :mod:`agent_compression.secrets`); give a private one. Never in ``to_dict`` and refused by ``from_dict``,
    #: so it is not stored with a run's config nor set from a request.
    secret_mask_key: str | bytes | None = field(default=None, repr=False, compare=False)
    #: one line the summary message carries under its notice, telling the agent how to read the archived
    #: originals back (e.g. the tools of an MCP server that serves the archive); ``None``: no such line.
    #: Set in code by whoever serves the archive; never in ``to_dict`` and refused by ``from_dict``.
    recall_hint: str | None = field(default=None, compare=False)

    def __post_init__(self) -> None:
        # values may come from JSON (the console's config overrides): check types, not only ranges
        for f in fields(self):
            value = getattr(self, f.name)
            if f.name in _CODE_ONLY:
                continue
            if value is None and f.default is None:
                continue
            number = f.name in ("trigger_ratio", "summary_ceiling_ratio")
            if isinstance(value, bool) or not isinstance(value, (int, float) if number else int):
                raise ValueError(f"{f.name} must be {'a number' if number else 'a whole number'}, not {value!r}")
        for name in (
            "head_tokens",
            "tail_tokens",
            "prune_protect_tokens",
            "summary_max_tokens",
            "summary_input_tokens",
        ):
            if (getattr(self, name) or 0) < 0:
                raise ValueError(f"{name} must not be negative")
        if self.context_window_tokens < 256:
            raise ValueError("context_window_tokens must be at least 256")
        if not 0.05 <= self.trigger_ratio <= 1.0:
            raise ValueError("trigger_ratio must be between 0.05 and 1.0")
        if self.protect_head_messages < 0:
            raise ValueError("protect_head_messages must not be negative")
        if self.max_tool_arg_chars < 64:
            raise ValueError("max_tool_arg_chars must be at least 64")
        if self.summary_floor_tokens < 64:
            raise ValueError("summary_floor_tokens must be at least 64")
        if not 0.01 <= self.summary_ceiling_ratio <= 0.5:
            raise ValueError("summary_ceiling_ratio must be between 0.01 and 0.5")
        if not isinstance(self.secret_mask_key, str | bytes | None):
            raise ValueError("secret_mask_key must be a string or bytes")
        if self.recall_hint is not None and (not isinstance(self.recall_hint, str) or "\n" in self.recall_hint):
            raise ValueError("recall_hint must be one line of text")

    @property
    def trigger_tokens(self) -> int:
        return int(self.context_window_tokens * self.trigger_ratio)

    @property
    def effective_tail_tokens(self) -> int:
        return self.tail_tokens if self.tail_tokens is not None else self.context_window_tokens // 4

    @property
    def effective_head_tokens(self) -> int:
        if self.head_tokens is not None:
            return self.head_tokens
        # what the trigger leaves after the tail budget and a summary (the summary's budget follows the room)
        summary = min(self.effective_summary_max_tokens, self.trigger_tokens // 4)
        return max(self.context_window_tokens // 10, self.trigger_tokens - self.effective_tail_tokens - summary)

    @property
    def effective_prune_protect_tokens(self) -> int:
        if self.prune_protect_tokens is not None:
            return self.prune_protect_tokens
        return max(self.effective_tail_tokens, int(self.context_window_tokens * 0.3))

    @property
    def effective_summary_max_tokens(self) -> int:
        """The override, else the largest budget :meth:`summary_budget` may give (its ceiling)."""
        if self.summary_max_tokens is not None:
            return self.summary_max_tokens
        return max(self.summary_floor_tokens, int(self.context_window_tokens * self.summary_ceiling_ratio))

    def summary_budget(self, middle_tokens: int, free_tokens: int | None = None, pinned_tokens: int = 0) -> int:
        """The summary's token budget for one compression: it follows the room.

        It grows with the middle being summarized (an eighth of it) plus the pinned facts' own share
        (``pinned_tokens``, so they do not eat the prose), between :attr:`summary_floor_tokens` and a
        ceiling of :attr:`summary_ceiling_ratio` of the window; never more than ``free_tokens`` (the
        room left under the trigger by what is kept verbatim) nor than half the middle.
        ``summary_max_tokens``, when set, overrides all of this.
        """
        if self.summary_max_tokens is not None:
            return self.summary_max_tokens
        ceiling = self.effective_summary_max_tokens
        budget = max(self.summary_floor_tokens, min(ceiling, pinned_tokens + middle_tokens // 8))
        budget = min(budget, max(256, middle_tokens // 2))
        if free_tokens is not None:
            budget = min(budget, max(256, free_tokens))
        return budget

    @property
    def effective_summary_input_tokens(self) -> int:
        if self.summary_input_tokens is not None:
            return self.summary_input_tokens
        return max(1_000, min(30_000, self.context_window_tokens // 4))

    def to_dict(self) -> dict[str, Any]:
        data = asdict(self)
        for name in _CODE_ONLY:
            data.pop(name)
        return data

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> CompressionConfig:
        """Build from a (partial) mapping; unknown keys are an error, not ignored."""
        known = {f.name for f in fields(cls)} - _CODE_ONLY
        unknown = sorted(set(data) - known)
        if unknown:
            raise ValueError(f"unknown config option(s): {', '.join(unknown)}")
        return cls(**data)
