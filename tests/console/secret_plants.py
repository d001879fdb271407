"""One planted secret per masking rule of ``compression/secrets.py``, for tests that hunt for leaks.

Adding a rule to the library means adding a plant here: ``test_masking.test_every_rule_has_a_plant``
fails until one of the plants is caught by each rule. A plant is the text planted (``text``, as a
user or a tool would write it) and the part of it that must never be shown raw (``secret``); a
``secret`` holds no character HTML or JSON would escape, so finding it in a response is a plain
substring search.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from agent_compression import secrets


@dataclass(frozen=True)
class Plant:
    kind: str
    text: str
    secret: str
    #: fits in a session key (one line, no "/")
    key_safe: bool = True


def _plant(kind: str, text: str, secret: str | None = None) -> Plant:
    return Plant(kind, text, secret or text, key_safe="\n" not in text and "/" not in text)


CANDIDATES: list[Plant] = [
    _plant(
        "private_key",
        "-----BEGIN RSA PRIVATE KEY-----\nMIIEowIBAAKCAQEAplantedPrivateKeyMaterial0123\n-----END RSA PRIVATE KEY-----",
        "MIIEowIBAAKCAQEAplantedPrivateKeyMaterial0123",
    ),
    _plant("api_key", "sk-proj-PlantOpenAiKey1234567890abcd"),
    _plant("anthropic", "sk-ant-api03-PlantAnthropicKey0123456789"),
    _plant("stripe", "sk_live_PlantStripeKey0123456789"),
    _plant("github", "ghp_PlantGithubToken0123456789abcdEF"),
    _plant("github_pat", "github_pat_11PLANTGITHUB0123456789_abcdefghij"),
    _plant("gitlab", "glpat-PlantGitlabToken0123456789"),
    _plant("huggingface", "hf_PlantHuggingFaceToken0123456789abcd"),
    _plant("slack", "xoxb-1234567890-plantSlackToken"),
    _plant("aws_key", "AKIAZ3PLANTAWSKEY123"),
    _plant(
        "aws_secret_unlabelled",
        "AKIAZ3PLANTAWSKEY456 wJalrXUtnFEMIK7MDENGbPxRfiCYPLANTKEY3456",
        "wJalrXUtnFEMIK7MDENGbPxRfiCYPLANTKEY3456",
    ),
    _plant("google_key", "AIzaSyPlantGoogleKey0123456789abcdefghi"),
    _plant("npm", "npm_PlantNpmToken0123456789abcdefghijklm"),
    _plant("pypi", "pypi-AgEIcHlwaS5vcmcPlantPypiToken" + "x" * 40),
    _plant("jwt", "eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiJwbGFudGVkIn0.c2lnbmF0dXJlUGxhbnQ"),
    _plant("bearer", "Authorization: Bearer PlantBearerToken0123456789", "PlantBearerToken0123456789"),
    _plant("url_password", "postgres://admin:PlantDbPassw0rd@db.internal/app", "PlantDbPassw0rd"),
    _plant("password", "password=PlantPassw0rdValue", "PlantPassw0rdValue"),
    # issue 33: what only a name next to it says is a secret
    _plant("basic_auth", "Authorization: Basic UGxhbnRCYXNpY0F1dGhWYWx1ZQ==", "UGxhbnRCYXNpY0F1dGhWYWx1ZQ"),
    _plant("cookie", "Cookie: sessionid=PlantSessionCookie42", "PlantSessionCookie42"),
    _plant("env_passwd", 'export SMTP_PASSWD="Plant Smtp Passwd"', "Plant Smtp Passwd"),
    _plant(
        "aws_secret_far",
        "AKIAZ3PLANTAWSKEY789 is the access key id.\n"
        + "We rotated the staging pair after the incident review and revoked the old one. " * 4
        + "\nThe matching secret access key is Kq7PlantFarAwsSecretXy0+3mB9vLpQz2R8sTuW for now.",
        "Kq7PlantFarAwsSecretXy0+3mB9vLpQz2R8sTuW",
    ),
]

#: Leaks with a library that masks it only as a generic ``password=`` value: the extractive summarizer pins
#: "wJal…/…" as a [path] fact, cut from its label, so the summary holds it unmasked. The library that has a
#: rule of its own for it also masks the pipeline's input before extracting facts: it joins the plants then.
PENDING = [
    _plant(
        "aws_secret",
        "aws_secret_access_key = wJalrXUtnFEMI/K7MDENG/bPxRfiCYPLANTKEY12",
        "wJalrXUtnFEMI/K7MDENG/bPxRfiCYPLANTKEY12",
    ),
]
CANDIDATES += [p for p in PENDING if f"[secret:{p.kind}:" in secrets.mask_secrets(p.text)]

#: kinds the console has always masked: never silently dropped from the plants
REQUIRED = {
    "private_key", "api_key", "github", "github_pat", "slack", "aws_key", "google_key", "jwt", "bearer",
    "url_password", "password",
}  # fmt: skip

#: the candidates the library masks (a candidate for a rule it does not have yet waits here); every rule
#: must catch one of them (test_every_rule_has_a_plant)
PLANTS: list[Plant] = [p for p in CANDIDATES if p.secret not in secrets.mask_secrets(p.text)]

#: every plant in one text (what a message, a note or a comment carries)
ALL_TEXT = "\n".join(f"({p.kind}) {p.text}" for p in PLANTS)


def rule_patterns() -> Iterator[re.Pattern[str]]:
    """The regular expression of each rule the library masks with, however a rule is written down."""
    for rule in secrets._RULES:
        parts: Any = rule if isinstance(rule, tuple) else [getattr(rule, "pattern", None)]
        found = [part for part in parts if isinstance(part, re.Pattern)]
        assert found, f"cannot find the pattern of rule {rule!r}: update rule_patterns()"
        yield found[0]


#: Values that look harmless alone, masked only because of the secret-named key they sit under (metadata, tool
#: arguments): planted as JSON, never as text. kind -> the raw value that must never be shown.
NAMED_SECRETS: dict[str, str] = {
    "named_password": "PlantHunter2",
    "named_aws_secret": "PlantAwsSecretValue",
    "named_nested_token": "PlantNestedTokenValue",
    "named_header": "PlantHeaderKeyValue",
    "named_camel_cookie": "PlantCamelCookieValue",
    "named_under_credentials": "PlantCredentialsValue",
    "named_number": "73914682",
}

#: how they sit: in any nesting and case, hyphen, underscore or camelCase
NAMED: dict[str, Any] = {
    "password": NAMED_SECRETS["named_password"],
    "AWS_SECRET_ACCESS_KEY": NAMED_SECRETS["named_aws_secret"],
    "auth": {"token": NAMED_SECRETS["named_nested_token"], "type": "bearer"},
    "headers": [{"X-Api-Key": NAMED_SECRETS["named_header"]}],
    "browser": {"sessionCookie": NAMED_SECRETS["named_camel_cookie"]},
    "credentials": {"user": "plant-user", "value": NAMED_SECRETS["named_under_credentials"]},
    "db": {"Pin-Password": int(NAMED_SECRETS["named_number"])},
}


def leaks(text: str) -> list[str]:
    """The kinds whose secret appears raw in ``text``."""
    return [p.kind for p in PLANTS if p.secret in text] + [k for k, v in NAMED_SECRETS.items() if v in text]
