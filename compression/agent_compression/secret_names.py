"""Names that say a value is a secret (``password``, ``api_key``, ``Authorization``...): one definition.

A value alone can look harmless (``hunter2``, a 40-character run of letters); the name it sits under says
what it is. :mod:`agent_compression.secrets` uses these names three ways:

- a JSON value under a secret name is masked whole, at any depth (:func:`is_secret_name`);
- ``NAME=value``, ``name: value`` and ``"name": "value"`` in free text (the assignment rule, whose
  pattern is built here from the same list: :func:`assignment_names`);
- a credential-shaped run with no prefix of its own (an AWS secret access key far from its ``AKIA`` id)
  is masked when one of the names is written near it (:data:`NEAR_NAMES`, :func:`near_name_pattern`).

A name counts when a key **ends** with it (``DB_PASSWORD``, ``x-auth-token``, ``awsSecretAccessKey``,
``PGPASSWORD``), optionally followed by a word that still names the value itself (``password_hash``,
``token_b64``); a key that merely contains one names something else (``token_count``, ``max_tokens``,
``password_policy``, ``secret_name``).
"""

from __future__ import annotations

import re
from functools import lru_cache

#: Secret names, lower case; ``_`` where the name may be split or glued (``api_key``: apikey, api-key, API_KEY,
#: apiKey). Order does not matter.
SECRET_NAMES: tuple[str, ...] = (
    "password",
    "passwd",
    "passphrase",
    "pwd",
    "secret",
    "token",
    "api_key",
    "access_key",
    "private_key",
    "secret_key",
    "signing_key",
    "encryption_key",
    "auth",
    "authorization",
    "credential",
    "credentials",
    "cookie",
    "sessionid",
    "密码",
    "口令",
)

#: words after a secret name that still name the secret (``password_hash``, ``api_key_b64``)
VALUE_WORDS: frozenset[str] = frozenset({"value", "b64", "base64", "hex", "raw", "plain", "plaintext", "hash"})

#: names too common in prose and shell output to make a nearby random-looking run a secret (``pwd`` prints a
#: directory, "auth" and "cookie" name features); they still count as keys and labels
NOT_NEAR: frozenset[str] = frozenset({"pwd", "auth", "cookie", "sessionid"})

#: the names whose mention near a prefix-less credential shape makes it a secret
NEAR_NAMES: tuple[str, ...] = tuple(n for n in SECRET_NAMES if n not in NOT_NEAR)


def _pattern(name: str, separator: str) -> str:
    return separator.join(re.escape(part) for part in name.split("_"))


def assignment_names() -> tuple[str, str]:
    """The assignment rule's alternations: (ASCII names, each ``_`` an optional ``_``/``-``; other names)."""
    ascii_names = sorted((n for n in SECRET_NAMES if n.isascii()), key=len, reverse=True)
    other = sorted((n for n in SECRET_NAMES if not n.isascii()), key=len, reverse=True)
    return "|".join(_pattern(n, "[_-]?") for n in ascii_names), "|".join(map(re.escape, other))


def near_name_pattern() -> re.Pattern[str]:
    """A mention of a :data:`NEAR_NAMES` name in lower-cased text (``secret access key``, ``api-key``)."""
    names = sorted(NEAR_NAMES, key=len, reverse=True)
    return re.compile("|".join(_pattern(n, "[ _-]?") for n in names))


#: pre-check needles: every secret name ends with one of these (lower case)
NEEDLES: tuple[str, ...] = tuple(sorted({n.split("_")[-1] for n in SECRET_NAMES}))

_CAMEL = re.compile(r"(?<=[a-z0-9])(?=[A-Z])")
_SEPARATORS = re.compile(r"[^0-9a-z\u3400-\u9fff]+")
_ENDS_WITH_NAME = re.compile(
    "(?:" + "|".join(_pattern(n, "_?") for n in sorted(SECRET_NAMES, key=len, reverse=True)) + ")$"
)


@lru_cache(maxsize=4096)
def is_secret_name(key: str) -> bool:
    """Whether ``key`` (a JSON key, a header, an environment variable) names a secret value.

    Case, ``-``/``_``/space/``.`` separators and camelCase do not matter; the key must end with a name of
    :data:`SECRET_NAMES` (or with one and then a word of :data:`VALUE_WORDS`).
    """
    if not key or len(key) > 200:
        return False
    words = _SEPARATORS.sub("_", _CAMEL.sub("_", key).lower()).strip("_")
    if not words:
        return False
    if _ENDS_WITH_NAME.search(words):
        return True
    head, _, last = words.rpartition("_")
    return bool(head) and last in VALUE_WORDS and bool(_ENDS_WITH_NAME.search(head))
