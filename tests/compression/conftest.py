"""Fixtures for the compression tests: an OpenAI-compatible fake server on loopback."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.fakes.openai_server import FakeOpenAIServer


@pytest.fixture
def fake_openai() -> Iterator[FakeOpenAIServer]:
    """A fresh fake server per test (answers ``ok`` unless scripted otherwise)."""
    with FakeOpenAIServer() as server:
        yield server
