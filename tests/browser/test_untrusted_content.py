"""Message content is shown as text on every page and runs nothing, checked in a real browser."""

from __future__ import annotations

import json
from typing import Any

import pytest
from django.contrib.auth.models import Group, User
from playwright.sync_api import Page, expect

from console.models import CompressionRun, Summary
from console.services.sessions import ImportedSession, create_session
from tests.console.factories import compress_now

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

SCRIPT = "<script>window.__xss = 'script'</script>"
IMG = "<img src=x onerror=\"window.__xss = 'img'\">"


def hostile_history() -> list[dict[str, Any]]:
    """A coding session whose every part (user text, tool arguments, tool output) carries HTML payloads."""
    messages: list[dict[str, Any]] = [{"role": "system", "content": "You are a coding agent."}]
    for i in range(12):
        call = {"id": f"call_{i}", "type": "function", "function": {"name": "read_file"}}
        call["function"]["arguments"] = json.dumps({"path": f"src/{IMG}{i}.py"})
        messages += [
            {"role": "user", "content": f"step {i}: 先不要修改部署脚本 {SCRIPT} {IMG}"},
            {"role": "assistant", "content": None, "tool_calls": [call]},
            {"role": "tool", "tool_call_id": f"call_{i}", "content": f"{SCRIPT}\n" + f"line {i} {IMG}\n" * 150},
            {"role": "assistant", "content": f"Read it. {IMG} Next step."},
        ]
    messages.append({"role": "user", "content": f"final question {SCRIPT}"})
    return messages


def test_it_shows_html_in_messages_as_text_and_runs_none_of_it(live_server: Any, page: Page) -> None:
    session = create_session(
        ImportedSession(key="web:<b onclick=alert(1)>hostile", messages=hostile_history(), metadata={})
    )
    run = compress_now(session, config={"context_window_tokens": 3000})
    assert run.status == CompressionRun.Status.SUCCEEDED, run.error
    summary = Summary.objects.get(run=run)
    user = User.objects.create_user("viewer1", password="pw-viewer-1")
    user.groups.add(Group.objects.get(name="viewer"))

    dialogs: list[str] = []
    page.on("dialog", lambda d: (dialogs.append(d.message), d.dismiss()))
    page.goto(f"{live_server.url}/login/")
    page.fill("#id_username", "viewer1")
    page.fill("#id_password", "pw-viewer-1")
    page.click("button[type=submit]")

    for path in [
        "/?q=hostile",
        f"/sessions/{session.pk}/",
        f"/runs/{run.pk}/",
        f"/runs/{run.pk}/?view=unified",
        f"/summaries/{summary.pk}/",
        f"/archives/{summary.archive_id}/",
    ]:
        page.goto(live_server.url + path)
        page.wait_for_load_state("networkidle")
        # load what the page loads on demand (collapsed diff blocks, "show the rest"), a few rounds deep
        for _ in range(3):
            clicked = page.evaluate(
                "() => { const links = [...document.querySelectorAll('a.more, a.dfold-button')];"
                " links.forEach(a => a.click()); return links.length; }"
            )
            page.wait_for_function("() => !document.querySelector('.htmx-request, .htmx-settling, .htmx-swapping')")
            page.wait_for_timeout(100)  # htmx wires up swapped-in links right after settling
            if not clicked:
                break
        assert page.evaluate("window.__xss") is None, path
        assert page.locator("img[src=x]").count() == 0, path
        assert page.locator("script:not([src])").count() == 0, path
        body = page.locator("main").inner_text()
        assert "<script>" in body or "<img" in body or "<b onclick=" in body, path
    expect(page.locator("main")).to_contain_text("<img src=x onerror=")
    assert dialogs == []
