"""A Chinese session's run, summary and drift case pages, rendered in zh-hans, show no English interface string.

The demo (``setup_demo``) holds a Chinese WeChat session, compressed once, with a drifted draft under
review. Its three pages are parsed; every text node and every title / aria-label / placeholder outside
the containers that show content (messages, summaries, comments, verdicts, quoted facts), identifiers
(``.mono``, ``code``, ``pre``) and times (``<time>``, checked on their own) is checked:

- it is not a msgid of the catalog (an interface string that was rendered untranslated), and
- it has no Latin word besides the few the Chinese interface writes as they are (token, API, …) and
  the names the data brings (user names, generator names);
- it has no run of four digits or more (counts are grouped by thousands in both languages).
"""

from __future__ import annotations

import re
from html.parser import HTMLParser
from io import StringIO
from pathlib import Path

import pytest
from django.contrib.auth.models import User
from django.core.management import call_command
from django.test import Client

from console.models import CompressionRun, DriftCase, Session, Summary

PO = Path(__file__).resolve().parents[2] / "locale" / "zh_Hans" / "LC_MESSAGES" / "django.po"
#: containers whose text is content, an identifier or code, not interface
CONTENT_CLASSES = {
    "mono",
    "msg-body",
    "summary-text",
    "comment-body",
    "verdict",
    "verbatim",
    "who",
    "holder",
    "mention",
    "key",
    "code",
    "change",  # a case history's "field: old → new" (values are verdicts and user names)
}
CONTENT_TAGS = {"pre", "code", "q", "script", "style", "time", "textarea", "option"}
VOID = {"br", "img", "input", "meta", "link", "hr", "wbr", "area", "col", "source", "path", "rect", "line"}
ATTRIBUTES = ("title", "aria-label", "placeholder", "alt")
#: Latin words the Chinese interface keeps as they are
#: identifiers inside interface text: session keys, summary ids, @mentions, paths
IDENTIFIER = re.compile(r"\d{4}年\d{1,2}月\d{1,2}日|\d{4}-\d\d-\d\d|@\w+|[\w.-]*[_:/][\w.:/-]*")
KEPT = {
    "token",
    "tokens",
    "api",
    "webhook",
    "webhooks",
    "json",
    "jsonl",
    "csv",
    "enter",  # key names on the keyboard help
    "esc",
    "english",
    "id",
    "hmac",
    "slack",
    "ms",
    "utc",
    "usd",
}


def msgids() -> set[str]:
    ids, text = set(), PO.read_text(encoding="utf-8")
    for block in re.findall(r'^msgid ((?:".*"\n)+)', text, flags=re.M):
        value = "".join(re.findall(r'"(.*)"', block)).replace('\\"', '"').replace("\\n", "\n")
        if value and not re.search(r"%\(|\{\{|%s|%d", value):
            ids.add(" ".join(value.split()))
    return ids


class Interface(HTMLParser):
    """The interface text of a page: (where, text) for text nodes and attributes outside content."""

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.stack: list[tuple[str, bool]] = []
        self.found: list[tuple[str, str]] = []
        self.times: list[dict[str, str | None]] = []

    @property
    def inside_content(self) -> bool:
        return any(content for _, content in self.stack)

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        a = dict(attrs)
        classes = set((a.get("class") or "").split())
        content = tag in CONTENT_TAGS or bool(classes & CONTENT_CLASSES)
        if tag == "time":
            self.times.append(a)
        if not self.inside_content and not content:
            for name in ATTRIBUTES:
                if a.get(name):
                    self.found.append((f"<{tag} {name}>", str(a[name])))
        if tag not in VOID:
            self.stack.append((tag, content))

    def handle_endtag(self, tag: str) -> None:
        for i in range(len(self.stack) - 1, -1, -1):
            if self.stack[i][0] == tag:
                del self.stack[i:]
                return

    def handle_data(self, data: str) -> None:
        if data.strip() and not self.inside_content:
            where = "/".join(t for t, _ in self.stack[-3:])
            self.found.append((where, " ".join(data.split())))


def problems(html: str, names: set[str], catalog: set[str]) -> list[str]:
    page = Interface()
    page.feed(html)
    out = []
    for where, text in page.found:
        bare = IDENTIFIER.sub(" ", text)
        words = {w.lower() for w in re.findall(r"[A-Za-z][A-Za-z'’-]+", bare)} - KEPT - names
        if text in catalog and words:
            out.append(f"untranslated msgid at {where}: {text!r}")
            continue
        if words:
            out.append(f"English at {where}: {text!r} ({', '.join(sorted(words))})")
        if re.search(r"(?<![\d.,])\d{4,}", bare):
            out.append(f"ungrouped number at {where}: {text!r}")
    for t in page.times:  # one date format: an ISO instant, a full title, a Chinese short text (checked by parse)
        iso = t.get("datetime") or ""
        if not re.fullmatch(r"\d{4}-\d\d-\d\d(T\d\d:\d\d:\d\d(\.\d+)?[+-]\d\d:\d\d)?", iso):
            out.append(f"<time> without an ISO datetime: {t}")
        full = r"\d{4}年\d{1,2}月\d{1,2}日" + (r" \d\d:\d\d:\d\d \S+" if "T" in iso else "")  # a day alone has no time
        if not re.fullmatch(full, t.get("title") or ""):
            out.append(f"<time> without a full Chinese title: {t}")
    return out


@pytest.fixture
def demo(db) -> Session:
    call_command("setup_demo", stdout=StringIO())
    return Session.objects.get(key="wechat:wxid_demo01")


def test_a_chinese_sessions_pages_have_no_untranslated_interface_string(demo):
    run = CompressionRun.objects.filter(session=demo).latest("pk")
    live = Summary.objects.filter(archive__session=demo, status=Summary.Status.ACTIVE).first()
    case = DriftCase.objects.filter(summary__archive__session=demo).first()
    assert live is not None and case is not None, "the demo's WeChat session has a live summary and a drift case"
    client = Client(HTTP_ACCEPT_LANGUAGE="zh-hans")
    client.force_login(User.objects.get(username="admin"))
    names = {u.lower() for u in User.objects.values_list("username", flat=True)}
    names |= {"extractive", "openai", "demo", "wechat"}  # generator names and the channel the data brings
    catalog = msgids()
    found = {}
    pages = (f"/runs/{run.pk}/", f"/summaries/{live.pk}/", f"/drift/{case.pk}/", "/dashboard/", "/runs/")
    for url in pages:
        response = client.get(url)
        assert response.status_code == 200 and response["Content-Language"] == "zh-hans"
        found[url] = problems(response.content.decode(), names, catalog)
    assert not any(found.values()), "\n".join(f"{url}: {p}" for url, ps in found.items() for p in ps)


def test_the_checker_catches_english_and_ungrouped_numbers():
    """The checker itself can fail: an English msgid, a stray English word, a bare 5-digit count, a bad <time>."""
    html = (
        '<main><h2>Pinned facts</h2><p>保存了 12345 个</p><p title="Copy link">链接</p><pre>English inside pre</pre>'
        '<time datetime="2026-12-02T00:00:00+00:00" title="2026-12-02">x</time><span class="mono">abc def</span></main>'
    )
    found = problems(html, set(), {"Pinned facts"})
    assert any("untranslated msgid" in p and "Pinned facts" in p for p in found)
    assert any("ungrouped number" in p for p in found)
    assert any("copy, link" in p for p in found)
    assert any("full Chinese title" in p for p in found)
    assert not any("inside pre" in p or "abc" in p for p in found)
