"""Project-wide checks: Django's system checks, migrations, the compose file."""

import shutil
import subprocess
from io import StringIO
from pathlib import Path

import pytest
from django.core.management import call_command

ROOT = Path(__file__).resolve().parents[2]


def test_it_passes_django_checks():
    out = StringIO()
    call_command("check", stdout=out)
    assert "no issues" in out.getvalue()


@pytest.mark.django_db
def test_it_has_no_missing_migrations():
    # raises SystemExit(1) when a model change has no migration
    call_command("makemigrations", "--check", "--dry-run", stdout=StringIO())


def test_it_has_a_valid_compose_file(tmp_path):
    compose = shutil.which("docker-compose")
    if compose is None:
        pytest.fail("docker-compose (Debian package) is needed to validate docker-compose.yml")
    for name in ("docker-compose.yml", "Dockerfile"):
        shutil.copy(ROOT / name, tmp_path / name)
    shutil.copy(ROOT / ".env.example", tmp_path / ".env")
    result = subprocess.run(
        [compose, "-f", str(tmp_path / "docker-compose.yml"), "config", "-q"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode == 0, result.stderr


def test_it_documents_every_setting_in_env_example():
    example = (ROOT / ".env.example").read_text()
    readme = (ROOT / "README.md").read_text()
    for name in (
        "DATABASE_URL",
        "REDIS_URL",
        "SECRET_KEY",
        "DEBUG",
        "ALLOWED_HOSTS",
        "OPENAI_BASE_URL",
        "OPENAI_API_KEY",
        "SUMMARY_MODEL",
        "SUMMARY_COOLDOWN_SECONDS",
        "AUTO_COMPRESS",
        "RUN_STALE_SECONDS",
        "RUN_MAX_ATTEMPTS",
        "DRIFT_CASE_MIN_SEVERITY",
        "RECOVERY_SWEEP_SECONDS",
        "RUN_QUEUED_RESEND_SECONDS",
        "RESEND_MAX_SECONDS",
        "BROKER_SEND_TIMEOUT",
        "COOLDOWN_WAIT_MAX_SECONDS",
        "MAX_COMPRESS_WAITERS",
        "DATABASE_RETRY_AFTER_SECONDS",
    ):
        assert f"{name}=" in example
        assert f"`{name}`" in readme
