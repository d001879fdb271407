"""Headless Chromium (Debian's package) driven by Playwright against pytest-django's live_server."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest
from playwright.sync_api import Locator, expect

from tests.console.workers import celery_worker, default_queue, unique_queue, worker_env
from tests.fakes.openai_server import FakeOpenAIServer

os.environ.setdefault("DJANGO_ALLOW_ASYNC_UNSAFE", "true")

CHROMIUM = os.environ.get("CHROMIUM_PATH", "/usr/bin/chromium")
SCREENSHOTS = Path(__file__).resolve().parents[2] / "artifacts" / "screenshots"

# expect() waits 5 s by default, whatever page.set_default_timeout says: too short on a loaded machine (or
# beside other xdist workers) for a run the Celery worker finishes; what each assertion checks is unchanged
expect.set_options(timeout=30_000)


@pytest.fixture(scope="session")
def browser_type_launch_args(browser_type_launch_args):
    if not Path(CHROMIUM).exists():
        pytest.fail(f"Chromium not found at {CHROMIUM}: apt-get install -y chromium (or set CHROMIUM_PATH)")
    return {
        **browser_type_launch_args,
        "executable_path": CHROMIUM,
        "args": [
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--disable-background-networking",
            "--disable-component-update",
            "--disable-sync",
            "--no-first-run",
        ],
    }


#: ``make screenshots`` (SCREENSHOTS=1) saves them; a plain test run skips them: a full-page PNG of a long
#: page costs Chromium more than the test's own checks (31 s of the browser tests' 108 s), and none is asserted
TAKE_SCREENSHOTS = os.environ.get("SCREENSHOTS", "") not in {"", "0"}


@pytest.fixture
def screenshot(page):
    """``screenshot(name)``: the whole page, under artifacts/screenshots/ (``make screenshots``).

    ``full_page=False`` keeps what the viewport shows; ``of=locator`` one element.
    """

    def take(name: str, *, full_page: bool = True, of: Locator | None = None) -> None:
        if not TAKE_SCREENSHOTS:
            return
        SCREENSHOTS.mkdir(parents=True, exist_ok=True)
        path = str(SCREENSHOTS / f"{name}.png")
        if of is not None:
            of.screenshot(path=path)
        else:
            page.screenshot(path=path, full_page=full_page)

    return take


@pytest.fixture(scope="module")
def model() -> Iterator[FakeOpenAIServer]:
    """The fake OpenAI-compatible model on loopback, shared by a module's tests (``reset()`` it in each)."""
    with FakeOpenAIServer() as server:
        yield server


@pytest.fixture(scope="module")
def worker(django_db_setup: None, model: FakeOpenAIServer) -> Iterator[None]:
    """A real Celery worker on a queue of its own, summarizing with ``model``; what the tests send goes to it."""
    queue = unique_queue()
    with celery_worker(worker_env(model, SUMMARY_TIMEOUT="20"), queue), default_queue(queue):
        yield
