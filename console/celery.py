"""Celery app, wired the Django way: `celery -A console worker` starts a worker."""

import os
from collections.abc import Iterator
from contextlib import contextmanager

from celery import Celery, signals

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "console.settings")

app = Celery("console")
app.config_from_object("django.conf:settings", namespace="CELERY")
app.autodiscover_tasks()


@app.on_after_configure.connect
def _make_local_folders(sender: Celery, **kwargs: object) -> None:
    # The filesystem broker and file result backend need their folders to exist.
    from django.conf import settings

    if not settings.REDIS_URL:
        settings.CELERY_BROKER_DIR.mkdir(parents=True, exist_ok=True)
        settings.CELERY_RESULTS_DIR.mkdir(parents=True, exist_ok=True)


@signals.after_setup_logger.connect
@signals.after_setup_task_logger.connect
def _mask_worker_logs(logger: object, **kwargs: object) -> None:
    # a worker replaces the handlers settings.LOGGING installed: its own ones mask too
    from .log_masking import MaskSecretsFilter

    for handler in getattr(logger, "handlers", []):
        if not any(isinstance(f, MaskSecretsFilter) for f in handler.filters):
            handler.addFilter(MaskSecretsFilter())


@contextmanager
def tasks_inline() -> Iterator[None]:
    """Run tasks in this process as they are sent, not through the broker (setup commands, tests)."""
    before = app.conf.task_always_eager
    app.conf.task_always_eager = True
    try:
        yield
    finally:
        app.conf.task_always_eager = before
