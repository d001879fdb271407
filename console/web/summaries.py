"""The summary page: one summary version with its provenance, facts and drift findings; its progress while
it is written; promoting it into the live session."""

from __future__ import annotations

from typing import Any

from django.contrib import messages
from django.contrib.auth.decorators import permission_required
from django.core.exceptions import PermissionDenied
from django.http import HttpResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.urls import reverse
from django.utils.translation import gettext as _
from django.views.decorators.http import require_GET, require_http_methods
from django.views.decorators.vary import vary_on_headers
from django_htmx.http import HttpResponseStopPolling, trigger_client_event

from ..errors import Conflict, InvalidInput
from ..models import Summary
from ..services.drift import drift_check_failed, retry_drift_check
from ..services.promotion import DriftNotAcknowledged, blocking, open_findings
from ..services.summaries import promote_summary, promotion_preview
from . import OPEN_CASE, PROMOTE, RESUMMARIZE, VIEW, reveal_context, see_other
from .claims import claim_lines, verdict_counts
from .forms import OpenCaseForm
from .htmx import SUMMARY_CHANGED, SUMMARY_PROMOTED, HtmxHttpRequest, partial
from .presenters import (
    active_of,
    cases_of,
    compare_with,
    fact_rows,
    finding_row,
    finding_rows,
    summary_html,
    summary_progress_context,
    versions_of,
)


def get_summary(pk: int) -> Summary:
    return get_object_or_404(
        Summary.objects.select_related("archive__session", "archive__run", "parent", "created_by", "promoted_by"),
        pk=pk,
    )


@require_GET
@permission_required(VIEW, raise_exception=True)
@vary_on_headers("HX-Request")
def summary_detail(request: HtmxHttpRequest, pk: int) -> HttpResponse:
    summary = get_summary(pk)
    ctx = reveal_context(request, summary)
    versions = versions_of(summary.archive)
    this = next(s for s in versions if s.pk == summary.pk)
    active = active_of(versions)
    ctx |= {
        "summary": this,
        "archive": summary.archive,
        "session": summary.archive.session,
        "versions": versions,
        "active": active,
        "html": summary_html(summary),
        "facts": fact_rows(summary),
        "findings": finding_rows(summary),
        "cases": cases_of(summary),
        "compare_a": compare_with(versions, this),
        "claim_lines": claim_lines(summary),
        "drift_failed": drift_check_failed(summary),
    }
    ctx["claim_counts"] = verdict_counts(ctx["claim_lines"])
    if request.user.has_perm(OPEN_CASE) and summary.text:
        ctx["open_form"] = OpenCaseForm()
    return render(request, partial(request, "console/summary.html", "summary"), ctx)


@require_GET
@permission_required(VIEW, raise_exception=True)
@vary_on_headers("HX-Request")
def summary_progress(request: HtmxHttpRequest, pk: int) -> HttpResponse:
    summary = get_summary(pk)
    if not request.htmx:
        return redirect("summary", pk=summary.pk)
    response = render(request, "console/_summary_progress.html", summary_progress_context(summary))
    if summary.status == Summary.Status.PENDING:
        return response
    response.status_code = HttpResponseStopPolling.status_code  # done: htmx stops polling
    return trigger_client_event(response, SUMMARY_CHANGED)


# --------------------------------------------------------------------------- promote


@require_http_methods(["GET", "POST"])
@permission_required(VIEW, raise_exception=True)
@vary_on_headers("HX-Request")
def promote(request: HtmxHttpRequest, pk: int) -> HttpResponse:
    summary = get_summary(pk)
    if request.method == "GET":
        return render(request, partial(request, "console/promote.html", "confirm"), confirm_context(summary))
    if not request.user.has_perm(PROMOTE):
        raise PermissionDenied("promoting a summary needs the console.promote_summary permission")
    acknowledged = request.POST.get("acknowledge_drift") == "1"
    try:
        session = promote_summary(summary.pk, user=request.user, acknowledge_drift=acknowledged)
    except DriftNotAcknowledged:
        # the box was not ticked (or a new high finding appeared since the page was shown): ask again
        ctx = confirm_context(get_summary(pk)) | {"needs_acknowledgement": True}
        return render(request, partial(request, "console/promote.html", "confirm"), ctx, status=409)
    except Conflict as exc:
        summary = get_summary(pk)
        ctx = {
            "error": str(exc),
            "preview": promotion_preview(summary),
            "summary": summary,
            "archive": summary.archive,
            "latest_archive": summary.archive.session.archives.order_by("-created_at", "-id").first(),
        }
        return render(request, partial(request, "console/promote.html", "conflict"), ctx, status=409)
    summary.refresh_from_db(fields=["status"])
    if not request.htmx:
        messages.success(
            request,
            _("Promoted: session %(key)s is now at version %(version)s, with this summary in place of the old one.")
            % {"key": session.key, "version": session.version},
        )
        if acknowledged:
            messages.warning(request, _("You acknowledged its open high-severity drift findings; that is audited."))
        return see_other(reverse("summary", args=[summary.pk]))
    ctx = {"session": session, "summary": summary, "archive": summary.archive, "acknowledged": acknowledged}
    response = render(request, "console/promote.html#done", ctx)
    return trigger_client_event(response, SUMMARY_PROMOTED)


def confirm_context(summary: Summary) -> dict[str, Any]:
    """The confirmation: what promoting changes, and the open drift findings it would put live."""
    findings = open_findings(summary)
    return {
        "preview": promotion_preview(summary),
        "summary": summary,
        "archive": summary.archive,
        "drift_findings": [finding_row(f, summary.archive) | {"case": f.get("case")} for f in findings],
        "drift_blocking": bool(blocking(findings)),
        "drift_checked": summary.drift_checked_at is not None,
    }


@require_http_methods(["POST"])
@permission_required(RESUMMARIZE, raise_exception=True)
def drift_check_retry(request: HtmxHttpRequest, pk: int) -> HttpResponse:
    """Send a failed (or still waiting) drift check again, with fresh attempts."""
    summary = get_summary(pk)
    try:
        retry_drift_check(summary.pk, request.user)
    except (Conflict, InvalidInput) as exc:
        messages.error(request, str(exc))
    else:
        messages.success(request, _("The drift check was sent again; this page shows its findings when it is done."))
    return see_other(reverse("summary", args=[summary.pk]))
