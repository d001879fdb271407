"""What the run progress fragment needs from a bare ``run``: its stages, elapsed time and badge colour.

The fragment is included by more than one page (``{% include "console/_run_progress.html" with run=run %}``),
so it computes what it shows from the run alone instead of relying on a view's context.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from django import template
from django.utils import timezone
from django.utils.translation import gettext as _

from ..models import CompressionRun
from ..web import labels

register = template.Library()

Status = CompressionRun.Status

STATUS_CLASSES: dict[str, str] = {
    Status.SUCCEEDED: "ok",
    Status.DEGRADED: "warn",
    Status.FAILED: "danger",
    Status.CONFLICT: "danger",
    Status.NOTHING: "neutral",
}


def format_seconds(seconds: float | None) -> str:
    """A duration for people: ``0.4 s``, ``12 s``, ``3 min 4 s``, ``2 h 5 min``."""
    if seconds is None:
        return "—"
    seconds = max(0.0, seconds)
    if seconds < 10:
        return _("%(seconds).1f s") % {"seconds": seconds}
    whole = int(seconds)
    if whole < 60:
        return _("%(seconds)d s") % {"seconds": whole}
    if whole < 3600:
        return _("%(minutes)d min %(seconds)d s") % {"minutes": whole // 60, "seconds": whole % 60}
    return _("%(hours)d h %(minutes)d min") % {"hours": whole // 3600, "minutes": whole % 3600 // 60}


def seconds_between(start: datetime | None, end: datetime | None) -> float | None:
    """Seconds from ``start`` to ``end``; None when either is unknown."""
    return (end - start).total_seconds() if start and end else None


def run_seconds(run: CompressionRun, now: datetime | None = None) -> float | None:
    """How long the run took, or has been going: waiting since creation, working since a worker claimed it."""
    now = now or timezone.now()
    if run.status == Status.QUEUED:
        return seconds_between(run.created_at, now)
    end = run.finished_at if run.finished else now
    return seconds_between(run.started_at or run.created_at, end or now)


@register.filter
def run_elapsed(run: CompressionRun) -> str:
    return format_seconds(run_seconds(run))


@register.filter
def warning_codes(run: CompressionRun) -> set[str]:
    """The codes of the run's warnings (a degraded run says why: summary failed, still over the trigger...)."""
    return {str(w.get("code")) for w in run.warnings or () if isinstance(w, dict)}


@register.filter
def run_status_class(status: str) -> str:
    return STATUS_CLASSES.get(status, "")


@register.filter
def stage_label(stage: str) -> Any:
    return labels.STAGES.get(stage) or labels.label(labels.WAITING_STAGES, stage)


@register.simple_tag
def run_stages(run: CompressionRun) -> list[dict[str, Any]]:
    """Each stage with its state: ``done``, ``current`` or ``todo`` (all ``todo`` before a worker starts)."""
    current = labels.RUN_STAGES.index(run.stage) if run.stage in labels.RUN_STAGES else -1
    if run.status == Status.QUEUED:
        current = -1
    return [
        {
            "name": name,
            "label": labels.label(labels.STAGES, name),
            "state": "done" if i < current else "current" if i == current else "todo",
        }
        for i, name in enumerate(labels.RUN_STAGES)
    ]


@register.filter
def tokens_saved(run: CompressionRun) -> int:
    if run.tokens_before is None or run.tokens_after is None:
        return 0
    return run.tokens_before - run.tokens_after
