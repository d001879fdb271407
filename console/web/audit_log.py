"""The audit log: who changed what, newest first, filtered by actor, action, object and date. Read-only."""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from django.contrib.auth.decorators import permission_required
from django.core.paginator import Paginator
from django.http import HttpRequest, HttpResponse
from django.shortcuts import render
from django.urls import reverse
from django.utils.translation import gettext as _
from django.views.decorators.http import require_GET
from django.views.decorators.vary import vary_on_headers

from ..display import mask_unless_revealed
from ..masking import value_for_reader
from ..models import AuditEvent, Session
from ..queries import AuditQuery
from ..roles import AUDIT
from . import labels
from .htmx import fragment, partial

PAGE_SIZE = 50
#: changed keys named in a row's one-line summary; the rest are in its details
CHANGES_SHOWN = 3
#: characters of one value in the one-line summary
VALUE_CHARS = 60
#: choices offered in the filter form's suggestion lists
SUGGESTIONS = 500

#: object_type as console.audit.audit writes it (the model's lowercased name) -> the URL name of its page
OBJECT_PAGES = {
    "session": "session",
    "compressionrun": "run",
    "archive": "archive",
    "summary": "summary",
    "driftcase": "drift_case",
    "message": "message",
}
# --------------------------------------------------------------------------- rows


def compact(value: Any, key: str = "") -> str:
    """A value on one line, cut to ``VALUE_CHARS``, secrets masked; strings unquoted, empty and null as "—",
    statuses and booleans in words."""
    if value is None or value == "" or value == [] or value == {}:
        return labels.EMPTY
    if isinstance(value, bool):
        return str(_("yes") if value else _("no"))
    if key == "status" and isinstance(value, str):
        return str(labels.label(labels.ALL_STATUSES, value))
    if isinstance(value, list) and all(isinstance(v, str | int) for v in value):
        value = ", ".join(map(str, value))
    text = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False, sort_keys=True)
    text = mask_unless_revealed(" ".join(text.split()))
    return text if len(text) <= VALUE_CHARS else text[: VALUE_CHARS - 1] + "…"


def pretty(value: Any) -> str:
    """A whole before/after value as indented JSON, secrets masked ("" for none)."""
    return (
        "" if value is None else mask_unless_revealed(json.dumps(value, ensure_ascii=False, indent=2, sort_keys=True))
    )


def changes(before: Any, after: Any) -> list[tuple[str, str | None, str]]:
    """``(field, old, new)`` for each top-level key that differs, the field in words (old is None when the key is
    new)."""
    old = before if isinstance(before, dict) else ({} if before is None else {"value": before})
    new = after if isinstance(after, dict) else ({} if after is None else {"value": after})
    found = []
    for key in dict.fromkeys([*old, *new]):
        if key in old and key in new and old[key] == new[key]:
            continue
        field = str(labels.label(labels.AUDIT_FIELDS, str(key)))
        found.append((field, compact(old[key], str(key)) if key in old else None, compact(new.get(key), str(key))))
    return found


def _summary_words(values: Any, fallback: str = "") -> str:
    """A summary named in a sentence: ``v2 (sum_…)``, its id alone when no number was recorded."""
    values = values if isinstance(values, dict) else {}
    summary_id, number = values.get("live_summary") or fallback, values.get("summary_version")
    if not summary_id:
        return str(labels.AUDIT_NO_SUMMARY)
    if isinstance(number, int):
        return str(labels.AUDIT_SUMMARY % {"number": number, "id": compact(summary_id)})
    return compact(summary_id)


def sentence(event: AuditEvent) -> str:
    """What an event did, in words, for the actions that have a sentence (``labels.AUDIT_SENTENCES``); else "".

    A promotion reads "promoted v2 (sum_…) replacing v1 (sum_…)": its before/after diff alone
    (``live_summary: sum_… → null`` in events stored before the new id was recorded) reads as a removal.
    """
    words = labels.AUDIT_SENTENCES.get(event.action)
    if words is None:
        return ""
    if event.action == "summary.promote":
        after = event.after if isinstance(event.after, dict) else {}
        new = _summary_words(after, fallback="") if after.get("live_summary") else ""
        if not new:
            new = str(labels.label(labels.OBJECTS, event.object_type)) + f" {event.object_id}"
        return str(words % {"new": new, "old": _summary_words(event.before)})
    return str(words)


@dataclass
class AuditRow:
    event: AuditEvent
    object_label: str
    link: str
    changes: list[tuple[str, str | None, str]]
    more: int
    before: str
    after: str
    #: the event in words, when its action has a sentence (the changes are then in its details)
    sentence: str = ""
    #: the action in words (its code is kept for the filter)
    action: str = ""


def object_link(event: AuditEvent) -> str:
    name = OBJECT_PAGES.get(event.object_type)
    if name == "message":
        return reverse(name, args=[event.object_id])
    return reverse(name, args=[int(event.object_id)]) if name and event.object_id.isdigit() else ""


def audit_rows(events: list[AuditEvent]) -> list[AuditRow]:
    """The page's events ready to show; sessions are named by key (one query for the page)."""
    session_ids = {int(e.object_id) for e in events if e.object_type == "session" and e.object_id.isdigit()}
    session_keys = dict(Session.objects.filter(pk__in=session_ids).values_list("pk", "key")) if session_ids else {}
    rows = []
    for event in events:
        label = str(labels.label(labels.OBJECTS, event.object_type))
        name = event.object_id[:12] if event.object_type == "message" else event.object_id
        if event.object_type == "session" and event.object_id.isdigit():
            name = session_keys.get(int(event.object_id), name)
        # masked as structures first: a value under a secret-named key is masked by its key, at any depth
        before, after = value_for_reader(event.before), value_for_reader(event.after)
        if event.action == "summary.promote" and isinstance(after, dict) and after.get("live_summary", 0) is None:
            after = {k: v for k, v in after.items() if k != "live_summary"}  # stored without the new id: no removal
        found = changes(before, after)
        rows.append(
            AuditRow(
                event=event,
                object_label=f"{label} {name}",
                link=object_link(event),
                changes=found[:CHANGES_SHOWN],
                more=max(0, len(found) - CHANGES_SHOWN),
                before=pretty(before),
                after=pretty(after),
                sentence=sentence(event),
                action=str(labels.label(labels.AUDIT_ACTIONS, event.action)),
            )
        )
    return rows


def suggestions(column: str) -> list[str]:
    """The distinct values of ``column`` present, for the filter form's suggestion lists."""
    values = AuditEvent.objects.order_by(column).values_list(column, flat=True).distinct()
    return list(values[:SUGGESTIONS])


# --------------------------------------------------------------------------- the page


@require_GET
@permission_required(AUDIT, raise_exception=True)
@vary_on_headers("HX-Request")
def audit_log(request: HttpRequest) -> HttpResponse:
    query = AuditQuery.parse(request.GET)
    page = Paginator(query.apply(AuditEvent.objects.all()), PAGE_SIZE).get_page(request.GET.get("page"))
    ctx: dict[str, Any] = {
        "query": query,
        "page": page,
        "rows": audit_rows(list(page.object_list)),
        "page_params": query.params(),
        "fragment": fragment(request),
    }
    if not ctx["fragment"]:
        # only the full page shows the form
        ctx["actions"] = suggestions("action")
        ctx["actors"] = suggestions("actor_label")
    return render(request, partial(request, "console/audit.html", "results"), ctx)
