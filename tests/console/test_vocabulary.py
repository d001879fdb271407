"""One vocabulary: inbox lines, session metadata keys and summary headings in words, in English and Chinese."""

from __future__ import annotations

from django.contrib.auth.models import User

from console.models import Archive, Notification, Session, Summary
from console.web.presenters import PINNED_TITLE_ZH, in_session_language
from tests.console.factories import html_of


def zh(client):
    client.cookies["django_language"] = "zh-hans"
    return client


def test_an_inbox_line_names_severity_and_kinds_in_words(as_viewer):
    user = User.objects.get(username=as_viewer.user.username)
    Notification.objects.create(
        recipient=user,
        kind=Notification.Kind.DRIFT_CASE,
        url="/drift/3/",
        data={"case": 3, "severity": "high", "kinds": "constraint_dropped, identifier_missing", "session": "s:1"},
    )
    html = html_of(as_viewer.get("/inbox/"))
    assert "New drift case #3 (high: constraint dropped, identifier missing) on session s:1" in html
    assert "constraint_dropped" not in html
    html = html_of(zh(as_viewer).get("/inbox/"))
    assert "constraint_dropped" not in html and "约束丢失" in html and "高" in html


def test_known_metadata_keys_are_labelled(as_viewer, archive: Archive):
    session = Session.objects.get(pk=archive.session_id)
    session.metadata = {"workspace": "acme", "channel_name": "#oncall", "demo": True, "custom_key": ""}
    session.save(update_fields=["metadata"])
    html = html_of(as_viewer.get(f"/sessions/{session.pk}/"))
    assert "<dt>workspace</dt><dd>acme</dd>" in html and "<dt>channel name</dt><dd>#oncall</dd>" in html
    assert "<dt>demo data</dt><dd>yes</dd>" in html and "<dt>custom_key</dt><dd>—</dd>" in html
    html = html_of(zh(as_viewer).get(f"/sessions/{session.pk}/"))
    assert "<dt>工作区</dt>" in html and "<dt>频道名称</dt>" in html and "<dt>演示数据</dt><dd>是</dd>" in html


def test_a_chinese_summary_names_its_pinned_facts_in_chinese():
    text = "## 决定\n- 先不要修改部署脚本 (#3)\n约束与批准见 Pinned facts（原文，含否定）。\n\n"
    text += "## Pinned facts\n- [constraint] (#3) 先不要修改部署脚本"
    shown = in_session_language(text)
    assert f"## {PINNED_TITLE_ZH}" in shown and "Pinned facts" not in shown
    english = "## Decisions\n- keep it\n\n## Pinned facts\n- [constraint] (#3) do not deploy"
    assert in_session_language(english) == english


def test_the_summary_page_shows_chinese_headings(as_viewer, archive: Archive):
    summary = Summary.objects.create(
        archive=archive,
        summary_id="sum_zh_headings",
        status=Summary.Status.DRAFT,
        text="## 决定\n- 周三上午的评审会不要动 (#2)\n\n## Pinned facts\n- [constraint] (#2) 周三上午的评审会不要动",
        provenance={"generator": "extractive"},
    )
    html = html_of(as_viewer.get(f"/summaries/{summary.pk}/"))
    assert f"<h2>{PINNED_TITLE_ZH}</h2>" in html and "<h2>Pinned facts</h2>" not in html.split("summary-main")[1][:800]
