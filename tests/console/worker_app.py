"""The console's Celery app for worker processes started by tests (``celery -A tests.console.worker_app worker``).

The same app as production, with one change: tasks the worker sends itself (a drift check after a
run, say) go to ``TEST_CELERY_QUEUE``, the queue that test's worker consumes, not to the shared
default queue that nothing consumes during the tests.
"""

from __future__ import annotations

import os

from console.celery import app

if os.environ.get("TEST_CELERY_QUEUE"):
    app.conf.task_default_queue = os.environ["TEST_CELERY_QUEUE"]

__all__ = ["app"]
