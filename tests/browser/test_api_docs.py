import pytest
from playwright.sync_api import expect

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


def test_the_api_docs_render_offline(live_server, page, screenshot):
    outside = []
    page.on("request", lambda r: outside.append(r.url) if not r.url.startswith(live_server.url) else None)
    page.goto(f"{live_server.url}/api/v1/docs")
    expect(page.get_by_text("Compression console API")).to_be_visible()
    expect(page.locator(".opblock").first).to_be_visible()
    assert page.locator(".opblock").count() >= 14
    expect(page.get_by_text("/api/v1/sessions/{key}/compress")).to_be_visible()
    screenshot("api-docs")
    assert outside == [], "the docs must not load anything from outside (no CDN)"
