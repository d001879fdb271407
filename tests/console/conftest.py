"""Fixtures for page tests: a logged-in client per role, a compressed session with its archive and summary."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from django.contrib.auth.models import Group, Permission, User
from django.test import Client

from console.models import Archive, CompressionRun, Summary
from tests.console.factories import compress_now, sample_session, superuser_client
from tests.fakes.openai_server import FakeOpenAIServer


@pytest.fixture
def login(db) -> Callable[..., Client]:
    """``login("operator")``: a client logged in as a new user in that role ("" for no role at all)."""
    made = 0

    def make(role: str = "", *, perms: tuple[str, ...] = ()) -> Client:
        nonlocal made
        made += 1
        user = User.objects.create_user(f"{role or 'nobody'}{made}", password="pw")
        if role:
            user.groups.add(Group.objects.get(name=role))
        for perm in perms:
            app_label, codename = perm.split(".")
            user.user_permissions.add(Permission.objects.get(content_type__app_label=app_label, codename=codename))
        client = Client()
        client.force_login(user)
        client.user = user  # type: ignore[attr-defined]
        return client

    return make


@pytest.fixture
def as_viewer(login) -> Client:
    return login("viewer")


@pytest.fixture
def as_operator(login) -> Client:
    return login("operator")


@pytest.fixture
def as_reviewer(login) -> Client:
    return login("reviewer")


@pytest.fixture
def superuser(db) -> Client:
    return superuser_client()


@pytest.fixture
def compressed_run(db) -> CompressionRun:
    """The coding sample, compressed once with the offline summarizer: a run with an archive and a summary."""
    run = compress_now(sample_session())
    assert run.status == CompressionRun.Status.SUCCEEDED and run.applied, run.error
    return run


@pytest.fixture
def archive(compressed_run: CompressionRun) -> Archive:
    """The archive of ``compressed_run``."""
    return Archive.objects.select_related("session").get(run=compressed_run)


@pytest.fixture
def active(archive: Archive) -> Summary:
    """The summary of ``archive`` that is in the live session."""
    return archive.summaries.get(status=Summary.Status.ACTIVE)


@pytest.fixture
def model(fake_openai: FakeOpenAIServer, settings: Any) -> FakeOpenAIServer:
    """The fake model as the summarizer endpoint: short timeout, no retries, no cooldown unless a 429 asks."""
    settings.OPENAI_BASE_URL = fake_openai.base_url
    settings.OPENAI_API_KEY = "test"
    settings.SUMMARY_TIMEOUT = 0.5
    settings.SUMMARY_MAX_RETRIES = 0
    settings.SUMMARY_COOLDOWN_SECONDS = 0
    return fake_openai
