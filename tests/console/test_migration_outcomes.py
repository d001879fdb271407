"""Migration 0008 re-labels stored runs that compressed nothing and undoes stops earned by override runs."""

from __future__ import annotations

import pytest
from django.db import connection
from django.db.migrations.executor import MigrationExecutor

BEFORE = [("console", "0007_notifications")]
AFTER = [("console", "0008_outcomes_provenance")]


@pytest.fixture
def latest_schema_after():
    """The test walks the schema back to 0007; the tests after it (same database) need every migration."""
    yield
    executor = MigrationExecutor(connection)
    executor.migrate(executor.loader.graph.leaf_nodes())


@pytest.mark.django_db(transaction=True)
@pytest.mark.usefixtures("latest_schema_after")
def test_0008_relabels_unchanged_runs_and_restarts_sessions_stopped_under_their_trigger():
    executor = MigrationExecutor(connection)
    executor.migrate(BEFORE)
    apps = executor.loader.project_state(BEFORE).apps
    Session = apps.get_model("console", "Session")
    Run = apps.get_model("console", "CompressionRun")
    small = Session.objects.create(
        key="s:small", token_count=1233, auto_compression_stopped=True, ineffective_compressions=2
    )
    big = Session.objects.create(
        key="s:big",
        token_count=1900,
        context_window_tokens=2000,
        auto_compression_stopped=True,
        ineffective_compressions=2,
    )
    nothing = [{"code": "nothing_to_compress", "message": "nothing to compress: no middle segment"}]
    over = nothing + [{"code": "still_over_threshold", "message": "1900 tokens left, trigger is 1400"}]
    quiet = Run.objects.create(session=small, trigger="manual", status="degraded", warnings=nothing)
    stuck = Run.objects.create(session=big, trigger="manual", status="degraded", warnings=over)
    reported = Run.objects.create(session=small, trigger="reported", status="succeeded")
    done = Run.objects.create(session=small, trigger="manual", status="succeeded", was_compressed=True, applied=True)

    executor = MigrationExecutor(connection)
    executor.migrate(AFTER)
    apps = executor.loader.project_state(AFTER).apps
    Session = apps.get_model("console", "Session")
    Run = apps.get_model("console", "CompressionRun")
    status = dict(Run.objects.values_list("pk", "status"))
    assert status[quiet.pk] == "nothing" and status[reported.pk] == "nothing"
    assert status[stuck.pk] == "degraded" and status[done.pk] == "succeeded"
    small, big = Session.objects.get(key="s:small"), Session.objects.get(key="s:big")
    assert not small.auto_compression_stopped and small.ineffective_compressions == 0
    assert big.auto_compression_stopped  # over its own trigger: a stop it earned
