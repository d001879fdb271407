"""Headers (issue 14, item 9): CSP without inline script, Permissions-Policy, no caching of session content,
HSTS and the SSL redirect in production, and `check --deploy` clean with production settings."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
from django.test import Client

from tests.console.test_api import Api, issue_key

ROOT = Path(__file__).resolve().parents[2]
PRODUCTION = {
    "DEBUG": "false",
    "SECRET_KEY": "x9-production-like-secret-" + "k" * 40,
    "ALLOWED_HOSTS": "console.example.com",
    "SECURE_COOKIES": "true",
}


def directives(response) -> dict[str, list[str]]:
    policy = response["Content-Security-Policy"]
    return {part.split()[0]: part.split()[1:] for part in policy.split(";") if part.strip()}


@pytest.mark.django_db
def test_pages_send_a_content_security_policy_without_inline_script(as_operator):
    for response in (Client().get("/login/"), as_operator.get("/")):
        assert response.status_code == 200
        policy = directives(response)
        assert policy["script-src"] == ["'self'"]
        assert policy["object-src"] == ["'none'"]
        assert policy["frame-ancestors"] == ["'none'"]
        assert "'unsafe-inline'" not in policy["style-src"]
        assert "'unsafe-eval'" not in " ".join(sum(policy.values(), []))


def test_no_template_holds_inline_script_or_event_handlers():
    """The policy refuses them, so they would silently stop working: behaviour lives in static/js."""
    found = []
    for path in sorted((ROOT / "templates").rglob("*.html")):
        text = path.read_text(encoding="utf-8")
        for match in re.finditer(r"<script\b[^>]*>", text):
            tag = match.group()
            if "src=" not in tag and 'type="application/json"' not in tag:
                found.append(f"{path.name}: {tag}")
        for match in re.finditer(r"\s(on[a-z]+|hx-on[:\w-]*)=", text):
            found.append(f"{path.name}: {match.group().strip()}")
        if "javascript:" in text:
            found.append(f"{path.name}: javascript: URL")
    assert found == []


def test_htmx_is_told_not_to_eval_nor_inject_its_indicator_styles():
    base = (ROOT / "templates" / "base.html").read_text(encoding="utf-8")
    assert '"allowEval":false' in base and '"includeIndicatorStyles":false' in base


@pytest.mark.django_db
def test_every_answer_has_a_permissions_policy_and_api_answers_are_not_stored(as_operator):
    viewer = Api(issue_key("reader", "viewer"))
    for response in (viewer.get("/sessions"), Api().get("/sessions"), as_operator.get("/"), Client().get("/login/")):
        assert "camera=()" in response["Permissions-Policy"]
        assert "no-store" in response["Cache-Control"]
        assert response["X-Content-Type-Options"] == "nosniff"


def _production(*args: str, **env: str) -> subprocess.CompletedProcess:
    # the browser tests' DJANGO_ALLOW_ASYNC_UNSAFE (set in this process when they run first) is no production setting
    dropped = {"DEBUG", "SECRET_KEY", "ALLOWED_HOSTS", "DJANGO_ALLOW_ASYNC_UNSAFE"}
    full = {k: v for k, v in os.environ.items() if k not in dropped}
    full |= PRODUCTION | env
    return subprocess.run(
        [sys.executable, "manage.py", *args], cwd=ROOT, env=full, capture_output=True, text=True, timeout=120
    )


def test_check_deploy_is_clean_with_production_settings(tmp_path):
    result = _production("check", "--deploy", "--fail-level", "WARNING", VAR_DIR=str(tmp_path))
    assert result.returncode == 0, result.stdout + result.stderr
    assert "no issues" in result.stdout


def test_production_settings_turn_on_hsts_and_the_ssl_redirect(tmp_path):
    code = (
        "from django.conf import settings as s; "
        "print(s.SECURE_SSL_REDIRECT, s.SECURE_HSTS_SECONDS, s.SECURE_HSTS_INCLUDE_SUBDOMAINS, s.SESSION_COOKIE_SECURE)"
    )
    result = _production("shell", "-c", code, VAR_DIR=str(tmp_path))
    assert result.stdout.splitlines()[-1].split() == ["True", "31536000", "True", "True"], result.stderr
    plain = _production("shell", "-c", code, VAR_DIR=str(tmp_path), SECURE_COOKIES="false")
    assert plain.stdout.splitlines()[-1].split() == ["False", "0", "False", "False"], plain.stderr


def test_hsts_is_sent_and_plain_http_redirected_except_healthz(settings, db):
    settings.SECURE_SSL_REDIRECT = True
    settings.SECURE_HSTS_SECONDS = 31_536_000
    settings.SECURE_REDIRECT_EXEMPT = [r"^healthz$"]
    settings.SECURE_PROXY_SSL_HEADER = ("HTTP_X_FORWARDED_PROTO", "https")
    assert Client().get("/login/").status_code == 301
    secure = Client().get("/login/", headers={"X-Forwarded-Proto": "https"})
    assert secure["Strict-Transport-Security"].startswith("max-age=31536000")
    assert Client().get("/healthz").status_code in (200, 503)
