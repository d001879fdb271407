"""Celery clients the tests use to send tasks to worker processes they started."""

from __future__ import annotations

from pathlib import Path

from celery import Celery


def filesystem_client(var_dir: Path) -> Celery:
    """A client for the filesystem broker and file result backend a worker with ``VAR_DIR=var_dir`` uses."""
    broker_dir = var_dir / "celery-broker"
    for folder in (broker_dir, broker_dir / "control", var_dir / "celery-results"):
        folder.mkdir(parents=True, exist_ok=True)
    return Celery(
        "test-client",
        set_as_current=False,  # else the tasks the test process sends with .delay() would go through it
        broker="filesystem://",
        backend=f"file://{var_dir / 'celery-results'}",
        broker_transport_options={
            "data_folder_in": str(broker_dir),
            "data_folder_out": str(broker_dir),
            "control_folder": str(broker_dir / "control"),
        },
    )
