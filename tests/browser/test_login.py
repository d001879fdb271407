import pytest
from django.contrib.auth.models import Group, User
from playwright.sync_api import expect

from console.services.sessions import ImportedSession, create_session

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


def test_it_logs_in_and_sees_the_sessions(live_server, page, screenshot):
    user = User.objects.create_user("operator1", password="a-long-test-password")
    user.groups.add(Group.objects.get(name="operator"))
    create_session(
        ImportedSession(
            key="wechat:wxid_browser",
            messages=[{"role": "user", "content": "<img src=x onerror=alert(1)>先不要修改部署脚本"}],
            metadata={"channel": "wechat"},
        )
    )
    dialogs = []
    page.on("dialog", lambda d: (dialogs.append(d.message), d.dismiss()))
    page.goto(f"{live_server.url}/")
    expect(page).to_have_url(f"{live_server.url}/login/?next=/")
    screenshot("login-en")
    page.fill("#id_username", "operator1")
    page.fill("#id_password", "a-long-test-password")
    page.click("button[type=submit]")
    expect(page.get_by_role("heading", name="Sessions")).to_be_visible()
    expect(page.get_by_text("wechat:wxid_browser")).to_be_visible()
    screenshot("sessions-en")
    page.select_option("#language", "zh-hans")
    expect(page.get_by_role("heading", name="会话")).to_be_visible()
    screenshot("sessions-zh")
    assert page.evaluate("typeof htmx") == "object"
    assert dialogs == []
