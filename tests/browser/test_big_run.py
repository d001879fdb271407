"""A 5,000-message run: the run page keeps the DOM small and stays usable (collapsed stretches load on demand)."""

from __future__ import annotations

from typing import Any

import pytest
from django.contrib.auth.models import Group, User
from playwright.sync_api import Page, expect

from bench.diff import make_messages
from console.models import CompressionRun
from console.services.sessions import ImportedSession, create_session
from tests.console.factories import compress_now

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

#: the diff's worst case: a long tail whose old tool output was pruned (hundreds of changed rows)
CONFIG = {"context_window_tokens": 128_000, "tail_tokens": 96_000, "prune_protect_tokens": 4_000}


def test_it_renders_a_5000_message_run_without_flooding_the_page(live_server: Any, page: Page, screenshot: Any) -> None:
    session = create_session(ImportedSession(key="bench:big", messages=make_messages(5000), metadata={}))
    run = compress_now(session, config=CONFIG)
    assert run.status == CompressionRun.Status.SUCCEEDED and len(run.input_keys) >= 5000, run.error
    user = User.objects.create_user("viewer1", password="pw-viewer-1")
    user.groups.add(Group.objects.get(name="viewer"))
    errors: list[str] = []
    page.on("pageerror", lambda exc: errors.append(str(exc)))

    page.goto(f"{live_server.url}/login/?next=/runs/{run.pk}/")
    page.fill("#id_username", "viewer1")
    page.fill("#id_password", "pw-viewer-1")
    page.click("button[type=submit]")
    expect(page.locator("#diff")).to_be_visible()
    nodes = page.evaluate("document.getElementsByTagName('*').length")
    assert nodes < 15_000, f"{nodes} elements for a 5,000-message run"
    screenshot("run-5000-en")

    # stepping through changes and opening a collapsed stretch still work
    page.keyboard.press("j")
    expect(page.locator("[data-nav].nav-current")).to_have_count(1)
    shown = page.locator(".msg").count()
    page.locator("a.dfold-button").first.click()
    expect(page.locator(".msg")).not_to_have_count(shown)
    assert page.locator(".msg").count() > shown
    print(f"{nodes} elements; {shown} messages shown before expanding, {page.locator('.msg').count()} after")
    assert errors == []
