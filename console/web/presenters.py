"""What the summary, archive, compare and drift case pages show of a summary: its provenance label, its
versions, its facts and drift findings as rows (secrets masked unless revealed, labels translated), and links
to the message a fact or a finding quotes."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

from django.db.models import Q
from django.urls import reverse
from django.utils.safestring import SafeString
from django.utils.translation import gettext as _

from agent_compression.facts import COMPRESSOR_TEXTS, PINNED_HEADING, history_indexes, history_position
from agent_compression.language import detect_language
from agent_compression.summary_body import HEADINGS_ZH
from agent_compression.summary_message import is_summary_message, parse_summary_message, summary_history_range
from agent_compression.types import SUMMARY_MARKER

from ..display import link_references, mask_unless_revealed, render_markdown
from ..errors import InvalidInput
from ..models import Archive, CompressionRun, DriftCase, Message, SessionEntry, Summary
from ..services.promotion import finding_key
from ..services.runs import config_snapshot
from ..services.validation import session_config
from . import labels, load_messages


def source_link(archive: Archive, index: Any) -> str | None:
    """Where message ``index`` of the run's input is shown: the archive page inside the archive, else the run diff."""
    if not isinstance(index, int):
        return None
    if archive.start <= index < archive.end:
        return f"{reverse('archive', args=[archive.pk])}?at={index}#a-{index}"
    if archive.run_id is not None:
        return f"{reverse('run', args=[archive.run_id])}?at=in-{index}#in-{index}"
    return None


@dataclass
class Provenance:
    """Everything the provenance label shows; ``None`` is printed as "—" or "unknown", never left out."""

    generator: str | None
    model: str | None
    endpoint: str | None
    prompt_version: str | None
    prompt_hash: str | None
    focus_topic: str | None
    input_tokens: int | None
    output_tokens: int | None
    budget_tokens: int | None
    latency_ms: float | None
    trigger: str | None
    created_by: str | None
    #: what stands in the prompt hash's place when there is none ("no prompt: extractive")
    prompt_hash_note: str = ""
    #: the archive's content hash (sha256 of its originals, checked whenever they are read)
    archive_sha256: str = ""
    #: the budgets the run compressed with (``services.runs.config_snapshot``); ``config_note`` says
    #: whether they were recorded with the summary or worked out from the run's overrides now
    config: dict[str, Any] | None = None
    config_overrides: list[str] | None = None
    config_note: str = ""
    #: how this version got into the live session: promoted (by whom, when) or with its run (which, when)
    promoted_by: str | None = None
    promoted_at: Any = None
    live_run: int | None = None
    live_at: Any = None
    drift_checked_at: Any = None


def provenance(summary: Summary) -> Provenance:
    label = _basic_provenance(summary)
    data = summary.provenance or {}
    if not label.prompt_hash:
        generator = label.generator or _("unknown summarizer")
        label.prompt_hash_note = _("no prompt: %(generator)s") % {"generator": generator}
    archive = summary.archive
    label.archive_sha256 = archive.sha256 or ""
    config = data.get("config")
    if isinstance(config, dict):
        label.config = config
    elif archive.run_id is not None and archive.run is not None:
        label.config, label.config_note = _config_of(archive), _("worked out from the run's settings")
    if label.config is not None:
        overrides = label.config.get("overrides")
        label.config_overrides = sorted(overrides) if isinstance(overrides, dict) else []
    if summary.promoted_at is not None:
        label.promoted_at = summary.promoted_at
        label.promoted_by = (
            summary.promoted_by.get_username() if summary.promoted_by_id and summary.promoted_by else None
        )
    elif summary.run_id is not None and summary.run_id == archive.run_id and archive.run is not None:
        run = archive.run
        if run.applied:
            label.live_run, label.live_at = run.pk, run.finished_at
    label.drift_checked_at = summary.drift_checked_at
    return label


def _config_of(archive: Archive) -> dict[str, Any] | None:
    """The budgets of a run whose summary did not record them: its session's window with its overrides, now."""
    run = archive.run
    try:
        return config_snapshot(session_config(archive.session, run.config), run.config)
    except InvalidInput:  # an override the library no longer takes: say nothing rather than guess
        return None


def _basic_provenance(summary: Summary) -> Provenance:
    data = summary.provenance or {}
    endpoint = data.get("endpoint_host")
    if not endpoint and data.get("base_url"):
        endpoint = urlsplit(str(data["base_url"])).hostname
    if not endpoint and data.get("generator") == "extractive":
        endpoint = _("offline (no endpoint)")
    trigger = data.get("trigger")
    created_by = summary.created_by.get_username() if summary.created_by_id and summary.created_by else None
    return Provenance(
        generator=data.get("generator") or None,
        model=data.get("model") or None,
        endpoint=endpoint or None,
        prompt_version=data.get("prompt_version") or None,
        prompt_hash=data.get("prompt_hash") or None,
        focus_topic=mask_unless_revealed(str(data["focus_topic"])) if data.get("focus_topic") else None,
        input_tokens=data.get("input_tokens"),
        output_tokens=data.get("output_tokens"),
        budget_tokens=data.get("budget_tokens"),
        latency_ms=data.get("latency_ms"),
        trigger=str(labels.label(labels.TRIGGERS, trigger)) if trigger else None,
        created_by=created_by or data.get("created_by") or None,
    )


def versions_of(archive: Archive) -> list[Summary]:
    """The archive's summaries oldest first, numbered v1, v2, ... and with their provenance labels and states."""
    rows = list(archive.summaries.select_related("created_by", "parent", "promoted_by").order_by("created_at", "id"))
    numbers = {s.pk: n for n, s in enumerate(rows, 1)}
    live = live_summary_ids(archive.session_id)
    for summary in rows:
        summary.number = numbers[summary.pk]  # type: ignore[attr-defined]
        summary.parent_number = numbers.get(summary.parent_id or 0)  # type: ignore[attr-defined]
        summary.label = provenance(summary)  # type: ignore[attr-defined]
        with_state(summary, live)
    return rows


def live_summary_ids(session_id: int) -> set[str]:
    """The ids of the summaries the session's live history carries (one query)."""
    entries = SessionEntry.objects.filter(
        session_id=session_id, message__role="user", message__text__startswith=SUMMARY_MARKER
    )
    found = set()
    for data in entries.values_list("message__data", flat=True):
        parsed = parse_summary_message(data)
        if parsed and parsed[0].get("id"):
            found.add(str(parsed[0]["id"]))
    return found


def with_state(summary: Summary, live: set[str]) -> Summary:
    """``state`` and ``state_label``: an active summary is *live* when the history carries it, else it was *merged*
    into a later one (its session was compressed again over it); others by their status. One live per session."""
    if summary.status == Summary.Status.ACTIVE:
        state = "live" if summary.summary_id in live else "merged"
        label = _("live") if state == "live" else _("merged into a later summary")
    else:
        state, label = summary.status, summary.get_status_display()
    summary.state, summary.state_label = state, label  # type: ignore[attr-defined]
    return summary


def active_of(versions: list[Summary]) -> Summary | None:
    return next((s for s in versions if s.status == Summary.Status.ACTIVE), None)


def compare_pair(versions: list[Summary], a: Summary | None = None) -> tuple[Summary | None, Summary | None]:
    """The default comparison: the active version (or the oldest) against the newest other one (with text)."""
    if a is None:
        a = active_of(versions) or (versions[0] if versions else None)
    others = [s for s in versions if a is None or s.pk != a.pk]
    # the newest version with text; a pending or failed one has nothing to compare yet
    written = [s for s in others if s.text]
    newest = (written or others)[-1] if others else None
    return a, newest


def compare_with(versions: list[Summary], summary: Summary) -> Summary | None:
    """The version to compare ``summary`` with: the active one, or when that is ``summary``, the newest other."""
    active = active_of(versions)
    return active if active and active.pk != summary.pk else compare_pair(versions, summary)[1]


def fact_rows(summary: Summary, references: References | None = None) -> list[dict[str, Any]]:
    """The summary's pinned facts, each linked to its source (``references``: share one to load the archives once)."""
    references = references or References(summary.archive)
    return [
        {
            "kind": fact.get("kind") or "",
            "kind_label": labels.label(labels.FACT_KINDS, fact.get("kind") or ""),
            "text": mask_unless_revealed(str(fact.get("text") or "")),
            "role": fact.get("role") or "",
            "index": fact.get("source_index"),
            "link": references.fact_href(fact.get("source_index")),
        }
        for fact in summary.facts or []
    ]


def finding_row(finding: dict[str, Any], archive: Archive) -> dict[str, Any]:
    """A stored drift finding as the summary, compare and case pages list it: labels translated, quotes masked."""
    evidence = finding.get("evidence") or {}
    kind, severity = finding.get("kind") or "", finding.get("severity") or ""
    index = finding.get("message_index")
    return {
        "kind": kind,
        "kind_label": labels.label(labels.FINDING_KINDS, kind),
        "severity": severity,
        "severity_label": labels.label(labels.SEVERITIES, severity),
        "detail": labels.detail_label(finding),
        "manual": bool(finding.get("manual")),
        "original": mask_unless_revealed(str(evidence.get("original") or "")),
        "summary": mask_unless_revealed(str(evidence.get("summary") or "")),
        "index": index,
        "link": source_link(archive, index),
        "key": finding_key(finding),
    }


def finding_rows(summary: Summary) -> list[dict[str, Any]]:
    return [finding_row(finding, summary.archive) for finding in summary.drift_findings or []]


def split_by_key(a: list[dict[str, Any]], b: list[dict[str, Any]], key: Any) -> dict[str, list[dict[str, Any]]]:
    """Items only in ``a``, only in ``b`` and in both (by ``key``), each list in its own order."""
    keys_a, keys_b = {key(x) for x in a}, {key(x) for x in b}
    return {
        "only_a": [x for x in a if key(x) not in keys_b],
        "only_b": [x for x in b if key(x) not in keys_a],
        "both": [x for x in a if key(x) in keys_b],
    }


def compare_groups(split: dict[str, list[dict[str, Any]]]) -> list[tuple[str, list[dict[str, Any]], str]]:
    return [
        (_("Only in A"), split["only_a"], "only-a"),
        (_("Only in B"), split["only_b"], "only-b"),
        (_("In both"), split["both"], "both"),
    ]


def label_case(case: DriftCase) -> DriftCase:
    """Attach the translated labels the templates show."""
    case.severity_label = labels.label(labels.SEVERITIES, case.severity)  # type: ignore[attr-defined]
    case.kind_labels = [labels.label(labels.FINDING_KINDS, k) for k in case.kind_list]  # type: ignore[attr-defined]
    return case


def cases_of(summary: Summary) -> list[Any]:
    return [label_case(c) for c in summary.drift_cases.select_related("assignee").order_by("created_at", "id")]


def summary_progress_context(summary: Summary) -> dict[str, Any]:
    versions = list(summary.archive.summaries.order_by("created_at", "id"))
    return {"summary": summary, "archive": summary.archive, "compare_a": compare_with(versions, summary)}


# --------------------------------------------------------------------------- #N references


class References:
    """Where each ``#N`` of a summary of ``archive`` is shown: the archived original it names.

    ``#N`` is a history index (``agent_compression.summary_message``): ``history_position`` places it in this
    archive; one that an earlier summary inside the archive stands for (a line carried from an earlier
    compression) is looked up in the session's earlier archives, newest first, so it lands on the
    original itself, never on a wrong message. Messages are loaded once, on the first lookup.
    """

    def __init__(self, archive: Archive) -> None:
        self.archive = archive
        self._messages: dict[int, list[dict[str, Any]]] = {}
        self._numbers: dict[int, tuple[dict[int, int], list[tuple[int, int, int]]]] = {}
        self._earlier: list[Archive] | None = None
        self._found: dict[int, tuple[Archive, int] | None] = {}
        self._input: list[dict[str, Any]] | None = None

    def _load(self, archive: Archive) -> list[dict[str, Any]]:
        if archive.pk not in self._messages:
            rows = load_messages(archive.message_keys)
            # a message missing from storage still takes its place in the numbering
            self._messages[archive.pk] = [rows[k][0] if k in rows else {} for k in archive.message_keys]
        return self._messages[archive.pk]

    def _numbering(self, archive: Archive) -> tuple[dict[int, int], list[tuple[int, int, int]]]:
        """``archive``'s history numbering, computed once: the position of each history index, and the
        ``(first, last, position)`` of each earlier summary message (what ``history_position`` searches)."""
        if archive.pk not in self._numbers:
            messages = self._load(archive)
            exact: dict[int, int] = {}
            spans: list[tuple[int, int, int]] = []
            numbering = zip(history_indexes(messages, archive.start), messages, strict=True)
            for position, (index, message) in enumerate(numbering):
                if index is not None:
                    exact.setdefault(index, position)
                elif isinstance(message, dict) and (span := summary_history_range(message)) is not None:
                    spans.append((span[0], span[1], position))
            self._numbers[archive.pk] = (exact, spans)
        return self._numbers[archive.pk]

    def _place(self, archive: Archive, n: int) -> tuple[int | None, bool]:
        """``(index in the run input, whether it is an original)`` of ``#n`` in ``archive``: the first position
        that is ``#n`` or a summary standing for it (as ``history_position`` answers, without a scan per ``#n``)."""
        exact, spans = self._numbering(archive)
        found = [p for p in (exact.get(n), *(p for a, b, p in spans if a <= n <= b)) if p is not None]
        if not found:
            return None, False
        position = min(found)
        return archive.start + position, not is_summary_message(self._load(archive)[position])

    def locate(self, n: int) -> tuple[Archive, int] | None:
        """The archive holding the original ``#n`` and its index in that archive's run input, else ``None``."""
        if n in self._found:
            return self._found[n]
        found: tuple[Archive, int] | None = None
        index, original = self._place(self.archive, n)
        if index is not None and original:
            found = (self.archive, index)
        else:
            if self._earlier is None:
                self._earlier = list(
                    Archive.objects.filter(session_id=self.archive.session_id, created_at__lte=self.archive.created_at)
                    .exclude(pk=self.archive.pk)
                    .order_by("-created_at", "-id")
                )
            for other in self._earlier:
                index, original = self._place(other, n)
                if index is not None and original:
                    found = (other, index)
                    break
        self._found[n] = found
        return found

    def href(self, n: int) -> str | None:
        """The archive page, scrolled to and highlighting ``#n``'s original."""
        found = self.locate(n)
        if found is None:
            return None
        archive, index = found
        return f"{reverse('archive', args=[archive.pk])}?at={index}#a-{index}"

    def input_href(self, n: int) -> str | None:
        """Where ``#n`` is shown when no archive holds it (the run's head or tail): the run diff's input side."""
        if self.archive.run_id is None:
            return None
        if self._input is None:
            keys = CompressionRun.objects.values_list("input_keys", flat=True).get(pk=self.archive.run_id) or []
            rows = load_messages(keys)
            self._input = [rows[k][0] if k in rows else {} for k in keys]
        position = history_position(self._input, n, 0)
        if position is None or is_summary_message(self._input[position]):
            return None
        return f"{reverse('run', args=[self.archive.run_id])}?at=in-{position}#in-{position}"

    def fact_href(self, n: Any) -> str | None:
        """A pinned fact's ``source_index`` (a history index, like ``#N``): its original, wherever it is."""
        if not isinstance(n, int):
            return None
        return self.href(n) or self.input_href(n)

    def in_page(self, anchor: Callable[[int], str | None]) -> Callable[[int], str | None]:
        """A link maker for a page that shows this archive's originals itself (``anchor(index)`` their ids)."""

        def href(n: int) -> str | None:
            found = self.locate(n)
            if found is not None and found[0].pk == self.archive.pk:
                target = anchor(found[1])
                if target:
                    return f"#{target}"
            return self.href(n)

        return href


def history_numbers(archive: Archive) -> list[int | None]:
    """The ``#N`` of each of ``archive``'s originals (``None`` for an earlier summary and the compressor's texts).

    Only the messages that change the numbering are loaded (summaries and the compressor's texts, found
    by their searchable text); the others count as one each.
    """
    special = dict(
        Message.objects.filter(sha256__in=set(archive.message_keys))
        .filter(Q(text__startswith=SUMMARY_MARKER) | Q(text__in=COMPRESSOR_TEXTS))
        .values_list("sha256", "data")
    )
    return history_indexes([special.get(k, {}) for k in archive.message_keys], archive.start)


#: the pinned facts' name in a Chinese summary, as the pages show it (the stored heading stays English: the library
#: parses it back, ``agent_compression.facts.pinned_facts_of``)
PINNED_TITLE_ZH = "固定事实"


def in_session_language(text: str) -> str:
    """A summary's text with its headings in the language it is written in: a Chinese summary's sections already
    are (``HEADINGS_ZH``), and its pinned facts are named in Chinese too, heading and mentions."""
    zh_headings = {h for h in HEADINGS_ZH.values()}
    chinese = any(line.strip() in zh_headings for line in text.splitlines()) or detect_language(text) == "zh"
    if not chinese:
        return text
    return text.replace(PINNED_HEADING, f"## {PINNED_TITLE_ZH}").replace(PINNED_HEADING[3:], PINNED_TITLE_ZH)


def summary_html(summary: Summary, href_for: Callable[[int], str | None] | None = None) -> SafeString:
    """A summary's text as the summary, run and drift case pages show it: Markdown, sanitized, ``#N`` linked,
    headings in the summary's own language."""
    if not summary.text:
        return SafeString("")
    text = in_session_language(summary.text)
    return link_references(render_markdown(text), href_for or References(summary.archive).href)
