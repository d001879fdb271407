"""Fixtures for page tests: a logged-in client per role, a compressed session with its archive and summary."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from django.contrib.auth.models import Group, Permission, User
from django.http import HttpResponse
from django.test import Client

from console import runs
from console.celery import tasks_inline
from console.importers import read_session_file
from console.models import Archive, CompressionRun, Session, Summary
from console.services import ImportedSession, create_session
from tests.fakes.openai_server import FakeOpenAIServer

SAMPLES = Path("/work/shared/samples")
#: small enough that the coding sample (41 messages, ~27k tokens) is really compressed
SMALL_WINDOW = {"context_window_tokens": 4000}
#: an API key as the secret masking recognises it
SECRET = "sk-proj-abcdefghijklmnopqrstuvwx1234"
#: the headers of an htmx request
HX = {"HX-Request": "true"}


def html_of(response: HttpResponse) -> str:
    return response.content.decode()


def superuser_client() -> Client:
    """A client logged in as a superuser (every permission, revealing secrets included)."""
    client = Client()
    client.force_login(User.objects.create_superuser("root", password="pw"))
    return client


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


def sample_session(name: str = "coding_export_job.json", *, key: str | None = None, **fields: Any) -> Session:
    data = read_session_file(SAMPLES / name)
    return create_session(
        ImportedSession(key=key or data.key, messages=data.messages, metadata=data.metadata, **fields)
    )


def compress_now(session: Session, **options: Any) -> CompressionRun:
    """Queue a run and execute it in-process as a worker would (drift checks run inline); the finished row."""
    options.setdefault("config", SMALL_WINDOW)
    with tasks_inline():
        run, _ = runs.request_compression(session.key, **options)
        runs.execute_run(run.pk)
    run.refresh_from_db()
    return run


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
