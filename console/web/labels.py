"""The console's whole translated vocabulary, in one place, keyed by the codes the library and the models write.

Pages never show a code where a word exists: a stage, a stage's count, a warning, a drift finding's
kind and detail, a fact's kind, a severity, a status. Keys come from the library's own constants
(``agent_compression.pipeline.STAGES`` and ``WARNING_CODES``, ``agent_compression.drift.DRIFT_KINDS`` and
``DETAILS``, ``agent_compression.facts.FACT_KINDS``), so ``tests/console/test_labels.py`` fails when the
library gains a code this module does not name. An unknown code is shown as it is, never dropped.

Rows stored before the library carried codes are still read: a warning without ``params`` falls back
to its English ``message``, a finding without ``code`` is mapped back from its English ``detail``.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from django.utils.functional import Promise
from django.utils.translation import gettext_lazy, ngettext_lazy, pgettext_lazy

from agent_compression import drift as drift_checks
from agent_compression.pipeline import STAGES as PIPELINE_STAGES

from ..diff import history
from ..models import CompressionRun, DriftCase, Summary

Label = str | Promise


_CODE = object()


def label(labels: Mapping[str, Label], code: Any, default: Any = _CODE) -> Any:
    """``labels[code]``, else ``default``, else the code itself (an unknown code is shown, not dropped)."""
    if code in labels:
        return labels[code]
    return code if default is _CODE else default


# --------------------------------------------------------------------------- runs: stages and their counts

#: the stage the console adds after the pipeline's: storing the output and applying it to the session
WRITE_BACK = "write_back"
#: a run's stages in the order a worker reports them in ``run.stage``
RUN_STAGES: tuple[str, ...] = (*PIPELINE_STAGES, WRITE_BACK)

STAGES: dict[str, Label] = {
    "prune": gettext_lazy("prune tool output"),
    "boundaries": gettext_lazy("find boundaries"),
    "archive": gettext_lazy("archive originals"),
    "summarize": gettext_lazy("summarize"),
    "assemble": gettext_lazy("reassemble"),
    "validate": gettext_lazy("validate"),
    WRITE_BACK: gettext_lazy("write back"),
}
#: what a queued run may show in ``run.stage`` while it waits (the runs service's ``COOLDOWN_STAGE``)
WAITING_STAGES: dict[str, Label] = {"cooldown": gettext_lazy("waiting for the summarizer's cooldown")}

#: the counts each stage records (``StageStats.counts``), by key
STAGE_COUNTS: dict[str, Label] = {
    "messages": pgettext_lazy("stage count", "messages"),
    "tokens": pgettext_lazy("stage count", "tokens"),
    "pruned": pgettext_lazy("stage count", "pruned"),
    "deduplicated": pgettext_lazy("stage count", "deduplicated"),
    "args_truncated": pgettext_lazy("stage count", "arguments shortened"),
    "tokens_saved": pgettext_lazy("stage count", "tokens saved"),
    "head": pgettext_lazy("stage count", "head"),
    "middle": pgettext_lazy("stage count", "middle"),
    "tail": pgettext_lazy("stage count", "tail"),
    "sha256": pgettext_lazy("stage count", "checksum"),
    "facts": pgettext_lazy("stage count", "pinned facts"),
    "previous_summary": pgettext_lazy("stage count", "earlier summary"),
    "budget_tokens": pgettext_lazy("stage count", "budget (tokens)"),
    "ok": pgettext_lazy("stage count", "summary written"),
    "generator": pgettext_lazy("stage count", "summarizer"),
    "violations": pgettext_lazy("stage count", "violations"),
    "repaired": pgettext_lazy("stage count", "repaired"),
}

#: the stage counts that claim a change, for a run whose result the session did not get (not applied)
STAGE_COUNTS_NOT_APPLIED: dict[str, Label] = {
    "pruned": pgettext_lazy("stage count, result not applied", "would have pruned"),
    "deduplicated": pgettext_lazy("stage count, result not applied", "would have deduplicated"),
    "args_truncated": pgettext_lazy("stage count, result not applied", "arguments it would have shortened"),
    "tokens_saved": pgettext_lazy("stage count, result not applied", "tokens it would have saved"),
}

#: a pruned item's ``kind`` (``agent_compression.prune.PrunedItem``)
PRUNED_KINDS: dict[str, Label] = {
    "pruned": gettext_lazy("pruned"),
    "deduplicated": gettext_lazy("deduplicated"),
    "args_truncated": gettext_lazy("arguments shortened"),
}

#: what a pruned item's diff row says happened to it
PRUNED_NOTES: dict[str, Label] = {
    "pruned": gettext_lazy("replaced by a description"),
    "deduplicated": gettext_lazy("duplicate of a later result"),
    "args_truncated": gettext_lazy("long arguments shortened"),
}

#: the validator's report (``RepairReport``), by section
REPAIRS: dict[str, Label] = {
    "dropped": gettext_lazy("dropped"),
    "fixed": gettext_lazy("fixed"),
    "moved": gettext_lazy("moved"),
    "patched": gettext_lazy("patched (result lost)"),
    "merged": gettext_lazy("merged"),
    "inserted": gettext_lazy("inserted"),
}

#: a row of the run diff (``console.diff.history``), by kind, and what each kind means
ROW_KINDS: dict[str, Label] = {
    history.KEPT: gettext_lazy("unchanged"),
    history.PRUNED: gettext_lazy("pruned"),
    history.TRUNCATED: gettext_lazy("arguments shortened"),
    history.ARCHIVED: gettext_lazy("archived"),
    history.INSERTED: gettext_lazy("inserted"),
    history.PATCHED: gettext_lazy("patched"),
    history.REMOVED: gettext_lazy("removed"),
    history.MOVED: gettext_lazy("moved"),
    history.CHANGED: gettext_lazy("changed"),
}
ROW_KIND_HELP: dict[str, Label] = {
    history.PRUNED: gettext_lazy("tool results replaced by a one-line description or a pointer to a later copy"),
    history.TRUNCATED: gettext_lazy("tool calls whose long arguments were shortened"),
    history.ARCHIVED: gettext_lazy("messages moved to the archive and summarized"),
    history.INSERTED: gettext_lazy("messages the compressor added: summary, acknowledgement, bridge"),
    history.PATCHED: gettext_lazy("messages the validator added or changed (lost tool results, malformed fields)"),
    history.REMOVED: gettext_lazy("messages the validator dropped (orphan or duplicate tool results)"),
    history.MOVED: gettext_lazy("tool results the validator moved next to their call"),
    history.CHANGED: gettext_lazy("messages that differ for no recorded reason"),
}
#: which message the compressor inserted (a diff row's ``note["inserted"]``)
INSERTED: dict[str, Label] = {
    "summary": gettext_lazy("summary"),
    "bridge": gettext_lazy("bridge"),
    "acknowledgement": gettext_lazy("acknowledgement"),
}

#: what started a run, or a summary version (a re-summarize has no run)
TRIGGERS: dict[str, Label] = {
    **dict(CompressionRun.Trigger.choices),
    "resummarize": gettext_lazy("re-summarize"),
}

# --------------------------------------------------------------------------- warnings

#: each warning code's sentence, from its ``params`` (``agent_compression.pipeline.CompressionWarning``)
WARNINGS: dict[str, Label] = {
    "summary_failed": ngettext_lazy(
        "summarizer %(generator)s failed (%(error)s); %(archived)s message archived without a summary",
        "summarizer %(generator)s failed (%(error)s); %(archived)s messages archived without a summary",
        "archived",
    ),
    "still_over_threshold": gettext_lazy("%(tokens)s tokens left, trigger is %(trigger)s"),
    "fixed_part_over_trigger": gettext_lazy(
        "the system prompt, the first and the latest user messages (and the kept prefix) take %(fixed)s tokens: "
        "with the smallest summary they leave no room under the trigger (%(trigger)s)"
    ),
    "repeated_compression": ngettext_lazy(
        "compressed again and still over the trigger (%(times)s time in a row)",
        "compressed again and still over the trigger (%(times)s times in a row)",
        "times",
    ),
    "auto_compression_stopped": gettext_lazy(
        "automatic compression is off for this history: compressing does not get it under the trigger"
    ),
    "nothing_to_compress": gettext_lazy("nothing to compress: %(reason)s"),
    "no_token_savings": gettext_lazy(
        "the compressed history (%(tokens_after)s tokens) is not smaller than the input (%(tokens_before)s)"
    ),
    "facts_failed": gettext_lazy("fact extraction failed: %(error)s"),
    "summary_over_budget": gettext_lazy("summary has %(tokens)s tokens, budget %(budget)s"),
    "input_repaired": gettext_lazy("the input's tool-call structure was repaired"),
    "pruned_only": ngettext_lazy(
        "pruned %(pruned)s old tool result; the rest fits the tail, so nothing was summarized",
        "pruned %(pruned)s old tool results; the rest fits the tail, so nothing was summarized",
        "pruned",
    ),
}
#: parameters that are codes themselves, by warning code and parameter name
WARNING_PARAMS: dict[str, dict[str, dict[str, Label]]] = {
    "nothing_to_compress": {
        "reason": {
            "no_middle": gettext_lazy("no middle segment"),
            "only_summary": gettext_lazy("the middle holds only an earlier summary"),
        }
    },
}
#: the sentences that need no parameters: shown translated even for runs stored before warnings had them
_WITHOUT_PARAMS = frozenset({"auto_compression_stopped", "input_repaired"})
#: the dashboard's headings for the anti-thrash warnings it counts
WARNING_TITLES: dict[str, Label] = {
    "repeated_compression": gettext_lazy("Compressed again, still over the trigger"),
    "auto_compression_stopped": gettext_lazy("Automatic compression turned off"),
}


def warning_text(warning: Mapping[str, Any]) -> str:
    """A stored warning (``{"code", "message", "params"}``) as a sentence in the current language.

    Falls back to the stored English ``message`` for a code without a sentence (the console's own
    warnings) and for a warning stored without the parameters its sentence needs.
    """
    code, message = warning.get("code"), str(warning.get("message") or "")
    sentence = WARNINGS.get(str(code))
    params = warning.get("params")
    if sentence is None:
        return message
    if code in _WITHOUT_PARAMS:
        return str(sentence)
    if not isinstance(params, Mapping) or not params:
        return message
    values = dict(params)
    for name, labels in WARNING_PARAMS.get(str(code), {}).items():
        if name in values:
            values[name] = label(labels, values[name])
    try:
        return str(sentence % values)
    except (KeyError, TypeError, ValueError):
        return message


# --------------------------------------------------------------------------- drift findings and facts

#: a finding's kind (``agent_compression.drift.DRIFT_KINDS``), and "other" for a case opened by hand
FINDING_KINDS: dict[str, Label] = {
    "constraint_dropped": gettext_lazy("constraint dropped"),
    "constraint_inverted": gettext_lazy("constraint inverted"),
    "constraint_fabricated": gettext_lazy("constraint fabricated"),
    "identifier_missing": gettext_lazy("identifier missing"),
    "identifier_fabricated": gettext_lazy("identifier fabricated"),
    "hedge_lost": gettext_lazy("uncertainty lost"),
    "progress_fabricated": gettext_lazy("progress fabricated"),
    "wrong_attribution": gettext_lazy("wrong attribution"),
    "other": gettext_lazy("other"),  # a case opened by hand about something else
}
#: the dashboard's row for cases without a kind
NO_KIND = gettext_lazy("no kind")
SEVERITIES: dict[str, Label] = {
    "high": gettext_lazy("high"),
    "medium": gettext_lazy("medium"),
    "low": gettext_lazy("low"),
}

#: what a finding means, by ``DriftFinding.code`` (``agent_compression.drift.REASONS``)
DETAILS: dict[str, Label] = {
    "negation_missing": gettext_lazy("the summary states the constrained action without its negation"),
    "requirement_negated": gettext_lazy("the summary negates a requirement"),
    "approval_refused": gettext_lazy("an approval became a refusal"),
    "not_restated": gettext_lazy("no restatement found"),
    "restriction_dropped": gettext_lazy("the summary names the scope but drops the restriction to it (only, 只)"),
    "approval_lost": gettext_lazy("approval lost"),
    "constraint_unsourced": gettext_lazy("a prohibition or approval no user gave"),
    "pinned_unsourced": gettext_lazy("a pinned constraint or approval that is not in the originals"),
    "user_identifier_missing": gettext_lazy("an identifier the user gave is not in the summary"),
    "assistant_identifier_missing": gettext_lazy("an identifier the assistant reported is not in the summary"),
    "tool_identifier_missing": gettext_lazy("a digest or commit a short tool result returned is not in the summary"),
    "identifier_unsourced": gettext_lazy("an identifier that appears nowhere in the originals"),
    "number_unsourced": gettext_lazy("a number that appears nowhere in the originals"),
    "limit_number_unsourced": gettext_lazy("a number in a limit that appears nowhere in the originals"),
    "hedge_dropped": gettext_lazy("an uncertain statement became a certain one"),
    "limit_exceeded": gettext_lazy("the summary reports a number past the limit"),
    "window_violated": gettext_lazy("the summary reports the action in the window"),
    "soft_inversion": gettext_lazy("a prohibition became a plan for later (when ready, later, if needed)"),
    "command_dropped": gettext_lazy("a command the user asked to run is not in the summary"),
    "request_dropped": gettext_lazy("a request the user made is not in the summary"),
    "limit_breach_missing": gettext_lazy("what a tool showed over the user's limit is not in the summary"),
    "tool_error_missing": gettext_lazy("an error that appears only in tool output is not in the summary"),
    "wrong_speaker": gettext_lazy("the summary puts a statement in the wrong mouth (user / assistant)"),
    "error_misplaced": gettext_lazy("the summary places an error where it did not happen"),
    "user_did_not": gettext_lazy("the summary says the user did what the agent did"),
    "log_line_spliced": gettext_lazy("a log line quoted in the summary that no log holds (parts of two lines)"),
    "instruction_copied": gettext_lazy("the summary copies the summarizer's own rules as if they were the session's"),
    "identifier_mistyped": gettext_lazy("the summary calls an identifier something it is not (an order for a user id)"),
    "value_misplaced": gettext_lazy("the summary gives a name the number a tool's table shows for another name"),
    "protected_changed": gettext_lazy("the summary tells to change what the user said not to touch"),
    "change_misplaced": gettext_lazy(
        "the summary puts a change made in another file on what the user said not to touch"
    ),
    "cause_unsupported": gettext_lazy("the summary gives a cause that no message gives for it"),
    "wish_unsourced": gettext_lazy("the summary gives the user a wish or belief no user voiced"),
    "ids_mismatched": gettext_lazy("the summary pairs two things the originals never pair (an item on another order)"),
    "limit_dropped": gettext_lazy("a limit the user set is not in the summary with its number"),
    "tests_not_passed": gettext_lazy("the summary says the tests passed; the last test run failed"),
    "tests_never_run": gettext_lazy("the summary says the tests passed; no test run is in the originals"),
    "errors_denied": gettext_lazy("the summary says nothing failed, but a tool reported an error"),
    "progress_contradicted": gettext_lazy("the summary claims as done what the originals say was not done"),
    "progress_unsupported": gettext_lazy("the summary claims as done what no tool result or message shows"),
}
#: findings stored before they carried a code: their English detail, back to the code
_CODE_OF_DETAIL = {english: code for code, english in drift_checks.REASONS.items()}


def detail_label(finding: Mapping[str, Any]) -> Any:
    """A stored finding's detail in the current language: by its ``code``, else by its English ``detail``.

    A detail that is neither (the note of a case opened by hand) is shown as written.
    """
    code = finding.get("code") or _CODE_OF_DETAIL.get(str(finding.get("detail") or ""))
    if code in DETAILS:
        return DETAILS[str(code)]
    return finding.get("detail") or ""


# --------------------------------------------------------------------------- claims: the check's line-by-line reading

#: what the check concluded about one claim (``agent_compression.drift.Verdict``)
VERDICTS: dict[str, Label] = {
    "supported": gettext_lazy("supported"),
    "contradicted": gettext_lazy("contradicted"),
    "unsupported": gettext_lazy("no support found"),
    "cannot_tell": gettext_lazy("cannot tell"),
}
#: what a claim is about (``agent_compression.drift.ClaimType``)
CLAIM_TYPES: dict[str, Label] = {
    "requirement": gettext_lazy("requirement"),
    "state": gettext_lazy("state of the work"),
    "cause": gettext_lazy("cause"),
    "identifier": gettext_lazy("identifier"),
    "other": gettext_lazy("other"),
}
CERTAINTIES: dict[str, Label] = {
    "certain": gettext_lazy("stated as certain"),
    "hedged": gettext_lazy("stated as uncertain"),
}


#: a pinned fact's kind (``agent_compression.facts.FACT_KINDS``)
FACT_KINDS: dict[str, Label] = {
    "constraint": gettext_lazy("constraint"),
    "approval": gettext_lazy("approval"),
    "error": gettext_lazy("error"),
    "path": gettext_lazy("path"),
    "decision": gettext_lazy("decision"),
    "command": gettext_lazy("command"),
    "identifier": gettext_lazy("identifier"),
}

# --------------------------------------------------------------------------- statuses, review history, audit

#: ``session.status`` is free text from the runtime; these are the values we know how to name
SESSION_STATUSES: dict[str, Label] = {
    "active": pgettext_lazy("session status", "active"),
    "idle": pgettext_lazy("session status", "idle"),
    "paused": pgettext_lazy("session status", "paused"),
    "closed": pgettext_lazy("session status", "closed"),
    "ended": pgettext_lazy("session status", "ended"),
    "archived": pgettext_lazy("session status", "archived"),
    "expired": pgettext_lazy("session status", "expired"),
}
RUN_STATUSES: dict[str, Label] = dict(CompressionRun.Status.choices)
CASE_STATUSES: dict[str, Label] = dict(DriftCase.Status.choices)
SUMMARY_STATUSES: dict[str, Label] = dict(Summary.Status.choices)
#: a ``status`` in an audit event, whatever the object (the words agree where the codes do)
ALL_STATUSES: dict[str, Label] = {**SUMMARY_STATUSES, **RUN_STATUSES, **CASE_STATUSES}

#: a drift case's history, by audit action, and the fields a change shows
CASE_ACTIONS: dict[str, Label] = {
    "drift_case.open": gettext_lazy("opened the case"),
    "drift_case.update": gettext_lazy("changed the review"),
    "drift_case.comment": gettext_lazy("commented"),
    "drift_case.resolve": gettext_lazy("resolved it by promoting a clean version"),
}
CASE_FIELDS: dict[str, Label] = {
    "status": gettext_lazy("status"),
    "assignee": gettext_lazy("assignee"),
    "verdict": gettext_lazy("verdict"),
    "fixed_by": gettext_lazy("fixed by"),
}

#: what an audit event is about, by ``AuditEvent.object_type``
OBJECTS: dict[str, Label] = {
    "session": gettext_lazy("session"),
    "compressionrun": gettext_lazy("run"),
    "archive": gettext_lazy("archive"),
    "summary": gettext_lazy("summary"),
    "driftcase": gettext_lazy("drift case"),
    "message": gettext_lazy("message"),
    "apikey": gettext_lazy("API key"),
}

#: every audit action the console writes (``console.audit.audit``), in words; an unknown one is shown as its code
AUDIT_ACTIONS: dict[str, Label] = {
    "api_key.create": gettext_lazy("created an API key"),
    "api_key.revoke": gettext_lazy("revoked an API key"),
    "drift_case.open": gettext_lazy("opened a drift case"),
    "drift_case.update": gettext_lazy("changed a drift case's review"),
    "drift_case.comment": gettext_lazy("commented on a drift case"),
    "drift_case.resolve": gettext_lazy("resolved a drift case by promoting a clean version"),
    "run.queue": gettext_lazy("queued a compression"),
    "run.report": gettext_lazy("reported an in-process compression"),
    "secrets.reveal": gettext_lazy("revealed masked secrets"),
    "session.create": gettext_lazy("created a session"),
    "session.compress": gettext_lazy("compressed a session"),
    "summary.resummarize": gettext_lazy("re-summarized an archive"),
    "summary.promote": gettext_lazy("promoted a summary"),
    "summary.acknowledge_drift": gettext_lazy("acknowledged open high-severity drift before promoting"),
    "summary.pairwise_review": gettext_lazy("compared two summary versions"),
    "webhook.create": gettext_lazy("created a webhook"),
    "webhook.update": gettext_lazy("changed a webhook"),
    "webhook.delete": gettext_lazy("deleted a webhook"),
}
#: the keys of audit events' before/after states, in words (an unknown key is shown as it is)
AUDIT_FIELDS: dict[str, Label] = {
    **CASE_FIELDS,
    "active": gettext_lazy("active"),
    "applied": gettext_lazy("applied"),
    "archive": gettext_lazy("archive"),
    "budget_tokens": gettext_lazy("budget (tokens)"),
    "command": gettext_lazy("command"),
    "comment": gettext_lazy("comment"),
    "config": gettext_lazy("configuration"),
    "created_by": gettext_lazy("created by"),
    "events": gettext_lazy("events"),
    "findings": gettext_lazy("findings"),
    "focus_topic": gettext_lazy("focus topic"),
    "format": gettext_lazy("format"),
    "generator": gettext_lazy("summarizer"),
    "kind": gettext_lazy("kind"),
    "live_summary": gettext_lazy("live summary"),
    "mentions": gettext_lazy("mentions"),
    "messages": gettext_lazy("messages"),
    "model": gettext_lazy("model"),
    "name": gettext_lazy("name"),
    "path": gettext_lazy("page"),
    "position": gettext_lazy("position"),
    "prompt_version": gettext_lazy("prompt version"),
    "quote": gettext_lazy("quote"),
    "revoked_at": gettext_lazy("revoked at"),
    "role": gettext_lazy("role"),
    "run": gettext_lazy("run"),
    "secret": gettext_lazy("secret"),
    "session": gettext_lazy("session"),
    "summary": gettext_lazy("summary"),
    "summary_version": gettext_lazy("summary version"),
    "trigger": gettext_lazy("trigger"),
    "url": gettext_lazy("URL"),
    "user": gettext_lazy("user"),
    "version": gettext_lazy("version"),
}
#: session metadata keys the console knows (the importers and the echo-agent format write them); others as they are
METADATA_KEYS: dict[str, Label] = {
    "channel": gettext_lazy("channel"),
    "channel_name": gettext_lazy("channel name"),
    "workspace": gettext_lazy("workspace"),
    "guild": gettext_lazy("server"),
    "nickname": gettext_lazy("nickname"),
    "demo": gettext_lazy("demo data"),
    "source_file": gettext_lazy("imported from"),
    "created_at": gettext_lazy("created"),
    "updated_at": gettext_lazy("updated"),
}
#: an empty or missing value, wherever a before/after is shown
EMPTY = "—"
#: between the items of a list in a sentence
LIST_SEPARATOR = pgettext_lazy("list separator", ", ")

#: audit events told as a sentence (the audit log's change column), by action; see ``web.audit_log.sentence``
AUDIT_SENTENCES: dict[str, Label] = {
    "summary.promote": gettext_lazy("promoted %(new)s replacing %(old)s"),
}
#: a summary in an audit sentence: its version number and id, or its id alone (an event stored without numbers)
AUDIT_SUMMARY = gettext_lazy("v%(number)s (%(id)s)")
AUDIT_NO_SUMMARY = gettext_lazy("no summary")
#: a message's role, as the message card and a fact's source name it (an unknown role is shown as it is)
ROLES: dict[str, Label] = {
    "system": pgettext_lazy("message role", "system"),
    "user": pgettext_lazy("message role", "user"),
    "assistant": pgettext_lazy("message role", "assistant"),
    "tool": pgettext_lazy("message role", "tool"),
}
#: who did something when no person did (``console.audit.actor_label``)
SYSTEM_ACTOR = "system"
ACTORS: dict[str, Label] = {SYSTEM_ACTOR: pgettext_lazy("audit actor", "system")}
