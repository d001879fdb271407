"""Test data helpers shared by the console and browser tests (plain functions; the fixtures are in conftest)."""

from __future__ import annotations

from typing import Any

from django.contrib.auth.models import User
from django.http import HttpResponse
from django.test import Client

from console.celery import tasks_inline
from console.importers import read_session_file
from console.models import CompressionRun, Session
from console.services import runs
from console.services.sessions import ImportedSession, create_session
from tests.samples import CODING, sample_path

#: small enough that the coding sample (41 messages, ~39k tokens) is really compressed
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


def sample_session(name: str = CODING, *, key: str | None = None, user: Any = None, **fields: Any) -> Session:
    """A session imported from one of the sample files (``user``: who imports it)."""
    data = read_session_file(sample_path(name))
    return create_session(
        ImportedSession(key=key or data.key, messages=data.messages, metadata=data.metadata, **fields), user=user
    )


def compress_now(session: Session, **options: Any) -> CompressionRun:
    """Queue a run and execute it in-process as a worker would (drift checks run inline); the finished row."""
    options.setdefault("config", SMALL_WINDOW)
    with tasks_inline():
        run, _ = runs.request_compression(session.key, **options)
        runs.execute_run(run.pk)
    run.refresh_from_db()
    return run
