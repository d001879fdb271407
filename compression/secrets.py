"""Mask secrets (API keys, tokens, passwords, private keys) before text leaves the process.

The same secret always maps to the same placeholder, ``[secret:<kind>:<hash8>]``,
so two masked versions of a history (before and after compression) still line
up in a diff, and an operator can tell two different keys apart without seeing
either. Each pattern only runs when a cheap literal pre-check finds its prefix,
so masking a large text that holds no secret costs a few substring searches.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Callable

_PLACEHOLDER = re.compile(r"\[secret:[a-z_]+:[0-9a-f]{8}\]")


def secret_placeholder(kind: str, secret: str) -> str:
    """The placeholder that stands for ``secret`` (stable across calls and processes)."""
    digest = hashlib.sha256(secret.encode("utf-8", "surrogatepass")).hexdigest()[:8]
    return f"[secret:{kind}:{digest}]"


def _whole(kind: str) -> Callable[[re.Match[str]], str]:
    def replace(match: re.Match[str]) -> str:
        return secret_placeholder(kind, match.group(0))

    return replace


def _group(kind: str, name: str = "secret") -> Callable[[re.Match[str]], str]:
    """Replace only the named group, keeping the key name / scheme around it."""

    def replace(match: re.Match[str]) -> str:
        value = match.group(name)
        if _PLACEHOLDER.fullmatch(value) or not value:
            return match.group(0)
        start, end = match.start(name) - match.start(0), match.end(name) - match.start(0)
        whole = match.group(0)
        return whole[:start] + secret_placeholder(kind, value) + whole[end:]

    return replace


# (pre-check substrings, lower-cased pre-check?, pattern, replacement)
_RULES: list[tuple[tuple[str, ...], bool, re.Pattern[str], Callable[[re.Match[str]], str]]] = [
    (
        ("-----BEGIN",),
        False,
        re.compile(
            r"-----BEGIN (?:[A-Z0-9]+ )*PRIVATE KEY-----.*?(?:-----END (?:[A-Z0-9]+ )*PRIVATE KEY-----|\Z)", re.S
        ),
        _whole("private_key"),
    ),
    (
        ("sk-",),
        False,
        re.compile(r"(?<![A-Za-z0-9_-])sk-(?:proj-|ant-|live-|test-)?[A-Za-z0-9_\-]{16,}"),
        _whole("api_key"),
    ),
    (("ghp_", "gho_", "ghs_", "ghu_", "ghr_"), False, re.compile(r"\bgh[pousr]_[A-Za-z0-9]{20,}"), _whole("github")),
    (("github_pat_",), False, re.compile(r"\bgithub_pat_[A-Za-z0-9_]{20,}"), _whole("github")),
    (("xox",), False, re.compile(r"\bxox[bpasr]-[A-Za-z0-9-]{10,}"), _whole("slack")),
    (("AKIA", "ASIA"), False, re.compile(r"\b(?:AKIA|ASIA)[0-9A-Z]{16}\b"), _whole("aws_key")),
    (("AIza",), False, re.compile(r"\bAIza[0-9A-Za-z_\-]{35}"), _whole("google_key")),
    (
        ("eyJ",),
        False,
        re.compile(r"\beyJ[A-Za-z0-9_-]{8,}\.eyJ[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]{8,}"),
        _whole("jwt"),
    ),
    (
        ("bearer",),
        True,
        re.compile(r"(?i)\bbearer\s+(?P<secret>[A-Za-z0-9_\-.~+/]{12,}=*)"),
        _group("bearer"),
    ),
    (
        ("://",),
        False,
        re.compile(r"\b[a-zA-Z][a-zA-Z0-9+.-]*://[^\s:/@]+:(?P<secret>[^\s@/]{3,})@"),
        _group("url_password"),
    ),
    (
        ("pass", "pwd", "token", "secret", "key", "auth", "credential", "密码", "口令"),
        True,
        re.compile(
            r"(?i)(?:(?<![\[:\w])(?:[a-z0-9_]*?(?:password|passwd|pwd|token|secret|api[_-]?key|access[_-]?key|private[_-]?key"
            r"|client[_-]?secret|auth|credentials?))|密码|口令)"
            r"""["']?\s*(?:=|:|：)\s*["']?(?P<secret>[^\s"',;]{4,})"""
        ),
        _group("password"),
    ),
]


def mask_secrets(text: str) -> str:
    """Replace every secret in ``text`` with a stable ``[secret:<kind>:<hash8>]`` placeholder.

    Masks OpenAI-style keys (``sk-``, ``sk-proj-``), GitHub and Slack tokens,
    AWS access key ids, Google API keys, JWTs, ``Bearer`` tokens, private key
    blocks, passwords in URLs (``user:pass@host``) and ``password=`` /
    ``token:`` / ``api_key=`` style values. Idempotent: masking twice gives the
    same text.
    """
    if not text:
        return text
    lowered: str | None = None
    for needles, needs_lower, pattern, replace in _RULES:
        if needs_lower:
            if lowered is None:
                lowered = text.lower()
            haystack = lowered
        else:
            haystack = text
        if not any(n in haystack for n in needles):
            continue
        new_text = pattern.sub(replace, text)
        if new_text is not text and new_text != text:
            text = new_text
            lowered = None
    return text


def contains_secret(text: str) -> bool:
    """Whether :func:`mask_secrets` would change ``text``."""
    return mask_secrets(text) != text
