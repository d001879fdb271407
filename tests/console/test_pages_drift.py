"""Drift review: the queue, the case page (evidence, review, comments, the fix), opening a case by hand."""

from __future__ import annotations

import json
from typing import Any

import pytest
from django.contrib.auth.models import Group, User
from django.db import connection
from django.test.utils import CaptureQueriesContext

from console.models import Archive, AuditEvent, DriftCase, Summary
from console.services import drift
from console.services.drift import check_summary_drift
from console.services.summaries import promote_summary
from tests.console.factories import HX, html_of

#: the coding sample's constraint, and the same sentence with its negation gone
CONSTRAINT = "but don't deploy; just run the job locally"
INVERTED = "and deploy it now"


def crafted(archive: Archive, text: str, **fields: Any) -> Summary:
    """A summary row written directly (rows are immutable, so crafted texts are made at creation)."""
    fields.setdefault("status", Summary.Status.DRAFT)
    fields.setdefault("summary_id", f"sum_drift{Summary.objects.count():08d}")
    fields.setdefault("provenance", {"generator": "openai", "model": "gpt-test", "trigger": "resummarize"})
    return Summary.objects.create(archive=archive, text=text, **fields)


@pytest.fixture
def drifting(archive: Archive, active: Summary) -> Summary:
    """A draft that inverts the user's "don't deploy", checked: its case opened by itself."""
    summary = crafted(archive, active.text.replace(CONSTRAINT, INVERTED))
    check_summary_drift(summary.pk)
    return summary


@pytest.fixture
def case(drifting: Summary) -> DriftCase:
    return DriftCase.objects.get(summary=drifting)


def confirm(case: DriftCase, user: User) -> None:
    drift.update_drift_case(case.pk, {"status": "confirmed", "verdict": "the summary says to deploy"}, user)


def post(client: Any, url: str, data: dict[str, Any], **extra: Any) -> Any:
    return client.post(url, data, **extra)


# --------------------------------------------------------------------------- detection


def test_it_opens_a_case_by_itself_for_a_serious_finding(case, drifting):
    assert case.status == "open" and case.severity == "high" and case.opened_by is None
    assert "constraint_inverted" in case.kind_list and case.kinds.startswith(",")
    assert AuditEvent.objects.filter(action="drift_case.open", object_id=str(case.pk), actor_label="system").exists()
    check_summary_drift(drifting.pk)  # a check that runs again opens no second case
    assert DriftCase.objects.filter(summary=drifting).count() == 1


def test_it_opens_cases_above_the_configured_severity_only(settings, archive, active):
    lost = crafted(archive, active.text.replace("suspect", "know"))  # no high finding in it
    settings.DRIFT_CASE_MIN_SEVERITY = "high"
    findings = check_summary_drift(lost.pk)
    assert not DriftCase.objects.filter(summary=lost).exists()
    if any(f["severity"] == "medium" for f in findings):
        settings.DRIFT_CASE_MIN_SEVERITY = "medium"
        check_summary_drift(lost.pk)
        assert DriftCase.objects.filter(summary=lost).exists()


# --------------------------------------------------------------------------- the queue


def test_it_lists_open_cases_in_the_queue(as_viewer, case):
    response = as_viewer.get("/drift/")
    html = html_of(response)
    assert response.status_code == 200
    assert f'href="/drift/{case.pk}/"' in html and "constraint inverted" in html and "unassigned" in html
    assert case.session.key in html


def test_it_filters_the_queue(as_reviewer, case, archive, active):
    other = crafted(archive, active.text)
    manual = drift.open_case(other.pk, quote="Decisions", kind="hedge_lost", severity="low", note="", user=None)
    reviewer = as_reviewer.user

    def shown(**params: str) -> set[int]:
        html = html_of(as_reviewer.get("/drift/", params))
        return {c.pk for c in (case, manual) if f'href="/drift/{c.pk}/' in html}

    assert shown() == {case.pk, manual.pk}
    assert shown(severity="high") == {case.pk}
    assert shown(kind="hedge_lost") == {manual.pk}
    assert shown(kind="constraint_inverted") == {case.pk}
    assert shown(session="no-such-session") == set()
    drift.update_drift_case(case.pk, {"claim": True}, reviewer)
    assert shown(assignee="me") == {case.pk}
    assert shown(assignee="none") == {manual.pk}
    assert shown(assignee=reviewer.username) == {case.pk}
    assert shown(status="confirmed") == set()
    confirm(case, reviewer)
    assert (
        shown() == {manual.pk}
        and shown(status="confirmed") == {case.pk}
        and shown(status="all") == {case.pk, manual.pk}
    )
    drift.add_comment(manual, f"@{reviewer.username} is this real?", "", None)
    assert shown(mentions="me") == {manual.pk}
    assert shown(severity="bogus", kind="bogus") == {manual.pk}  # unknown values are ignored


def test_it_answers_the_queue_results_alone_for_htmx(as_viewer, case):
    html = html_of(as_viewer.get("/drift/", {"severity": "high"}, headers=HX))
    assert html.lstrip().startswith('<div id="results"') and "<html" not in html


def test_it_keeps_the_queue_query_count_flat(as_viewer, archive, active):
    def queries() -> int:
        with CaptureQueriesContext(connection) as ctx:
            assert as_viewer.get("/drift/").status_code == 200
        return len(ctx.captured_queries)

    for _ in range(2):
        drift.open_case(active.pk, quote="Decisions", kind="other", severity="low", note="", user=None)
    few = queries()
    for _ in range(10):
        drift.open_case(active.pk, quote="Decisions", kind="other", severity="low", note="", user=None)
    assert queries() == few


def test_it_refuses_the_queue_without_a_role(login, case):
    assert login("").get("/drift/").status_code == 403


# --------------------------------------------------------------------------- the case page


def test_it_shows_the_evidence_side_by_side(as_viewer, case, drifting, archive):
    finding = next(f for f in case.findings if f["kind"] == "constraint_inverted")
    i = finding["message_index"]

    html = html_of(as_viewer.get(f"/drift/{case.pk}/"))

    assert "Archived original" in html and "Summary" in html
    assert f'href="/archives/{archive.pk}/?at={i}#a-{i}"' in html
    assert "<mark>Try BATCH=5000, but don&#x27;t deploy; just run the job locally.</mark>" in html
    assert f"<mark>{finding['evidence']['summary']}</mark>".replace("'", "&#x27;") in html
    assert "gpt-test" in html and drifting.summary_id in html
    assert "resummarize-form" not in html  # a viewer gets no re-summarize form ...
    assert "Re-summarizing needs the operator role." in html and "Reviewing needs the reviewer role." in html


def test_it_escapes_html_in_evidence_and_comments(as_reviewer, archive, active):
    summary = crafted(archive, active.text + "\n- <script>alert(1)</script> done")
    case = drift.open_case(
        summary.pk, quote="<script>alert(1)</script> done", kind="other", severity="high", note="<b>x</b>", user=None
    )
    post(as_reviewer, f"/drift/{case.pk}/comment", {"body": "<img src=x onerror=alert(2)>", "quote": "<i>q</i>"})

    html = html_of(as_reviewer.get(f"/drift/{case.pk}/"))

    assert "<script>alert(1)" not in html and "&lt;script&gt;alert(1)&lt;/script&gt;" in html
    assert "<img src=x" not in html and "&lt;img src=x onerror=alert(2)&gt;" in html
    assert "<b>x</b>" not in html and "<i>q</i>" not in html


def test_it_lets_a_reviewer_claim_and_shows_who_holds_a_case(login, case):
    first, second = login("reviewer"), login("reviewer")

    response = post(first, f"/drift/{case.pk}/update", {"action": "claim"}, headers=HX)
    assert response.status_code == 200 and "caseChanged" in response.headers["HX-Trigger"]
    assert f'held by <strong class="holder">{first.user.username}</strong>' in html_of(response)

    response = post(second, f"/drift/{case.pk}/update", {"action": "claim"}, headers=HX)
    assert response.status_code == 409 and f"{first.user.username} holds this case" in html_of(response)
    case.refresh_from_db()
    assert case.assignee == first.user
    assert first.user.username in html_of(second.get("/drift/"))


def test_it_assigns_only_reviewers(login, case):
    reviewer, teammate, viewer = login("reviewer"), login("reviewer"), login("viewer")

    response = post(reviewer, f"/drift/{case.pk}/update", {"action": "assign", "assignee": viewer.user.username})
    assert response.status_code == 303
    case.refresh_from_db()
    assert case.assignee is None
    assert "cannot review drift cases" in html_of(reviewer.get(f"/drift/{case.pk}/"))

    post(reviewer, f"/drift/{case.pk}/update", {"action": "assign", "assignee": teammate.user.username})
    case.refresh_from_db()
    assert case.assignee == teammate.user
    post(reviewer, f"/drift/{case.pk}/update", {"action": "assign", "assignee": ""})
    case.refresh_from_db()
    assert case.assignee is None


def test_it_needs_a_verdict_to_confirm_and_records_the_history(as_reviewer, case):
    url = f"/drift/{case.pk}/update"

    response = post(as_reviewer, url, {"action": "status", "status": "confirmed", "verdict": " "}, headers=HX)
    assert response.status_code == 422 and "needs a verdict" in html_of(response)
    case.refresh_from_db()
    assert case.status == "open"

    response = post(as_reviewer, url, {"action": "status", "status": "resolved"}, headers=HX)
    assert response.status_code == 409 and "cannot become resolved" in html_of(response)

    response = post(
        as_reviewer, url, {"action": "status", "status": "confirmed", "verdict": "部署禁令被反转了"}, headers=HX
    )
    assert response.status_code == 200
    case.refresh_from_db()
    assert (case.status, case.verdict) == ("confirmed", "部署禁令被反转了")
    html = html_of(as_reviewer.get(f"/drift/{case.pk}/"))
    assert "部署禁令被反转了" in html and "changed the review" in html and "open → confirmed" in html
    event = AuditEvent.objects.get(action="drift_case.update", object_id=str(case.pk))
    assert event.before["status"] == "open" and event.after["verdict"] == "部署禁令被反转了"


def test_it_clears_the_verdict_when_a_case_is_reopened(as_reviewer, case):
    confirm(case, as_reviewer.user)
    drift.update_drift_case(case.pk, {"status": "open"}, as_reviewer.user)
    case.refresh_from_db()
    assert case.verdict == "" and case.status == "open"
    with pytest.raises(drift.InvalidInput):
        drift.update_drift_case(case.pk, {"status": "dismissed"}, as_reviewer.user)


def test_it_anchors_comments_and_records_mentions(login, case):
    author, mentioned = login("reviewer"), login("reviewer")
    body = f"@{mentioned.user.username}, see this. Mail ops@example.com too."

    response = post(author, f"/drift/{case.pk}/comment", {"body": body, "quote": "deploy it now"}, headers=HX)

    assert response.status_code == 200
    comment = case.comments.get()
    assert comment.quote == "deploy it now" and list(comment.mentions.all()) == [mentioned.user]
    html = html_of(author.get(f"/drift/{case.pk}/"))
    assert '<blockquote class="quoted">deploy it now</blockquote>' in html
    assert f"@{mentioned.user.username}</span>" in html
    assert f'href="/drift/{case.pk}/' in html_of(mentioned.get("/drift/", {"mentions": "me"}))
    assert f'href="/drift/{case.pk}/' not in html_of(author.get("/drift/", {"mentions": "me"}))
    event = AuditEvent.objects.get(action="drift_case.comment")
    assert event.after["mentions"] == [mentioned.user.username]


def test_it_refuses_an_empty_comment(as_reviewer, case):
    response = post(as_reviewer, f"/drift/{case.pk}/comment", {"body": "  "}, headers=HX)
    assert response.status_code == 422 and "Write a comment first." in html_of(response)
    assert not case.comments.exists()


@pytest.mark.parametrize("role", ["viewer", "operator"])
def test_it_refuses_review_changes_without_the_reviewer_role(login, case, role):
    client = login(role)
    for url, data in [
        (f"/drift/{case.pk}/update", {"action": "claim"}),
        (f"/drift/{case.pk}/update", {"action": "status", "status": "dismissed", "verdict": "fine"}),
        (f"/drift/{case.pk}/comment", {"body": "hi"}),
    ]:
        assert post(client, url, data).status_code == 403
    case.refresh_from_db()
    assert (case.status, case.assignee, case.comments.count()) == ("open", None, 0)


# --------------------------------------------------------------------------- opening a case by hand


def test_it_opens_a_case_by_hand_from_a_summary(as_operator, active):
    html = html_of(as_operator.get(f"/summaries/{active.pk}/"))
    assert "Open a drift case by hand" in html and "data-quote-target" in html and "data-quotable" in html
    passage = active.text.splitlines()[1].lstrip("- ").strip()  # as a reader selects it: no list marker

    response = post(
        as_operator,
        f"/summaries/{active.pk}/open-case",
        {"quote": passage, "kind": "hedge_lost", "severity": "medium", "note": "too sure"},
        headers=HX,
    )

    case = DriftCase.objects.get(summary=active)
    assert response.status_code == 200 and response.headers["HX-Redirect"] == f"/drift/{case.pk}/"
    assert case.opened_by == as_operator.user and case.severity == "medium" and case.kind_list == ["hedge_lost"]
    assert case.findings[0]["evidence"] == {"original": "", "summary": passage} and case.findings[0]["manual"]
    assert f"Opened by hand by {as_operator.user.username}" in html_of(as_operator.get(f"/drift/{case.pk}/"))


def test_it_refuses_a_passage_that_is_not_in_the_summary(as_operator, active):
    response = post(
        as_operator,
        f"/summaries/{active.pk}/open-case",
        {"quote": "words the summary never said", "kind": "other", "severity": "high"},
        headers=HX,
    )
    assert response.status_code == 422 and "is not in summary" in html_of(response)
    assert not DriftCase.objects.exists()


def test_it_matches_a_selection_without_markdown_markers(active):
    case = drift.open_case(active.pk, quote="Decisions", kind="other", severity="low", note="", user=None)
    assert case.pk


def test_it_hides_opening_a_case_from_viewers(as_viewer, active):
    assert "Open a drift case by hand" not in html_of(as_viewer.get(f"/summaries/{active.pk}/"))
    response = post(as_viewer, f"/summaries/{active.pk}/open-case", {"quote": "x", "kind": "other", "severity": "low"})
    assert response.status_code == 403


# --------------------------------------------------------------------------- the fix


def promotable_clean(archive: Archive, active: Summary) -> Summary:
    """A faithful draft whose drift check found nothing serious."""
    faithful = crafted(archive, active.text, summary_id="sum_faithful")
    check_summary_drift(faithful.pk)
    faithful.refresh_from_db()
    assert not drift.serious(faithful.drift_findings)
    return faithful


def test_it_resolves_a_confirmed_case_when_a_clean_version_is_promoted(login, case, archive, active, drifting):
    reviewer = login("reviewer")
    confirm(case, reviewer.user)
    faithful = promotable_clean(archive, active)
    operator = login("operator")

    html = html_of(reviewer.get(f"/drift/{case.pk}/"))
    assert "sum_faithful" in html and "no serious drift" in html
    assert f'href="/summaries/{faithful.pk}/promote"' not in html  # a reviewer alone cannot promote
    assert f'href="/summaries/{faithful.pk}/promote"' in html_of(operator.get(f"/drift/{case.pk}/"))

    assert post(operator, f"/summaries/{faithful.pk}/promote", {}).status_code == 303

    case.refresh_from_db()
    assert case.status == "resolved" and case.fixed_by == faithful
    event = AuditEvent.objects.get(action="drift_case.resolve", object_id=str(case.pk))
    assert event.actor_label == operator.user.username and event.after["fixed_by"] == "sum_faithful"
    assert "Fixed by promoting sum_faithful" in html_of(reviewer.get(f"/drift/{case.pk}/"))


def test_it_leaves_the_case_confirmed_when_the_promoted_version_drifts_too(login, case, archive, active):
    reviewer = login("reviewer")
    confirm(case, reviewer.user)
    again = crafted(archive, active.text.replace(CONSTRAINT, INVERTED), summary_id="sum_again")
    check_summary_drift(again.pk)

    promote_summary(again.pk, user=None, acknowledge_drift=True)

    case.refresh_from_db()
    assert case.status == "confirmed" and case.fixed_by is None
    assert DriftCase.objects.filter(summary=again, status="open").exists()  # the new version got its own case


def test_it_resolves_when_the_check_finishes_after_the_promotion(login, case, archive, active):
    confirm(case, login("reviewer").user)
    faithful = crafted(archive, active.text, summary_id="sum_late")
    promote_summary(faithful.pk, user=None)
    case.refresh_from_db()
    assert case.status == "confirmed"  # not checked yet: nothing is resolved on trust

    check_summary_drift(faithful.pk)

    case.refresh_from_db()
    assert case.status == "resolved" and case.fixed_by == faithful


# --------------------------------------------------------------------------- export


def test_it_exports_confirmed_cases_as_jsonl(as_viewer, login, case, drifting):
    assert as_viewer.get("/drift/export.jsonl").getvalue() == b""  # nothing confirmed yet
    confirm(case, login("reviewer").user)

    response = as_viewer.get("/drift/export.jsonl")

    assert response["Content-Disposition"] == 'attachment; filename="drift-regression-set.jsonl"'
    [line] = response.getvalue().decode().splitlines()
    record = json.loads(line)
    assert record["case"] == case.pk and record["bad_summary"]["text"] == drifting.text
    assert record["original_segment"] and record["findings"] == case.findings


# --------------------------------------------------------------------------- roles


def test_the_admin_role_may_do_everything_the_others_may(db):
    admin = User.objects.create_user("boss")
    admin.groups.add(Group.objects.get(name="admin"))
    for perm in (
        "console.view_session",
        "console.compress_session",
        "console.promote_summary",
        "console.review_drift",
        "console.open_drift_case",
        "console.view_auditevent",
        "console.reveal_secrets",
    ):
        assert admin.has_perm(perm), perm


def test_it_refuses_bad_input_to_open_a_case_and_writes_nothing(as_operator, active):
    from console.apikeys import create_api_key

    huge = {"quote": "x" * 5000, "kind": "other", "severity": "low"}
    response = post(as_operator, f"/summaries/{active.pk}/open-case", huge, headers=HX)
    assert response.status_code == 422 and "at most 4000 characters" in html_of(response)
    response = post(as_operator, f"/summaries/{active.pk}/open-case", {"quote": "Decisions", "kind": "nonsense"})
    assert response.status_code == 303  # without htmx: back to the summary, with the error as a message

    headers = {"Authorization": f"Bearer {create_api_key('rt', 'operator')[1]}"}
    api = "/api/v1/drift-cases"
    bad_json = as_operator.post(api, "{not json", content_type="application/json", headers=headers)
    assert bad_json.status_code == 400
    unknown = {"summary": active.pk, "quote": "Decisions", "kind": "nonsense"}
    response = as_operator.post(api, json.dumps(unknown), content_type="application/json", headers=headers)
    assert response.status_code == 422 and "unknown kind 'nonsense'" in response.json()["detail"]
    missing = {"summary": 999_999, "quote": "Decisions"}
    response = as_operator.post(api, json.dumps(missing), content_type="application/json", headers=headers)
    assert response.status_code == 404
    assert not DriftCase.objects.exists() and not AuditEvent.objects.filter(action="drift_case.open").exists()


def test_every_detail_the_detector_writes_has_a_translation():
    from pathlib import Path

    from agent_compression import check_drift
    from console.web.labels import DETAILS

    corpus = Path(__file__).resolve().parents[2] / "bench" / "data" / "drift_pairs.jsonl"
    details = set()
    for line in corpus.read_text(encoding="utf-8").splitlines():
        pair = json.loads(line)
        details |= {f.code for f in check_drift(pair["messages"], pair["summary"])}
    assert details and details <= set(DETAILS), details - set(DETAILS)


def test_it_masks_secrets_on_the_case_page_and_reveals_them_with_the_permission(as_viewer, superuser, archive, active):
    from tests.console.factories import SECRET

    summary = crafted(archive, active.text + f"\n- uses the key {SECRET}")
    case = drift.open_case(
        summary.pk, quote=f"uses the key {SECRET}", kind="other", severity="high", note="", user=None
    )

    html = html_of(as_viewer.get(f"/drift/{case.pk}/"))
    assert SECRET not in html and "[secret:api_key:" in html and "Reveal secrets" not in html
    assert as_viewer.get(f"/drift/{case.pk}/", {"reveal": "1"}).status_code == 403

    assert "Reveal secrets" in html_of(superuser.get(f"/drift/{case.pk}/"))
    revealed = html_of(superuser.get(f"/drift/{case.pk}/", {"reveal": "1"}))
    assert SECRET in revealed and "Hide secrets" in revealed
    assert AuditEvent.objects.filter(action="secrets.reveal", object_type="driftcase").exists()


def test_it_shows_evidence_from_outside_the_archive(as_viewer, archive, active, compressed_run):
    from console.models import Message

    head = archive.start - 1
    text = Message.load([compressed_run.input_keys[head]])[0]["content"]
    quote = text.split("\n")[0][:60]
    finding = {"kind": "constraint_dropped", "severity": "high", "evidence": {"original": quote, "summary": ""}}
    case = DriftCase.objects.create(
        summary=active, session=archive.session, severity="high", findings=[finding | {"message_index": head}]
    )

    html = html_of(as_viewer.get(f"/drift/{case.pk}/"))

    assert f'href="/runs/{compressed_run.pk}/?at=in-{head}#in-{head}"' in html
    assert "<mark>" + quote.replace("'", "&#x27;").replace('"', "&quot;") in html


def test_region_refreshes_do_not_load_the_long_key_lists(as_viewer, case):
    for target in ("case-review", "case-fix", "case-comments"):
        with CaptureQueriesContext(connection) as ctx:
            response = as_viewer.get(f"/drift/{case.pk}/", headers={**HX, "HX-Target": target})
        assert response.status_code == 200
        sql = " ".join(q["sql"] for q in ctx.captured_queries)
        assert "input_keys" not in sql and "message_keys" not in sql, target
