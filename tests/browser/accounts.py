"""Users with a known password, and logging them in through the real login form."""

from __future__ import annotations

import re

from django.contrib.auth.models import Group, User
from playwright.sync_api import Page, expect

PASSWORD = "a-long-test-password"


def user(name: str, *roles: str) -> User:
    """A user in the given role groups, with :data:`PASSWORD`."""
    made = User.objects.create_user(name, password=PASSWORD)
    made.groups.add(*Group.objects.filter(name__in=roles))
    return made


def log_in(page: Page, base: str, username: str) -> None:
    page.goto(f"{base}/login/")
    page.fill("#id_username", username)
    page.fill("#id_password", PASSWORD)
    page.click("button[type=submit]")
    expect(page.get_by_role("heading", name=re.compile("Sessions|会话"))).to_be_visible()
