"""A wrong environment value stops start-up with a message naming the variable."""

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


def start_django(**env: str) -> subprocess.CompletedProcess:
    full_env = {k: v for k, v in os.environ.items() if k not in {"DATABASE_URL", "REDIS_URL", "DEBUG"}}
    full_env.update(env)
    return subprocess.run(
        [sys.executable, "manage.py", "check"], cwd=ROOT, env=full_env, capture_output=True, text=True, timeout=60
    )


@pytest.mark.parametrize(
    ("env", "named"),
    [
        ({"DEBUG": "maybe"}, "DEBUG"),
        ({"DATABASE_URL": "postgres//nohost"}, "DATABASE_URL"),
        ({"DATABASE_URL": "mongodb://localhost/db"}, "DATABASE_URL"),
        ({"REDIS_URL": "localhost:6379"}, "REDIS_URL"),
        ({"OPENAI_BASE_URL": "not a url"}, "OPENAI_BASE_URL"),
        ({"MAX_REQUEST_BYTES": "lots"}, "MAX_REQUEST_BYTES"),
        ({"SUMMARY_TIMEOUT": "-1"}, "SUMMARY_TIMEOUT"),
        ({"DRIFT_CASE_MIN_SEVERITY": "urgent"}, "DRIFT_CASE_MIN_SEVERITY"),
        ({"AUTO_COMPRESS": "sometimes"}, "AUTO_COMPRESS"),
        ({"DEBUG": "false"}, "SECRET_KEY"),
        ({"API_RATE_LIMIT": "lots"}, "API_RATE_LIMIT"),
        ({"API_AUTH_FAILURE_LIMIT": "5/fortnight"}, "API_AUTH_FAILURE_LIMIT"),
    ],
)
def test_it_refuses_to_start_with_a_bad_value(env, named):
    result = start_django(**env)
    assert result.returncode != 0
    last_line = result.stderr.strip().splitlines()[-1]
    assert "ImproperlyConfigured" in last_line
    assert named in last_line


def test_it_starts_with_the_embedded_defaults(tmp_path):
    result = start_django(VAR_DIR=str(tmp_path))
    assert result.returncode == 0, result.stderr
    assert (tmp_path / "console.sqlite3").exists() or "no issues" in result.stdout


def test_it_uses_the_filesystem_broker_without_redis(settings):
    if settings.REDIS_URL:
        assert settings.CELERY_BROKER_URL == settings.REDIS_URL
    else:
        assert settings.CELERY_BROKER_URL == "filesystem://"
        options = settings.CELERY_BROKER_TRANSPORT_OPTIONS
        assert options["data_folder_in"] == options["data_folder_out"]
