"""Mask secrets (API keys, tokens, passwords, private keys) before text leaves the process.

The same secret always maps to the same placeholder, ``[secret:<kind>:<hash8>]``,
so two masked versions of a history (before and after compression) still line
up in a diff, and an operator can tell two different keys apart without seeing
either. The hash is an HMAC-SHA256 under a key the caller provides
(``mask_secrets(text, key=...)``, ``CompressionConfig.secret_mask_key``): with a
private key, a placeholder cannot be confirmed offline by guessing the secret
(8 hex digits of a plain hash of a short password can). Without a key a fixed
public default is used, stable across processes but guessable: give a key.

Each pattern only runs when a cheap literal pre-check finds its prefix, so
masking a large text that holds no secret costs a few substring searches.

:func:`mask_messages` masks a whole message list (content, text parts, tool-call
arguments, keeping arguments valid JSON); the pipeline runs it once on everything
it extracts facts from or sends to a summarizer.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import math
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from ahocorasick_rs import AhoCorasick

from .memo import remember_short
from .secret_names import NEAR_NAMES, NEEDLES, assignment_names, is_secret_name, near_name_pattern

#: the key used when the caller gives none: stable, but public (see the module docstring)
DEFAULT_MASK_KEY = b"compression.secrets.v2"

MaskKey = str | bytes | None

_PLACEHOLDER = re.compile(r"\[secret:[a-z_]+:[0-9a-f]{8}\]")


def _key_bytes(key: MaskKey) -> bytes:
    if key is None or key == "" or key == b"":
        return DEFAULT_MASK_KEY
    return key.encode("utf-8") if isinstance(key, str) else key


def secret_placeholder(kind: str, secret: str, key: MaskKey = None) -> str:
    """The placeholder that stands for ``secret`` under ``key`` (stable across calls and processes)."""
    digest = hmac.new(_key_bytes(key), secret.encode("utf-8", "surrogatepass"), hashlib.sha256).hexdigest()[:8]
    return f"[secret:{kind}:{digest}]"


Replace = Callable[[re.Match[str], bytes], str]


def _whole(kind: str) -> Replace:
    def replace(match: re.Match[str], key: bytes) -> str:
        return secret_placeholder(kind, match.group(0), key)

    return replace


#: values of ``password=`` style assignments that are not secrets
_NOT_SECRETS = frozenset({"true", "false", "null", "none", "nil", "undefined", "required", "optional", "string"})
#: a value that names where a secret is, not the secret: a path (``PWD=/srv/ci``, ``password_file: ./db.pw``), a
#: variable (``$DB_PASSWORD``, ``${TOKEN}``) or a template (``{{ secrets.TOKEN }}``)
_REFERENCE = re.compile(r"(?:~?/|\.\.?/)[\w./@+-]*|\$\{?\w+\}?|\{\{.*\}\}", re.S)


def _not_a_secret(value: str) -> bool:
    """A value under a secret name that still is no secret: a word like ``required``, punctuation, a reference, a
    placeholder."""
    return (
        value.lower() in _NOT_SECRETS
        or not any(c.isalnum() for c in value)  # a rule of ===== or ----, an ellipsis
        or bool(_REFERENCE.fullmatch(value))
        or bool(_PLACEHOLDER.fullmatch(value))
    )


def _group(kind: str, *names: str) -> Replace:
    """Replace only the first named group that matched, keeping the key name / scheme around it."""
    names = names or ("secret",)

    def replace(match: re.Match[str], key: bytes) -> str:
        name = next((n for n in names if match.group(n) is not None), None)
        value = match.group(name) if name else None
        if not value or _not_a_secret(value):
            return match.group(0)
        assert name is not None
        start, end = match.start(name) - match.start(0), match.end(name) - match.start(0)
        whole = match.group(0)
        return whole[:start] + secret_placeholder(kind, value, key) + whole[end:]

    return replace


@dataclass(frozen=True)
class _Rule:
    #: literal pre-check: the pattern only runs when one of these is in the text
    needles: tuple[str, ...]
    #: the needles are looked for in the lower-cased text
    lower: bool
    pattern: re.Pattern[str]
    replace: Replace
    #: and this must be in the text too (``""``: no second check)
    also: str = ""
    #: and this must match the lower-cased text (a case-sensitive search is ten times faster than ``(?i)``)
    gate: re.Pattern[str] | None = None


def _rule(
    needles: tuple[str, ...],
    pattern: str,
    replace: Replace,
    *,
    lower: bool = False,
    flags: int = 0,
    also: str = "",
    gate: str = "",
) -> _Rule:
    return _Rule(needles, lower, re.compile(pattern, flags), replace, also, re.compile(gate) if gate else None)


#: a 40-character base64-ish run, as AWS secret access keys are
_AWS_SECRET = r"(?<![A-Za-z0-9/+=])[A-Za-z0-9/+]{40}(?![A-Za-z0-9/+=])"
_AWS_ID = re.compile(r"\b(?:AKIA|ASIA)[0-9A-Z]{16}\b")
_AWS_SECRET_RUN = re.compile(_AWS_SECRET)
#: how far from an access key id an unlabelled secret access key is looked for
_AWS_PAIR_WINDOW = 300


def _random_looking(value: str) -> bool:
    """Upper and lower case letters and a digit or ``/`` ``+``: a 40-hex git sha is not a key."""
    return (
        any(c.islower() for c in value)
        and any(c.isupper() for c in value)
        and any(c.isdigit() or c in "/+" for c in value)
    )


def _mask_aws_pairs(text: str, key: bytes) -> str:
    """Unlabelled AWS secret access keys: 40-char runs near an ``AKIA``/``ASIA`` id."""
    found: set[str] = set()
    for match in _AWS_ID.finditer(text):
        lo = max(0, match.start() - _AWS_PAIR_WINDOW)
        window = text[lo : match.end() + _AWS_PAIR_WINDOW]
        for candidate in _AWS_SECRET_RUN.finditer(window):
            value = candidate.group(0)
            if _random_looking(value):
                found.add(value)
    for value in sorted(found, key=len, reverse=True):
        text = text.replace(value, secret_placeholder("aws_secret", value, key))
    return text


#: a credential-shaped run with no prefix: 32 to 64 characters of base64 (an AWS secret access key is 40), whole
_CREDENTIAL_RUN = re.compile(r"(?<![A-Za-z0-9/+=_.-])[A-Za-z0-9/+]{32,64}+={0,2}(?![A-Za-z0-9/+=_.-])")
_NEAR_NAME = near_name_pattern()
#: how far before or after a prefix-less credential shape a secret name makes it a secret
NEAR_CHARS = 80
#: bits per character a run needs to pass for random: 40 random base64 characters carry about 4.9; a CamelCase
#: identifier or a path of the same length about 4
_MIN_ENTROPY = 4.3


def _entropy(value: str) -> float:
    counts = [value.count(c) for c in set(value)]
    n = len(value)
    return -sum(k / n * math.log2(k / n) for k in counts)


def _credential_shaped(value: str) -> bool:
    """Random-looking (mixed case and digits, high entropy) and not a path (few ``/``, none leading)."""
    return (
        _random_looking(value)
        and sum(c.isdigit() for c in value) >= 2
        and value.count("/") <= 3
        and not value.startswith("/")
        and _entropy(value) >= _MIN_ENTROPY
    )


def _mask_near_names(text: str, lowered: str, key: bytes) -> str:
    """Prefix-less credential shapes with a secret name (:data:`~.secret_names.NEAR_NAMES`) near them."""
    found: set[str] = set()
    for match in _CREDENTIAL_RUN.finditer(text):
        value = match.group(0).rstrip("=")
        if not _credential_shaped(value):
            continue
        before = lowered[max(0, match.start() - NEAR_CHARS) : match.start()]
        after = lowered[match.end() : match.end() + NEAR_CHARS]
        if _NEAR_NAME.search(before) or _NEAR_NAME.search(after):
            found.add(match.group(0))
    for value in sorted(found, key=len, reverse=True):
        text = text.replace(value, secret_placeholder("credential", value, key))
    return text


_ASCII_NAMES, _OTHER_NAMES = assignment_names()

_RULES: list[_Rule] = [
    _rule(
        ("-----BEGIN",),
        r"-----BEGIN (?:[A-Z0-9]+ )*PRIVATE KEY-----.*?(?:-----END (?:[A-Z0-9]+ )*PRIVATE KEY-----|\Z)",
        _whole("private_key"),
        flags=re.S,
    ),
    _rule(("sk-ant-",), r"(?<![A-Za-z0-9_-])sk-ant-[A-Za-z0-9_\-]{16,}", _whole("anthropic")),
    _rule(
        ("sk-",), r"(?<![A-Za-z0-9_-])sk-(?:proj-|svcacct-|admin-|live-|test-)?[A-Za-z0-9_\-]{16,}", _whole("api_key")
    ),
    _rule(
        ("sk_live_", "sk_test_", "rk_live_", "rk_test_", "whsec_"),
        r"\b(?:(?:sk|rk)_(?:live|test)_[A-Za-z0-9]{10,}|whsec_[A-Za-z0-9]{20,})",
        _whole("stripe"),
    ),
    _rule(("ghp_", "gho_", "ghs_", "ghu_", "ghr_"), r"\bgh[pousr]_[A-Za-z0-9]{20,}", _whole("github")),
    _rule(("github_pat_",), r"\bgithub_pat_[A-Za-z0-9_]{20,}", _whole("github")),
    _rule(("glpat-",), r"\bglpat-[A-Za-z0-9_\-]{20,}", _whole("gitlab")),
    _rule(("hf_",), r"\bhf_[A-Za-z0-9]{30,}\b", _whole("huggingface")),
    _rule(("xox", "xapp-"), r"\b(?:xox[bpasr]-[A-Za-z0-9-]{10,}|xapp-[0-9]+-[A-Za-z0-9-]{10,})", _whole("slack")),
    _rule(("AIza",), r"\bAIza[0-9A-Za-z_\-]{35}", _whole("google_key")),
    _rule(("npm_",), r"\bnpm_[A-Za-z0-9]{36}\b", _whole("npm")),
    _rule(("pypi-",), r"\bpypi-[A-Za-z0-9_\-]{50,}", _whole("pypi")),
    # labelled AWS secret access keys (env, ini, JSON from `aws sts`) before the generic assignment rule
    _rule(
        ("secret",),
        r"(?i)secret_?access_?key[\"']?\s*[:=]\s*[\"']?(?P<secret>[A-Za-z0-9/+]{40})(?![A-Za-z0-9/+=])",
        _group("aws_secret"),
        lower=True,
    ),
    _rule(("AKIA", "ASIA"), r"\b(?:AKIA|ASIA)[0-9A-Z]{16}\b", _whole("aws_key")),
    _rule(("eyJ",), r"\beyJ[A-Za-z0-9_-]{8,}\.eyJ[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]{8,}", _whole("jwt")),
    _rule(("bearer",), r"(?i)\bbearer\s+(?P<secret>[A-Za-z0-9_\-.~+/]{12,}=*)", _group("bearer"), lower=True),
    _rule(
        ("://",),
        r"\b[a-zA-Z][a-zA-Z0-9+.-]*://[^\s:/@\[]+:(?P<secret>[^\s@/]{3,})@",
        _group("url_password"),
        also="@",
    ),
    _rule(
        NEEDLES,
        rf"(?i)(?:(?<![\[\w])(?<!\[secret:)(?:[a-z0-9_]*?(?:{_ASCII_NAMES}))|{_OTHER_NAMES})"
        r"""(?:\\?["'])?\s*(?:=|:|：)\s*(?:(?:basic|bearer|digest|token)\s+)?"""
        # a quoted value may sit in JSON text inside a string (``\\"``): the backslashes stay around the placeholder
        r"""(?:\\?"(?P<dq>[^"\n\\]{3,})\\?"|\\?'(?P<sq>[^'\n\\]{3,})\\?'|["']?(?P<secret>[^\s"',;\\]{4,}))""",
        _group("password", "dq", "sq", "secret"),
        lower=True,
        gate=rf"(?:{_ASCII_NAMES}|{_OTHER_NAMES})(?:\\?[\"'])?\s*[=:：]",
    ),
]


#: every rule's needles, lower-cased: a text holding none of them (the common case) is returned at once
_ANY_NEEDLE = tuple(sorted({n.lower() for rule in _RULES for n in rule.needles if not n.lower().startswith("sk-ant")}))


#: per rule, the pre-check needles (above) that gate it: one of them is in every text the rule can match
_GATES: list[frozenset[str]] = [
    frozenset(g for g in _ANY_NEEDLE if any(g in n.lower() for n in rule.needles)) for rule in _RULES
]


#: the pre-check needles a secret name holds (a key the text rules cannot see: ``{"auth": {...}}``)
_NAME_GATE = frozenset(g for g in _ANY_NEEDLE if any(g in name for name in NEEDLES))

#: the pre-check needles that may announce a prefix-less credential (a secret name's last word)
_NEAR_GATE = frozenset(g for g in _ANY_NEEDLE if any(g in name.split("_")[-1] for name in NEAR_NAMES))
#: every needle found in one pass (Aho-Corasick), overlapping ones included
_NEEDLE_FINDER = AhoCorasick(list(_ANY_NEEDLE))


def _may_hold_secret(text: str) -> bool:
    return bool(_NEEDLE_FINDER.find_matches_as_indexes(text.lower()))


def _present(text: str) -> frozenset[str]:
    """The pre-check needles in ``text`` (lower-cased once, one pass for all needles)."""
    return frozenset(_NEEDLE_FINDER.find_matches_as_strings(text.lower(), overlapping=True))


def mask_secrets(text: str, key: MaskKey = None) -> str:
    """Replace every secret in ``text`` with a stable ``[secret:<kind>:<hmac8>]`` placeholder.

    Masks OpenAI (``sk-``, ``sk-proj-``) and Anthropic (``sk-ant-``) keys, Stripe
    live/test/restricted keys and webhook secrets, AWS access key ids and secret
    access keys (labelled, or unlabelled next to an access key id), GitHub,
    GitLab, Hugging Face, Slack, Google, npm and PyPI tokens, JWTs, ``Bearer``
    tokens, private key blocks, passwords in URLs (``user:pass@host``) and
    ``password=`` / ``token:`` / ``"api_key": "..."`` style values.
    ``key``: the HMAC key of the placeholders (give one; see the module docstring).
    Idempotent: masking twice gives the same text.
    """
    if not text:
        return text
    return _mask(text, _key_bytes(key))


# a page masks the same message in its list, its detail and its diff
@remember_short(max_chars=20_000, maxsize=1024)
def _mask(text: str, mac: bytes) -> str:
    present = _present(text)
    if not present:
        return text
    lowered: str | None = None
    if "AKIA" in text or "ASIA" in text:
        masked = _mask_aws_pairs(text, mac)
        if masked != text:
            text, present = masked, _present(masked)
    for rule, gate in zip(_RULES, _GATES, strict=True):
        # the gate is a cheap set test; a rule it lets through checks its own needles as before
        if present.isdisjoint(gate):
            continue
        if rule.lower:
            if lowered is None:
                lowered = text.lower()
            haystack = lowered
        else:
            haystack = text
        if not any(n in haystack for n in rule.needles) or (rule.also and rule.also not in text):
            continue
        if rule.gate is not None:
            if lowered is None:
                lowered = text.lower()
            if not rule.gate.search(lowered):
                continue
        new_text = rule.pattern.sub(lambda m, r=rule: r.replace(m, mac), text)  # type: ignore[misc]
        if new_text != text:
            text = new_text
            lowered = None
            present = _present(text)  # a replacement changes which needles the later rules see
    if not present.isdisjoint(_NEAR_GATE):  # last: what a rule of its own masked is no candidate any more
        text = _mask_near_names(text, text.lower() if lowered is None else lowered, mac)
    return text


def contains_secret(text: str) -> bool:
    """Whether :func:`mask_secrets` would change ``text``."""
    return mask_secrets(text) != text


# --------------------------------------------------------------------------- messages


def _named(value: Any, mac: bytes, mask_text: Callable[[str], str]) -> Any:
    """Everything under a secret-named key: each string or number masked whole, at any depth (a string that is
    one secret of a known shape keeps that shape's placeholder, as in text)."""
    if isinstance(value, str):
        if not value or _not_a_secret(value):
            return value
        shaped = mask_text(value)
        return shaped if _PLACEHOLDER.fullmatch(shaped) else secret_placeholder("named", value, mac)
    if isinstance(value, bool) or value is None:
        return value
    if isinstance(value, int | float):
        return secret_placeholder("named", json.dumps(value), mac)
    if isinstance(value, dict):
        return {mask_text(k) if isinstance(k, str) else k: _named(v, mac, mask_text) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_named(v, mac, mask_text) for v in value]
    return value


def mask_json(value: Any, key: MaskKey = None, *, text: Callable[[str], str] | None = None) -> Any:
    """A JSON-like value (metadata, an API body, tool arguments) with its secrets masked: every string by shape
    (:func:`mask_secrets`, dict keys included), and every value under a secret-named key
    (``{"auth": {"token": "..."}}``, ``{"DB_PASSWORD": "hunter2"}``: :func:`~.secret_names.is_secret_name`) whole,
    however harmless it looks. ``text``: the caller's own text masking (a cached one), given the same key."""
    mac = _key_bytes(key)
    mask_text = text or (lambda s: mask_secrets(s, mac))

    def walk(item: Any) -> Any:
        if isinstance(item, str):
            return mask_text(item)
        if isinstance(item, dict):
            out = {}
            for k, v in item.items():
                named = isinstance(k, str) and is_secret_name(k)
                if named:
                    masked = _named(v, mac, mask_text)
                elif k == "arguments" and isinstance(v, str):  # a tool call's: JSON in a string, keys and all
                    masked = mask_arguments(v, mac)
                else:
                    masked = walk(v)
                out[mask_text(k) if isinstance(k, str) else k] = masked
            return out
        if isinstance(item, list | tuple):
            return [walk(v) for v in item]
        return item

    return walk(value)


def mask_arguments(arguments: str, key: MaskKey = None) -> str:
    """Tool-call ``arguments`` masked; JSON arguments stay valid JSON.

    JSON is masked value by value (an escaped quote inside a string hides a
    ``TOKEN=\\"...\\"`` value from the text patterns, and a replacement must not
    eat an escape), values under secret-named keys whole (:func:`mask_json`); anything else as text.
    """
    if not _may_hold_secret(arguments) and "\\u" not in arguments:  # a \u escape can hide a label (密码)
        return arguments
    masked = mask_secrets(arguments, key)
    if masked == arguments and "\\" not in arguments and not _present(arguments) & _NAME_GATE:
        return arguments
    try:
        parsed = json.loads(arguments)
    except ValueError:
        return masked  # not JSON to begin with
    values = mask_json(parsed, key)
    return arguments if values == parsed else json.dumps(values, ensure_ascii=False)


#: message fields that are structure, never secrets
_STRUCTURAL = frozenset({"role", "tool_call_id", "id", "type"})


def _mask_value(value: Any, key: MaskKey, field: str = "") -> Any:
    if isinstance(value, str):
        if field in _STRUCTURAL:
            return value
        masked = mask_arguments(value, key) if field == "arguments" else mask_secrets(value, key)
        return value if masked == value else masked
    if isinstance(value, dict):
        out: dict[str, Any] | None = None
        for k, v in value.items():
            new = _mask_value(v, key, k)
            if new is not v and new != v:
                if out is None:
                    out = dict(value)
                out[k] = new
        return value if out is None else out
    if isinstance(value, list):
        items = [_mask_value(v, key, field) for v in value]
        return value if all(a is b for a, b in zip(items, value, strict=True)) else items
    return value


_CALL_FIELDS = frozenset({"id", "type", "function"})
_FUNCTION_FIELDS = frozenset({"name", "arguments"})


def _plain_calls(calls: Any) -> bool:
    """Standard tool calls whose name and arguments hold no needle: what :func:`_mask_value` would
    return unchanged, checked without its walk (every assistant turn has some)."""
    if type(calls) is not list:
        return False
    for call in calls:
        if type(call) is not dict or not call.keys() <= _CALL_FIELDS:
            return False
        if any(type(call[f]) is not str for f in ("id", "type") if f in call):
            return False
        function = call.get("function")
        if type(function) is not dict or not function.keys() <= _FUNCTION_FIELDS:
            return False
        for value in function.values():
            if type(value) is not str or "\\u" in value or _may_hold_secret(value):
                return False
    return True


def mask_message(message: Any, key: MaskKey = None) -> Any:
    """``message`` with secrets masked in every string it holds (ids and roles aside); copy on write."""
    if not isinstance(message, dict):
        return _mask_value(message, key)
    out: dict[str, Any] | None = None
    for k, v in message.items():  # the common fields directly: this runs over whole histories
        if k in _STRUCTURAL:
            continue
        if isinstance(v, str):
            new: Any = mask_secrets(v, key)
        elif isinstance(v, list | dict):
            if k == "tool_calls" and _plain_calls(v):
                continue
            new = _mask_value(v, key, k)
        else:
            continue
        if new is not v:
            if out is None:
                out = dict(message)
            out[k] = new
    return message if out is None else out


def mask_messages(messages: Sequence[Any], key: MaskKey = None) -> list[Any]:
    """Each message masked (:func:`mask_message`); unchanged messages are the input's own objects."""
    return [mask_message(m, key) for m in messages]
