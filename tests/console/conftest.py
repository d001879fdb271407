"""Fixtures for page tests: a logged-in client per role, and a session that has been compressed."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from django.contrib.auth.models import Group, Permission, User
from django.test import Client

from console import runs
from console.celery import tasks_inline
from console.importers import read_session_file
from console.models import CompressionRun, Session
from console.services import ImportedSession, create_session

SAMPLES = Path("/work/shared/samples")
#: small enough that the coding sample (41 messages, ~27k tokens) is really compressed
SMALL_WINDOW = {"context_window_tokens": 4000}


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
