"""The run page: what one compression did, stage by stage, and the diff of its input and output.

The diff is an alignment of the run's two key lists (``console.diff.history.align``): linear in the
history's length and computed without message data. Only the rows on screen load their
messages (one query); long unchanged stretches and the archived range stay collapsed and
load on demand (``runs/<pk>/diff?from=&to=``), so a 5,000-message run renders a small page.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from django.contrib.auth.decorators import permission_required
from django.db.models import Case, Q, When
from django.http import HttpRequest, HttpResponse
from django.shortcuts import get_object_or_404, render
from django.urls import reverse
from django.utils.http import urlencode
from django.utils.translation import gettext as _
from django.utils.translation import pgettext
from django.views.decorators.http import require_GET
from django.views.decorators.vary import vary_on_headers

from agent_compression.messages import call_arguments, call_name, content_text
from agent_compression.summary_message import parse_summary_message

from ..diff import history
from ..diff.words import inline_diff
from ..display import (
    MessageView,
    link_references,
    mask_unless_revealed,
    message_view,
    pretty_arguments,
    render_markdown,
)
from ..models import Archive, CompressionRun, DriftCase, Summary
from ..reveal import may_reveal, reveal_for, revealing
from ..templatetags.run_progress import run_status_class, seconds_between, stage_label, tokens_saved
from . import VIEW, int_or_none, labels, load_messages
from .htmx import partial
from .presenters import References, finding_row, history_numbers, label_case

VIEWS = ("side", "unified")
#: characters of a message a diff row shows before "show the rest" (rows come two by two)
DIFF_PREVIEW_CHARS = 600


# --------------------------------------------------------------------------- views


@require_GET
@permission_required(VIEW, raise_exception=True)
@vary_on_headers("HX-Request")
def run_detail(request: HttpRequest, pk: int) -> HttpResponse:
    run = _get_run(pk)
    reveal_for(request, run)
    archive = Archive.objects.filter(run=run).first()
    ctx = _diff_context(request, run, archive, at=request.GET.get("at", ""))
    ctx |= _page_context(run, archive, ctx)
    return render(request, partial(request, "console/run.html", "diff"), ctx)


@require_GET
@permission_required(VIEW, raise_exception=True)
@vary_on_headers("HX-Request")
def run_diff(request: HttpRequest, pk: int) -> HttpResponse:
    """The diff alone (htmx swaps it in), or with ``from``/``to`` the rows of one collapsed stretch."""
    run = _get_run(pk)
    reveal_for(request, run)
    archive = Archive.objects.filter(run=run).first()
    span = int_or_none(request.GET.get("from")), int_or_none(request.GET.get("to"))
    if span[0] is not None and span[1] is not None:
        ctx = _diff_context(request, run, archive, span=(span[0], span[1]))
        return render(request, partial(request, "console/_diff_page.html", "blocks"), ctx)
    ctx = _diff_context(request, run, archive, at=request.GET.get("at", ""))
    return render(request, partial(request, "console/_diff_page.html", "diff"), ctx)


def _get_run(pk: int) -> CompressionRun:
    return get_object_or_404(CompressionRun.objects.select_related("session", "created_by"), pk=pk)


# --------------------------------------------------------------------------- the page around the diff


def _summary(run: CompressionRun) -> Summary | None:
    """The summary this run wrote (or, failing that, its archive's active one). One query, archive or not."""
    mine = Q(run=run)
    return (
        Summary.objects.filter(archive__run=run)
        .filter(mine | Q(status=Summary.Status.ACTIVE))
        .order_by(Case(When(mine, then=0), default=1), "-created_at", "-id")
        .only("pk", "summary_id", "status", "run_id", "archive_id")
        .first()
    )


def _page_context(run: CompressionRun, archive: Archive | None, diff_ctx: dict[str, Any]) -> dict[str, Any]:
    runs = CompressionRun.objects.filter(session_id=run.session_id).values_list("pk", flat=True)
    earlier = Q(created_at__lt=run.created_at) | Q(created_at=run.created_at, pk__lt=run.pk)
    later = Q(created_at__gt=run.created_at) | Q(created_at=run.created_at, pk__gt=run.pk)
    return {
        "prev_run": runs.filter(earlier).order_by("-created_at", "-pk").first(),
        "next_run": runs.filter(later).order_by("created_at", "pk").first(),
        "status_class": run_status_class(run.status),
        "duration": seconds_between(run.started_at, run.finished_at),
        "wait": seconds_between(run.created_at, run.started_at),
        "tokens": _tokens(run),
        "segments": _segments(run, diff_ctx["rows"], archive is not None),
        "stages": _stages(run.stages, applied=run.applied or not run.finished),
        # the stages ran, but the session kept its history: their counts are what would have happened
        "stages_not_applied": bool(run.stages) and run.finished and not run.applied,
        "pruned": _pruned(run, diff_ctx["shown_anchors"], diff_ctx["run_url"]),
        "repairs": _repairs(run.repair),
        "warnings": [w | {"text": labels.warning_text(w)} for w in run.warnings if isinstance(w, dict)],
        "warning_codes": {w.get("code") for w in run.warnings if isinstance(w, dict)},
        "nothing_reason": _as_sentence(_nothing_reason(run.warnings)),
    } | _drift_context(diff_ctx.get("summary"), archive)


def _drift_context(summary: Summary | None, archive: Archive | None) -> dict[str, Any]:
    """The drift check of the run's summary: its findings and the cases they opened (two queries)."""
    if summary is None or archive is None:
        return {}
    checked = Summary.objects.filter(pk=summary.pk).only("drift_findings", "drift_checked_at").first()
    if checked is None:
        return {}
    cases = DriftCase.objects.filter(summary_id=summary.pk).order_by("created_at", "id")
    return {
        "drift_checked": checked.drift_checked_at is not None,
        "findings": [finding_row(f, archive) for f in checked.drift_findings or []],
        "drift_cases": [label_case(c) for c in cases],
    }


def _as_sentence(text: str) -> str:
    if not text:
        return ""
    return pgettext("a reason as a sentence", "%(reason)s.") % {"reason": text[:1].upper() + text[1:]}


def _nothing_reason(warnings: Any) -> str:
    """Why a run had nothing to compress, as the callout's one sentence ("" when no warning says)."""
    for w in warnings or ():
        if not isinstance(w, dict):
            continue
        raw = w.get("params")
        params: dict[str, Any] = raw if isinstance(raw, dict) else {}
        if w.get("code") == "nothing_to_compress" and params.get("reason"):
            reasons = labels.WARNING_PARAMS["nothing_to_compress"]["reason"]
            return str(labels.label(reasons, params["reason"]))
        if w.get("code") in ("nothing_to_compress", "no_token_savings"):
            return labels.warning_text(w)
    return ""


def _tokens(run: CompressionRun) -> dict[str, Any] | None:
    if run.tokens_before is None or run.tokens_after is None:
        return None
    saved = tokens_saved(run)
    return {
        "before": run.tokens_before,
        "after": run.tokens_after,
        "saved": saved,
        "saved_pct": round(100 * saved / run.tokens_before, 1) if run.tokens_before else 0,
        "after_pct": round(100 * run.tokens_after / run.tokens_before, 1) if run.tokens_before else 100,
    }


def _stages(stages: Any, applied: bool = True) -> list[dict[str, Any]]:
    """The stages table; ``applied=False``: what the counts claim was done is worded as what would have been."""
    names = labels.STAGE_COUNTS if applied else {**labels.STAGE_COUNTS, **labels.STAGE_COUNTS_NOT_APPLIED}
    items = [s for s in stages or () if isinstance(s, dict)]
    longest = max((float(s.get("ms") or 0) for s in items), default=0.0) or 1.0
    total = sum(float(s.get("ms") or 0) for s in items) or 1.0
    out = []
    for s in items:
        ms = float(s.get("ms") or 0)
        counts: dict[str, Any] = s["counts"] if isinstance(s.get("counts"), dict) else {}
        out.append(
            {
                "name": s.get("name", ""),
                "label": stage_label(s.get("name", "")),
                "ms": ms,
                "width": max(0.5, round(100 * ms / longest, 1)),
                "share": round(100 * ms / total, 1),
                # a zero is no claim: only the counts of something done are worded "would have"
                "counts": [
                    (labels.label(names if v else labels.STAGE_COUNTS, k), _count(k, v)) for k, v in counts.items()
                ],
            }
        )
    return out


def _count(name: str, value: Any) -> str:
    if isinstance(value, bool):
        return str(_("yes") if value else _("no"))
    return str(value)[:16] if name == "sha256" else str(value)


def _segments(run: CompressionRun, rows: list[history.Row], archived: bool) -> dict[str, Any] | None:
    """Head / middle / tail of the input, and what each became in the output (messages and tokens)."""
    bounds = run.boundaries or {}
    head, tail, total = bounds.get("head_end"), bounds.get("tail_start"), bounds.get("total")
    if not isinstance(head, int) or not isinstance(tail, int) or not isinstance(total, int):
        return None
    if not total or total != len(run.input_keys):
        return None
    tail = max(head, tail)
    # output rows follow the segment of the input message they came from; inserted ones sit in the middle
    out_sizes = [0, 0, 0]
    segment = 0
    for row in rows:
        if row.in_index is not None:
            segment = 0 if row.in_index < head else 1 if row.in_index < tail else 2
        elif row.note and "inserted" in row.note:
            segment = 1
        if row.out_index is not None:
            out_sizes[segment] += 1
    cuts_out = (out_sizes[0], out_sizes[0] + out_sizes[1])
    tokens = run.segment_tokens({"in": (head, tail), "out": cuts_out})

    def parts(sizes: list[int], names: list[Any]) -> list[dict[str, Any]]:
        whole = sum(sizes) or 1
        return [
            {"name": name, "label": label, "size": size, "pct": round(100 * size / whole, 2)}
            for name, label, size in zip(("head", "middle", "tail"), names, sizes, strict=True)
        ]

    labels_in = [_("head"), _("middle"), _("tail")]
    labels_out = [_("head"), _("summary") if archived else _("middle"), _("tail")]
    has_output = bool(run.output_keys)
    return {
        "messages_in": parts([head, tail - head, total - tail], labels_in),
        "messages_out": parts(out_sizes, labels_out) if has_output else None,
        "tokens_in": parts(tokens["in"], labels_in) if tokens else None,
        "tokens_out": parts(tokens["out"], labels_out) if tokens and has_output else None,
    }


#: pruned items listed one by one on the run page (the rest are summed up by kind and tool)
PRUNED_LISTED = 100


def _pruned(run: CompressionRun, shown_anchors: set[str], run_url: str) -> dict[str, Any] | None:
    """The pruned items summed up by kind and tool, and the first ``PRUNED_LISTED`` one by one."""
    groups: dict[tuple[str, str], dict[str, Any]] = {}
    items: list[dict[str, Any]] = []
    for item in run.pruned or ():
        if not isinstance(item, dict) or not isinstance(item.get("index"), int):
            continue
        kind, tool = str(item.get("kind", "")), str(item.get("tool", ""))
        before, after = int(item.get("tokens_before") or 0), int(item.get("tokens_after") or 0)
        group = groups.setdefault(
            (kind, tool),
            {"kind_label": labels.label(labels.PRUNED_KINDS, kind), "tool": tool, "count": 0, "before": 0, "after": 0},
        )
        group["count"] += 1
        group["before"] += before
        group["after"] += after
        if len(items) < PRUNED_LISTED:
            anchor = f"in-{item['index']}"
            items.append(
                {
                    "index": item["index"],
                    "kind_label": group["kind_label"],
                    "tool": tool,
                    "before": before,
                    "after": after,
                    "href": f"#{anchor}" if anchor in shown_anchors else f"{run_url}?at={anchor}#{anchor}",
                }
            )
    if not groups:
        return None
    total = sum(g["count"] for g in groups.values())
    return {"groups": list(groups.values()), "items": items, "total": total, "unlisted": total - len(items)}


def _repairs(repair: Any) -> list[dict[str, Any]]:
    if not isinstance(repair, dict):
        return []
    out = []
    for name, label in labels.REPAIRS.items():
        for item in repair.get(name) or ():
            if isinstance(item, dict):
                index = item.get("index")
                detail = item.get("reason") or ", ".join(str(c) for c in item.get("changes") or ())
                if "to_follow" in item:
                    detail = _("moved after message %(index)s") % {"index": item["to_follow"]}
            else:
                index, detail = (item, "") if isinstance(item, int) else (None, str(item))
            out.append({"kind": name, "label": label, "index": index, "detail": detail})
    return out


# --------------------------------------------------------------------------- the diff


@dataclass
class RowView:
    """One row of the diff, ready for the template."""

    row: history.Row
    label: str
    old: MessageView | None = None
    new: MessageView | None = None
    #: the inline word diff: left side (equal + deleted), right side (equal + inserted), both
    old_spans: list[Any] | None = None
    new_spans: list[Any] | None = None
    spans: list[Any] | None = None
    note: str = ""
    #: the diff was too big to compute: both texts are shown instead
    too_big: bool = False
    #: an inserted summary: its body as sanitized HTML, each ``#N`` linked to the archived original
    summary_html: str = ""

    @property
    def kind(self) -> str:
        return self.row.kind

    @property
    def changed(self) -> bool:
        return self.row.kind != history.KEPT

    @property
    def old_anchor(self) -> str:
        """The id of the input message's card (the row itself carries ``in-<i>``)."""
        return f"c-in-{self.row.in_index}"

    @property
    def new_anchor(self) -> str:
        return f"c-out-{self.row.out_index}"


@dataclass
class BlockView:
    block: history.Block
    rows: list[RowView] = field(default_factory=list)
    #: for a collapsed stretch: index ranges, and the URLs that open it
    in_range: tuple[int, int] | None = None
    out_range: tuple[int, int] | None = None
    changes: int = 0
    expand_url: str = ""
    page_url: str = ""
    anchor: str = ""
    #: an archive block: the deep-linked archived message, if any
    target: int | None = None
    #: an archive block: the archived originals shown in place (``{"index", "anchor", "m"}``), and how many are not
    originals: list[dict[str, Any]] = field(default_factory=list)
    originals_hidden: int = 0

    @property
    def kind(self) -> str:
        return self.block.kind

    @property
    def archived_count(self) -> int:
        return self.in_range[1] - self.in_range[0] if self.in_range else 0

    @property
    def last_in(self) -> int | None:
        return self.in_range[1] - 1 if self.in_range else None

    @property
    def last_out(self) -> int | None:
        return self.out_range[1] - 1 if self.out_range else None


def _diff_context(
    request: HttpRequest,
    run: CompressionRun,
    archive: Archive | None,
    *,
    at: str = "",
    span: tuple[int, int] | None = None,
) -> dict[str, Any]:
    view = request.GET.get("view") or "side"
    view = view if view in VIEWS else "side"
    archive_range = (archive.start, archive.end) if archive is not None else None
    has_output = bool(run.output_keys)
    rows = (
        history.align(
            run.input_keys, run.output_keys, archive_range=archive_range, pruned=run.pruned, repair=run.repair
        )
        if has_output
        else []
    )
    focus = history.find_row(rows, at) if at else None
    blocks = history.expand_rows(rows, *span) if span is not None else history.group_rows(rows, focus=focus)
    shown_rows = [row for block in blocks for row in block.shown_rows]
    wanted = {key for row in shown_rows for key in row.keys}
    data = load_messages(wanted)
    reveal = revealing()
    revealed: dict[str, str] = {"reveal": "1"} if reveal else {}
    params = {"view": view} | revealed
    run_url = reverse("run", args=[run.pk])
    diff_url = reverse("run_diff", args=[run.pk])
    block_views = [_block_view(b, rows, data, run_url, diff_url, params, focus) for b in blocks]
    for view_of_block in block_views:
        if view_of_block.kind == "archive" and archive is not None:
            _archived_originals(view_of_block, archive)
    counts = history.count_kinds(rows)
    return {
        "run": run,
        "archive": archive,
        "summary": _summary(run),
        "span": span,
        "rows": rows,
        "blocks": block_views,
        "view": view,
        "reveal": reveal,
        "may_reveal": may_reveal(request.user),
        "has_output": has_output,
        "input_count": len(run.input_keys),
        "output_count": len(run.output_keys),
        "kind_counts": [
            {"kind": k, "label": labels.ROW_KINDS[k], "help": labels.ROW_KIND_HELP.get(k, ""), "count": c}
            for k, c in counts.items()
            if c and k != history.KEPT
        ],
        "unchanged_count": counts[history.KEPT],
        "focus_anchor": rows[focus].anchor if focus is not None else "",
        "view_urls": {v: f"{run_url}?{urlencode({'view': v} | revealed)}" for v in VIEWS},
        "diff_urls": {v: f"{diff_url}?{urlencode({'view': v} | revealed)}" for v in VIEWS},
        "reveal_url": f"{run_url}?{urlencode({'view': view, 'reveal': '1'})}",
        "hide_url": f"{run_url}?{urlencode({'view': view})}",
        "run_url": run_url,
        "shown_anchors": {row.anchor for row in shown_rows},
        # short labels of input and output positions in the diff (the anchors say in-<i> / out-<j>)
        "in_label": pgettext("position in the run's input", "in"),
        "out_label": pgettext("position in the run's output", "out"),
    }


def _block_view(
    block: history.Block,
    rows: list[history.Row],
    data: dict[str, tuple[Any, int]],
    run_url: str,
    diff_url: str,
    params: dict[str, str],
    focus: int | None,
) -> BlockView:
    out = BlockView(block)
    if block.kind == "rows":
        out.rows = [_row_view(r, data) for r in block.rows]
        return out
    if block.kind == "archive":
        out.rows = [_row_view(r, data) for r in block.inserted]
        archived = block.archived
        out.in_range = (archived[0].in_index or 0, (archived[-1].in_index or 0) + 1)
        out.anchor = f"in-{out.in_range[0]}"
        if focus is not None and block.start <= focus < block.end and rows[focus].kind == history.ARCHIVED:
            out.target = rows[focus].in_index
        return out
    stretch = rows[block.start : block.end]
    ins = [r.in_index for r in stretch if r.in_index is not None]
    outs = [r.out_index for r in stretch if r.out_index is not None]
    out.in_range = (ins[0], ins[-1] + 1) if ins else None
    out.out_range = (outs[0], outs[-1] + 1) if outs else None
    out.changes = sum(1 for r in stretch if r.kind != history.KEPT)
    out.anchor = f"fold-{block.start}"
    first = stretch[0].anchor
    out.expand_url = f"{diff_url}?{urlencode({'from': str(block.start), 'to': str(block.end)} | params)}"
    out.page_url = f"{run_url}?{urlencode(params | {'at': first})}#{first}"
    return out


#: archived originals shown in place beside their summary (the rest: on the archive page)
ARCHIVED_SHOWN = 200


def archived_anchor(index: int) -> str:
    """The id of archived original ``index`` (of the run's input) shown inside the run diff's archive block."""
    return f"orig-{index}"


def _archived_originals(block: BlockView, archive: Archive) -> None:
    """The originals the summary replaced, masked like every message, and the summary with its ``#N`` linked
    to them in the page (to the archive page for those not shown here, or held by an earlier archive)."""
    keys = archive.message_keys[:ARCHIVED_SHOWN]
    found = load_messages(keys)
    numbers = history_numbers(archive)
    for offset, key in enumerate(keys):
        index = archive.start + offset
        row = found.get(key)
        view = message_view(key, row[0], tokens=row[1], limit=DIFF_PREVIEW_CHARS) if row else None
        block.originals.append(
            {"index": index, "anchor": archived_anchor(index), "m": view, "key": key, "number": numbers[offset]}
        )
    block.originals_hidden = len(archive.message_keys) - len(keys)
    last_shown = archive.start + len(keys)
    href = References(archive).in_page(lambda i: archived_anchor(i) if i < last_shown else None)
    for rv in block.rows:
        if rv.row.note and rv.row.note.get("inserted") == "summary" and rv.row.out_key:
            payload = load_messages([rv.row.out_key]).get(rv.row.out_key)
            parsed = parse_summary_message(payload[0]) if payload else None
            if parsed and parsed[1].strip():
                rv.summary_html = link_references(render_markdown(parsed[1]), href)


def _diff_text(data: dict[str, Any]) -> str:
    """The text a word diff compares: content, then each tool call as ``name arguments`` (masked first)."""
    parts = [content_text(data)]
    for call in data.get("tool_calls") or ():
        if isinstance(call, dict):
            parts.append(f"→ {call_name(call)} {pretty_arguments(call_arguments(call))}")
    return mask_unless_revealed("\n".join(p for p in parts if p))


def _note(row: history.Row) -> str:
    note = row.note or {}
    if row.kind in (history.PRUNED, history.TRUNCATED) and note:
        kind = labels.label(labels.PRUNED_NOTES, str(note.get("kind")), labels.PRUNED_NOTES["args_truncated"])
        return _("%(kind)s · %(tool)s · %(before)s → %(after)s tokens") % {
            "kind": kind,
            "tool": note.get("tool", ""),
            "before": note.get("tokens_before", "?"),
            "after": note.get("tokens_after", "?"),
        }
    if "inserted" in note:
        return str(labels.label(labels.INSERTED, note["inserted"]))
    if "lost_result" in note:
        return _("placeholder for the lost result of call %(id)s") % {"id": note["lost_result"]}
    if "placeholder" in note:
        return _("placeholder the validator inserted")
    if note.get("changes"):
        return _("changed by the validator: %(changes)s") % {"changes": ", ".join(note["changes"])}
    if note.get("reason"):
        return _("dropped by the validator: %(reason)s") % {"reason": note["reason"]}
    if note.get("moved") == "from":
        return _("moved by the validator (see its new place below)")
    if note.get("moved") == "to":
        return _("moved here by the validator")
    return ""


def _row_view(row: history.Row, data: dict[str, tuple[Any, int]]) -> RowView:
    view = RowView(row, str(labels.label(labels.ROW_KINDS, row.kind)), note=_note(row))

    def message(key: str | None) -> MessageView | None:
        if key is None or key not in data:
            return None
        payload, tokens = data[key]
        return message_view(key, payload, tokens=tokens, limit=DIFF_PREVIEW_CHARS)

    view.old = message(row.in_key)
    view.new = view.old if row.out_key == row.in_key else message(row.out_key)
    comparable = row.kind in (history.TRUNCATED, history.PATCHED, history.CHANGED)
    if comparable and row.in_key in data and row.out_key in data:
        old, new = data[row.in_key][0], data[row.out_key][0]
        spans = inline_diff(_diff_text(old), _diff_text(new))
        if spans is None:
            view.too_big = True
        else:
            view.spans = spans
            view.old_spans = [s for s in spans if s.op in ("equal", "delete", "skip", "skip-delete")]
            view.new_spans = [s for s in spans if s.op in ("equal", "insert", "skip", "skip-insert")]
    return view
