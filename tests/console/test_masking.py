"""One masking boundary: a secret of every kind, planted everywhere, never reaches a reader without reveal.

Planted in messages, tool arguments and results, metadata, session keys, a focus topic, a summary and its
provenance, a drift case's note, comments and verdict; then every GET endpoint of the API (read from the
OpenAPI schema, so a new endpoint is walked too), every page and fragment, both exports and every log line
is searched for the raw secrets. An admin who asks to reveal sees them, and that is audited.
"""

from __future__ import annotations

import io
import json
import logging
import re
import unicodedata
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import pytest
from django.contrib.auth.models import User
from django.core.management import call_command
from django.db import transaction
from django.db.models import F
from django.test import Client
from django.urls import URLPattern, URLResolver, get_resolver

from console.api import api
from console.apikeys import create_api_key
from console.celery import tasks_inline
from console.log_masking import MaskSecretsFilter
from console.masking import INVISIBLE_CLASS, for_page, mask_text, show_invisible
from console.models import Archive, AuditEvent, CompressionRun, DriftCase, Message, Session, Summary
from console.services import notifications, runs
from console.services.sessions import ImportedSession, create_session
from tests.console.factories import HX
from tests.console.secret_plants import ALL_TEXT, NAMED, NAMED_SECRETS, PLANTS, REQUIRED, leaks, rule_patterns

SECRET_KEY_PLANT = next(p for p in PLANTS if p.kind == "aws_key")
MAIN_KEY = f"ops:{SECRET_KEY_PLANT.text}"
HELLO = [{"role": "user", "content": "hi"}]


# --------------------------------------------------------------------------- the plants themselves


def test_every_rule_has_a_plant():
    """Each masking rule of the library catches a plant of its own (a new rule needs a new plant)."""
    patterns = list(rule_patterns())
    matches = {i: [j for j, p in enumerate(PLANTS) if pattern.search(p.text)] for i, pattern in enumerate(patterns)}
    owner: dict[int, int] = {}  # plant -> rule: a matching, by augmenting paths

    def assign(rule: int, seen: set[int]) -> bool:
        for plant in matches[rule]:
            if plant not in seen:
                seen.add(plant)
                if plant not in owner or assign(owner[plant], seen):
                    owner[plant] = rule
                    return True
        return False

    unplanted = [patterns[i].pattern[:60] for i in matches if not assign(i, set())]
    assert not unplanted, f"add a plant to tests/console/secret_plants.py for these rules: {unplanted}"


def test_the_plants_cover_every_kind_the_console_masks():
    assert {p.kind for p in PLANTS} >= REQUIRED, "a kind the library used to mask is no longer masked"


@pytest.mark.parametrize("plant", PLANTS, ids=[p.kind for p in PLANTS])
def test_each_plant_is_masked(plant):
    assert plant.secret not in mask_text(plant.text)


# --------------------------------------------------------------------------- the planted world


def _history(n: int = 36) -> list[dict[str, Any]]:
    """A history long enough to compress in a 4,000-token window, with every plant in every kind of place."""
    messages: list[dict[str, Any]] = [{"role": "system", "content": "You are a DevOps agent."}]
    filler = "We looked at the export job, its retries and the nightly schedule once more. " * 12
    for i in range(n):
        messages.append({"role": "user", "content": f"step {i}: {filler}\n{ALL_TEXT if i % 6 == 0 else ''}"})
        arguments = json.dumps({"cmd": "env", "secrets": ALL_TEXT, "env": NAMED})
        call = {"id": f"call_{i}", "type": "function", "function": {"name": "terminal", "arguments": arguments}}
        messages.append({"role": "assistant", "content": "", "tool_calls": [call]})
        messages.append({"role": "tool", "tool_call_id": f"call_{i}", "content": f"{filler}\n{ALL_TEXT}"})
        messages.append({"role": "assistant", "content": f"Done with step {i}. {filler[:200]}"})
    return messages


class World:
    """Everything planted, and a client per reader."""

    creation_log = ""

    def __init__(self) -> None:
        self.admin_user = User.objects.create_superuser("root", password="pw")
        self.admin_key = create_api_key("plant-admin", "admin")[1]
        self.viewer_key = create_api_key("plant-viewer", "viewer")[1]
        # every event below is also a webhook delivery, its stored body read back by the admin
        self.webhook = notifications.create_webhook(
            name="plants", url="https://hooks.invalid/in", format="generic", events=list(notifications.EVENTS),
            active=True, user=self.admin_user,
        )  # fmt: skip
        metadata = {"channel": "ops", "notes": ALL_TEXT, SECRET_KEY_PLANT.text: "a secret as a metadata key"}
        metadata |= NAMED | {"deploy": {"config": NAMED}}  # values only the key they sit under calls secret
        self.session = create_session(ImportedSession(key=MAIN_KEY, messages=_history(), metadata=metadata))
        # a session per plant that fits in a key
        self.keyed = [
            create_session(
                ImportedSession(key=f"plant:{p.text}", messages=[{"role": "user", "content": "hi"}], metadata={})
            )
            for p in PLANTS
            if p.key_safe
        ]
        with tasks_inline():
            run, _ = runs.request_compression(
                MAIN_KEY, focus_topic=f"focus {ALL_TEXT}", config={"context_window_tokens": 4000}
            )
            runs.execute_run(run.pk)
        self.run = CompressionRun.objects.get(pk=run.pk)
        assert self.run.applied, self.run.error
        self.archive = Archive.objects.get(run=self.run)
        # a reported run: its summary text and provenance are typed by the runtime
        reported = self.api("post", "/runs/report", self.admin_key, {
            "session_key": "plant:reported",
            "input_messages": [{"role": "user", "content": ALL_TEXT}, {"role": "assistant", "content": "ok"}],
            "output_messages": [{"role": "assistant", "content": "ok"}],
            "archive_messages": [{"role": "user", "content": ALL_TEXT}],
            "summary_text": f"## Goal\nRotate the keys.\n\n## Secrets seen\n{ALL_TEXT}",
            "provenance": {"focus_topic": ALL_TEXT, "model": f"fake {ALL_TEXT}"},
        })  # fmt: skip
        assert reported.status_code == 201, reported.content
        self.summary = Summary.objects.get(pk=reported.json()["summary"]["id"])
        self.summary = Summary.objects.filter(text__contains="Rotate the keys").get()
        opened = self.api("post", "/drift-cases", self.admin_key, {
            "summary": self.summary.pk, "quote": "Rotate the keys.", "severity": "high", "note": f"note {ALL_TEXT}",
        })  # fmt: skip
        assert opened.status_code == 201, opened.content
        self.case = DriftCase.objects.get(pk=opened.json()["id"])
        for body in (
            {"comment": f"comment {ALL_TEXT}", "quote": "Rotate the keys."},
            {"verdict": f"verdict {ALL_TEXT}", "status": "confirmed"},
        ):
            patched = self.api("patch", f"/drift-cases/{self.case.pk}", self.admin_key, body)
            assert patched.status_code == 200, patched.content
        commented = self.api("post", f"/drift-cases/{self.case.pk}/comments", self.admin_key, {"body": ALL_TEXT})
        assert commented.status_code == 201, commented.content
        # the case opened above is a delivery whose stored body the walk reads back (GET .../deliveries)
        assert self.webhook.deliveries.filter(event=notifications.DRIFT_CASE_OPENED).exists()

    @staticmethod
    def api(method: str, path: str, key: str, body: Any = None, **params: str) -> Any:
        client = Client()
        kwargs: dict[str, Any] = {"HTTP_AUTHORIZATION": f"Bearer {key}"}
        if body is not None:
            kwargs |= {"data": json.dumps(body), "content_type": "application/json"}
        query = ("?" + "&".join(f"{k}={v}" for k, v in params.items())) if params else ""
        return getattr(client, method)(f"/api/v1{path}{query}", **kwargs)

    def ids(self) -> dict[str, str]:
        return {
            "key": MAIN_KEY,
            "run_id": str(self.run.pk),
            "archive_id": str(self.archive.pk),
            "summary_id": str(self.summary.pk),
            "case_id": str(self.case.pk),
            "webhook_id": str(self.webhook.pk),
        }


@contextmanager
def _captured_logs() -> Iterator[io.StringIO]:
    """What the configured log handlers (settings.LOGGING) write meanwhile."""
    stream = io.StringIO()
    handlers = [h for h in logging.getLogger().handlers if any(isinstance(f, MaskSecretsFilter) for f in h.filters)]
    assert handlers, "settings.LOGGING installs no masking handler"
    old = [h.setStream(stream) for h in handlers]  # type: ignore[attr-defined]
    try:
        yield stream
    finally:
        for handler, previous in zip(handlers, old, strict=True):
            handler.setStream(previous)  # type: ignore[attr-defined]


@pytest.fixture
def log_lines() -> Iterator[io.StringIO]:
    """What the configured log handlers write while the test runs."""
    with _captured_logs() as stream:
        yield stream


@pytest.fixture(scope="module")
def _planted(django_db_setup: None, django_db_blocker: Any) -> Iterator[World]:
    """The world, built once per module and xdist worker (1.5 s of CPU, 13 tests read it), inside a
    transaction rolled back after the module's last test. Each test runs in a savepoint within it
    (pytest-django's ``db``), so what one test writes is gone before the next; ``creation_log`` is what
    the building logged."""
    with django_db_blocker.unblock(), transaction.atomic():
        with _captured_logs() as stream:
            world = World()
        world.creation_log = stream.getvalue()
        yield world
        transaction.set_rollback(True)


@pytest.fixture
def world(_planted: World, db: None) -> World:
    return _planted


def _leaked(what: str, text: str, found: dict[str, list[str]]) -> None:
    if kinds := leaks(text):
        found[what] = kinds


# --------------------------------------------------------------------------- the API


def _get_paths() -> list[str]:
    schema = api.get_openapi_schema(path_prefix="")
    return [path for path, ops in schema["paths"].items() if "get" in ops]


QUERY = {"/sessions/{key}/archive/search": {"q": "step"}}


def _fill(path: str, ids: dict[str, str]) -> str:
    def value(match: re.Match[str]) -> str:
        assert match.group(1) in ids, f"the masking walk does not know path parameter {match.group(0)} of {path}"
        return ids[match.group(1)]

    return re.sub(r"\{(\w+)\}", value, path)


def test_no_raw_secret_in_any_api_response_without_reveal(world):
    found: dict[str, list[str]] = {}
    paths = _get_paths()
    assert len(paths) >= 9
    for path in paths:
        for who, key in (("viewer", world.viewer_key), ("admin without reveal", world.admin_key)):
            response = world.api("get", _fill(path, world.ids()), key, **QUERY.get(path, {}))
            assert response.status_code in (200, 403), (path, response.content[:300])
            _leaked(f"{who} GET {path}", response.content.decode(), found)
    # writes answer masked too
    appended = world.api("post", f"/sessions/{MAIN_KEY}/messages", world.admin_key, {"messages": [
        {"role": "user", "content": ALL_TEXT}]})  # fmt: skip
    assert appended.status_code == 200
    _leaked("POST messages", appended.content.decode(), found)
    missing = world.api("get", f"/sessions/{MAIN_KEY}.missing", world.viewer_key)
    assert missing.status_code == 404
    _leaked("404 detail", missing.content.decode(), found)
    assert not found, f"raw secrets in API responses: {found}"


def test_api_reveal_is_for_admins_and_audited(world):
    viewer = world.api("get", f"/sessions/{MAIN_KEY}", world.viewer_key, reveal="1")
    assert viewer.status_code == 403
    assert not leaks(viewer.content.decode())
    before = AuditEvent.objects.filter(action="secrets.reveal").count()
    admin = world.api("get", f"/sessions/{MAIN_KEY}", world.admin_key, reveal="1")
    assert admin.status_code == 200
    assert set(leaks(admin.content.decode())) == {p.kind for p in PLANTS} | set(NAMED_SECRETS)
    assert AuditEvent.objects.filter(action="secrets.reveal").count() == before + 1
    run = world.api("get", f"/runs/{world.run.pk}", world.admin_key, reveal="1").json()
    assert SECRET_KEY_PLANT.secret in run["focus_topic"]
    case = world.api("get", f"/drift-cases/{world.case.pk}", world.admin_key, reveal="1").json()
    assert SECRET_KEY_PLANT.secret in case["verdict"]


def test_api_search_is_not_an_oracle(world):
    prefix = SECRET_KEY_PLANT.secret[:6]  # "AKIAZ3"
    listed = world.api("get", "/sessions", world.viewer_key, q=prefix).json()
    assert listed["count"] == 0
    placeholder = mask_text(MAIN_KEY).split(":", 1)[1][:16]  # "[secret:aws_key:"
    assert world.api("get", "/sessions", world.viewer_key, q=placeholder).json()["count"] >= 1
    revealed = world.api("get", "/sessions", world.admin_key, q=prefix, reveal="1").json()
    assert revealed["count"] >= 1
    hits = world.api("get", f"/sessions/{MAIN_KEY}/archive/search", world.viewer_key, q=prefix).json()
    assert hits["hits"] == []
    cases = world.api("get", "/drift-cases", world.viewer_key, session="plant:reported").json()
    assert cases["count"] == 1
    by_raw_key = world.api("get", "/drift-cases", world.viewer_key, session=f"plant:{SECRET_KEY_PLANT.text}")
    assert by_raw_key.json()["count"] == 0


# --------------------------------------------------------------------------- pages and fragments


def _page_names() -> set[str]:
    names: set[str] = set()
    for entry in get_resolver().url_patterns:
        if isinstance(entry, URLPattern) and entry.name:
            names.add(entry.name)
        elif isinstance(entry, URLResolver):
            continue  # admin and the API
    return names


#: pages a GET shows nothing stored on, or that only take POST
NOT_CONTENT = {"healthz", "login", "logout", "set_language", "compress", "resummarize", "open_case", "drift_update"}
NOT_CONTENT |= {"drift_comment", "inbox_read", "notification_open"}
NOT_CONTENT |= {
    "drift_bulk",
    "review_pair",
    "drift_check_retry",
}  # POSTs; a pairwise note shows on the compare page (test_review_flow)
NOT_CONTENT |= {"proxy_chat_completions", "proxy_models"}  # relay the runtime's own call and its answer to it


def _pages(world: World) -> dict[str, list[str]]:
    message = world.archive.message_keys[1]
    versions = list(world.archive.summaries.values_list("pk", flat=True))
    return {
        "home": ["/", "/?q=step", "/?q=ops&scope=key"],
        "session": [f"/sessions/{world.session.pk}/", *(f"/sessions/{s.pk}/" for s in world.keyed)],
        "run": [f"/runs/{world.run.pk}/"],
        "run_progress": [f"/runs/{world.run.pk}/progress", f"/runs/{world.run.pk}/progress?from=session"],
        "run_diff": [f"/runs/{world.run.pk}/diff", f"/runs/{world.run.pk}/diff?view=unified"],
        "message": [f"/messages/{message}/"],
        "archive": [f"/archives/{world.archive.pk}/", f"/archives/{world.summary.archive_id}/"],
        "compare": [f"/archives/{world.archive.pk}/compare?a={versions[0]}&b={versions[-1]}"],
        "summary": [f"/summaries/{world.summary.pk}/", *(f"/summaries/{pk}/" for pk in versions)],
        "summary_progress": [f"/summaries/{world.summary.pk}/progress"],
        "promote": [f"/summaries/{world.summary.pk}/promote"],
        "drift_queue": ["/drift/", "/drift/?status=confirmed"],
        "drift_export": ["/drift/export.jsonl"],
        "drift_case": [f"/drift/{world.case.pk}/"],
        "dashboard": ["/dashboard/"],
        "dashboard_runs": ["/dashboard/runs/", "/dashboard/runs/?status=succeeded"],
        "runs": ["/runs/", "/runs/?status=succeeded", "/runs/?q=ops&sort=drift"],
        "runs_csv": ["/runs/export.csv"],
        # a key holding a secret names the downloaded file (Content-Disposition): the headers are searched too
        "session_export": [f"/sessions/{s.pk}/export.json" for s in (world.session, *world.keyed)],
        "session_download": [f"/exports/session?session={s.pk}" for s in (world.session, *world.keyed)],
        "audit_log": ["/audit/"],
        "inbox": ["/inbox/", "/inbox/?show=all"],
        "webhooks": ["/settings/webhooks/"],
        "api_keys": ["/settings/api-keys/"],
        "webhook": [f"/settings/webhooks/{world.webhook.pk}/"],
    }


def _body(response: Any) -> str:
    """The body and the headers (a file name, a redirect's location)."""
    headers = "\n".join(f"{k}: {v}" for k, v in response.headers.items())
    if getattr(response, "streaming", False):
        return headers + b"".join(response.streaming_content).decode()
    return headers + response.content.decode()


def test_no_raw_secret_in_any_page_or_fragment_without_reveal(world, login):
    pages = _pages(world)
    assert _page_names() - NOT_CONTENT - set(pages) == set(), "walk the new page(s) here"
    readers = {"viewer": login("viewer"), "reviewer": login("reviewer"), "operator": login("operator")}
    admin = Client()
    admin.force_login(world.admin_user)
    readers["admin without reveal"] = admin
    found: dict[str, list[str]] = {}
    for urls in pages.values():
        for url in urls:
            for who, client in readers.items():
                for headers in ({}, HX):
                    response = client.get(url, headers=headers)
                    assert response.status_code in (200, 286, 301, 302, 403), (url, who, response.status_code)
                    _leaked(f"{who} {url}{' (htmx)' if headers else ''}", _body(response), found)
    assert not found, f"raw secrets in pages: {found}"


def test_pages_reveal_for_admins(world):
    admin = Client()
    admin.force_login(world.admin_user)
    page = admin.get(f"/sessions/{world.session.pk}/?reveal=1").content.decode()
    assert SECRET_KEY_PLANT.secret in page
    case = admin.get(f"/drift/{world.case.pk}/?reveal=1").content.decode()
    assert f"(aws_key) {SECRET_KEY_PLANT.text}" in case
    assert AuditEvent.objects.filter(action="secrets.reveal").count() == 2


def test_sessions_search_is_not_an_oracle(world, as_viewer):
    """``/?q=AKIAZ3`` must not find the session whose key the page shows masked."""
    prefix = SECRET_KEY_PLANT.secret[:6]
    for scope in ("all", "key"):
        page = as_viewer.get("/", {"q": prefix, "scope": scope}).content.decode()
        assert f"/sessions/{world.session.pk}/" not in page
        assert f"/sessions/{world.keyed[0].pk}/" not in page
    shown = as_viewer.get("/", {"q": "[secret:aws_key:", "scope": "key"}).content.decode()
    assert f"/sessions/{world.session.pk}/" in shown
    queue = as_viewer.get("/drift/", {"session": prefix}).content.decode()
    assert f"/drift/{world.case.pk}/" not in queue


# --------------------------------------------------------------------------- exports and logs


def test_exports_are_masked_unless_revealed(world, tmp_path):
    out = io.StringIO()
    call_command("export_session", MAIN_KEY, stdout=out)
    assert not leaks(out.getvalue())
    assert json.loads(out.getvalue())["runs"][0]["focus_topic"].startswith("focus")
    out = io.StringIO()
    call_command("export_session", "plant:reported", stdout=out)
    assert not leaks(out.getvalue())
    call_command("export_drift_cases", "--output", str(tmp_path / "set.jsonl"))
    assert not leaks((tmp_path / "set.jsonl").read_text())
    before = AuditEvent.objects.filter(action="secrets.reveal").count()
    out = io.StringIO()
    call_command("export_session", MAIN_KEY, "--reveal", stdout=out)
    assert SECRET_KEY_PLANT.secret in out.getvalue()
    event = AuditEvent.objects.filter(action="secrets.reveal").latest("id")
    assert event.object_id == str(world.session.pk)
    assert AuditEvent.objects.filter(action="secrets.reveal").count() == before + 1


def test_no_raw_secret_in_any_log_line(world, log_lines, as_viewer):
    World.api("get", f"/sessions/{MAIN_KEY}.missing", world.viewer_key)  # "Not Found: ..."
    as_viewer.get(f"/messages/{SECRET_KEY_PLANT.text}/")
    log = logging.getLogger("console.tests")
    log.warning("planted %s", ALL_TEXT)
    log.warning("planted metadata %s and %r", NAMED, [NAMED])
    try:
        raise RuntimeError(ALL_TEXT)
    except RuntimeError:
        log.exception("failed with %r", {"key": MAIN_KEY})
    lines = world.creation_log + log_lines.getvalue()
    assert "planted" in lines and "RuntimeError" in lines and "Not Found" in lines
    assert not leaks(lines), lines


def test_search_text_is_stored_masked(world, as_viewer):
    assert not Message.objects.filter(text__contains=SECRET_KEY_PLANT.secret).exists()
    for value in NAMED_SECRETS.values():  # under secret-named keys of tool-call arguments
        assert not Message.objects.filter(text__contains=value).exists(), value
        assert f"/sessions/{world.session.pk}/" not in as_viewer.get("/", {"q": value}).content.decode()
    assert Session.objects.get(pk=world.session.pk).masked_key == mask_text(MAIN_KEY)


# --------------------------------------------------------------------------- invisible characters


def test_invisible_characters_are_shown_as_markers():
    assert show_invisible("deploy \u202egnirts\u202c") == "deploy ⟨U+202E⟩gnirts⟨U+202C⟩"
    assert show_invisible("dep\u200bloy") == "dep⟨U+200B⟩loy"
    for char in "\u202a\u202b\u202c\u202d\u202e\u2066\u2067\u2068\u2069\u200b\u200c\u200d\u2060\ufeff\u00ad":
        assert show_invisible(char) == f"⟨U+{ord(char):04X}⟩"
    assert show_invisible("中文\t段落\n　全角") == "中文\t段落\n　全角"
    assert for_page(f"x\u200b{SECRET_KEY_PLANT.text}") == f"x⟨U+200B⟩{mask_text(SECRET_KEY_PLANT.text)}"


def test_invisible_characters_are_visible_in_pages(db, as_viewer):
    spoof = "deploy \u202egnirts\u202c dep\u200bloy"
    session = Session.objects.create(key="wechat:dep\u200bloy\u202e")  # a key stored before keys were checked
    session.append([{"role": "user", "content": spoof}])
    Session.objects.filter(pk=session.pk).update(metadata={"label": spoof})
    for url in (f"/sessions/{session.pk}/", "/"):
        page = as_viewer.get(url).content.decode()
        assert "\u202e" not in page and "\u200b" not in page, url
        assert "dep⟨U+200B⟩loy" in page
    page = as_viewer.get(f"/sessions/{session.pk}/").content.decode()
    assert "deploy ⟨U+202E⟩gnirts⟨U+202C⟩" in page


def test_admin_shows_raw_rows_only_to_staff_who_may_reveal(world):
    """The admin edits raw rows (a masked form value would be saved as a placeholder): reveal is required."""
    staff = User.objects.create_user("staff", password="pw", is_staff=True)
    client = Client()
    client.force_login(staff)
    assert client.get(f"/admin/console/session/{world.session.pk}/change/").status_code == 302
    admin = Client()
    admin.force_login(world.admin_user)
    form = admin.get(f"/admin/console/session/{world.session.pk}/change/").content.decode()
    assert f'value="{MAIN_KEY}"' in form  # the field round-trips the real key


def test_the_invisible_class_is_every_format_and_control_character():
    """INVISIBLE_CLASS is written out: it must still be what unicodedata says (a Python upgrade may add some)."""
    wanted = {
        chr(c)
        for c in range(0x110000)
        if not 0xD800 <= c < 0xE000 and unicodedata.category(chr(c)) in ("Cf", "Cc", "Zl", "Zp")
    }
    wanted = (wanted - set("\t\n\r")) | set("\u115f\u1160\u3164\uffa0")
    pattern = re.compile(f"[{INVISIBLE_CLASS}]")
    matched = {chr(c) for c in range(0x110000) if not 0xD800 <= c < 0xE000 and pattern.match(chr(c))}
    assert matched == wanted, sorted(f"U+{ord(c):04X}" for c in matched ^ wanted)[:20]


def test_flash_messages_are_masked(db):
    """A flash message (``Promoted: session <key> ...``, printed as ``{{ message }}``) is masked too."""
    from django.contrib.messages import constants
    from django.contrib.messages.storage.base import Message as Flash
    from django.template.loader import render_to_string

    html = render_to_string("base.html", {"messages": [Flash(constants.SUCCESS, f"Promoted: session {MAIN_KEY}")]})
    assert "Promoted: session ops:[secret:aws_key:" in html
    assert not leaks(html)


def test_objects_printed_by_their_str_are_masked(world):
    from django.template import engines

    html = (
        engines["django"]
        .from_string("{{ session }} {{ n }} {{ when|date:'Y' }}")
        .render({"session": world.session, "n": 1234, "when": world.session.created_at})
    )
    assert SECRET_KEY_PLANT.secret not in html and "[secret:aws_key:" in html
    assert "1234" in html


def test_worker_log_handlers_mask_too():
    """A Celery worker replaces the handlers settings.LOGGING installed; its own ones get the filter."""
    from console.celery import _mask_worker_logs

    stream = io.StringIO()
    logger = logging.getLogger("console.tests.worker")
    handler = logging.StreamHandler(stream)
    logger.addHandler(handler)
    try:
        _mask_worker_logs(logger)
        _mask_worker_logs(logger)  # once is enough
        assert sum(isinstance(f, MaskSecretsFilter) for f in handler.filters) == 1
        logger.error("task failed: %s", ALL_TEXT)
    finally:
        logger.removeHandler(handler)
    assert "task failed" in stream.getvalue() and not leaks(stream.getvalue())


def test_typed_text_is_masked_like_messages(world, as_viewer):
    """Focus topic (session runs table, run page, provenance), notes, comments, verdicts: masked as content is."""
    placeholder = mask_text(SECRET_KEY_PLANT.text)
    focus = f"focus {mask_text(ALL_TEXT)}"[:45]  # both pages cut it short
    assert focus.startswith("focus (private_key) [secret:private_key:")
    assert focus in as_viewer.get(f"/sessions/{world.session.pk}/").content.decode()  # the runs table
    assert focus in as_viewer.get(f"/runs/{world.run.pk}/").content.decode()
    run = World.api("get", f"/runs/{world.run.pk}", world.viewer_key).json()
    assert placeholder in run["focus_topic"] and placeholder in run["summary"]["provenance"]["focus_topic"]
    summary = World.api("get", f"/summaries/{world.summary.pk}", world.viewer_key).json()
    assert placeholder in summary["provenance"]["focus_topic"] and placeholder in summary["text"]
    case = World.api("get", f"/drift-cases/{world.case.pk}", world.viewer_key).json()
    assert placeholder in case["verdict"] and all(placeholder in c["body"] for c in case["comments"])
    assert placeholder in json.dumps(case["findings"])  # the note
    page = as_viewer.get(f"/drift/{world.case.pk}/").content.decode()
    assert page.count(f"(aws_key) {placeholder}") >= 3  # note, comments, verdict


# --------------------------------------------------------------------------- sorting is no oracle either

ORACLE_ALPHABET = "0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZ[]_-:"  # one page of the list (50) with the hidden key


def _recover_by_sorting(client: Client, hidden: Session, known: str, chars: int) -> str:
    """The attack of issue 33: create sessions whose keys are guesses and see where the hidden key sorts among
    them, one character at a time (about 18 probes for a 15-character prefix by bisection; all candidates at once
    here, so the database's collation decides). Returns the prefix the attacker recovers."""
    recovered = ""
    for _ in range(chars):
        probes = {
            create_session(ImportedSession(key=f"{known}{recovered}{c}", messages=HELLO, metadata={})).pk: c
            for c in ORACLE_ALPHABET
        }
        page = client.get("/", {"q": known, "scope": "key", "sort": "key", "order": "asc"}).content.decode()
        order = list(dict.fromkeys(int(pk) for pk in re.findall(r'href="/sessions/(\d+)/', page)))
        assert hidden.pk in order and set(probes) <= set(order), "the list must show the probes and the hidden key"
        before = [pk for pk in order[: order.index(hidden.pk)] if pk in probes]
        recovered += probes[before[-1]] if before else "?"
        Session.objects.filter(pk__in=probes).delete()
    return recovered


def test_sorting_by_key_is_not_an_oracle(db, login, monkeypatch):
    """Sorting sessions by key sorts on the key as the reader sees it: the guesses recover the placeholder's
    characters, not the secret's. Sorting on the raw key (as before issue 33) lets the same attack recover the
    secret, which shows the test can tell."""
    known = "oracle:"
    secret = "AKIAZ3ORACLEPLANT123"
    hidden = create_session(ImportedSession(key=f"{known}{secret}", messages=HELLO, metadata={}))
    assert Session.objects.get(pk=hidden.pk).masked_key, "the key must hold a secret the list masks"
    for role in ("viewer", "operator"):
        assert _recover_by_sorting(login(role), hidden, known, 4) != secret[:4], role
    monkeypatch.setattr("console.queries.key_order", lambda prefix="": F(f"{prefix}key"))
    assert _recover_by_sorting(login("viewer"), hidden, known, 4) == secret[:4]


def test_audit_values_are_masked_by_the_keys_they_sit_under(world):
    """An audit event's before/after (any JSON) is masked as a structure on the audit page and in the API."""
    from console.audit import audit

    audit(world.admin_user, "session.update", world.session, before={"metadata": {}}, after={"metadata": NAMED})
    admin = Client()
    admin.force_login(world.admin_user)
    page = admin.get("/audit/").content.decode()
    assert "session.update" in page and not leaks(page)
    events = world.api("get", "/audit-events", world.admin_key, action="session.update").content.decode()
    assert "session.update" in events and not leaks(events)


def test_no_field_of_the_api_is_masked_by_its_own_name():
    """The API masks every response by key name too: a field of its own named like a secret (``token_count`` is
    not, ``token`` would be) would come out as a placeholder. Only the webhook's signing ``secret`` (shown once,
    on purpose: ``reveal_this_response``) and the ``rotate_secret`` flag (input, a boolean) are."""
    from agent_compression.secret_names import is_secret_name

    schemas = api.get_openapi_schema(path_prefix="")["components"]["schemas"]
    fields = {name for schema in schemas.values() for name in (schema.get("properties") or {})}
    assert len(fields) > 50
    assert {name for name in fields if is_secret_name(name)} == {"secret", "rotate_secret"}
