"""One sample per kind of secret ``agent_compression.secrets`` masks, for any test that plants secrets.

Every value is made up. ``SecretSample.text`` holds ``secret`` in the way it shows up in agent
sessions (prose, shell, JSON, env files); after masking, ``secret`` must be gone and a placeholder
of ``kind`` must be there. Most samples stand on their own (no ``password=`` label around them),
so each tests its own rule and not the generic assignment rule.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class SecretSample:
    kind: str
    text: str
    secret: str


def _sample(kind: str, template: str, secret: str) -> SecretSample:
    return SecretSample(kind, template.format(secret), secret)


# built from parts so that no scanner mistakes this file for a leak
_AWS_ID = "AKIA" + "Z7QX4ND2LMVB6HPE"
_AWS_SECRET = "wJalrXUtnFEMI/K7MDENG/" + "bPxRfiCYzq82LmNoPq"
_PEM = "-----BEGIN OPENSSH PRIVATE KEY-----\nb3BlbnNzaC1rZXktdjEAAAAABG5vbmU=\n-----END OPENSSH PRIVATE KEY-----"

SECRET_SAMPLES: tuple[SecretSample, ...] = (
    _sample("api_key", "use {} for the OpenAI call", "sk-" + "Qw3rTy7uIoP9aSdFgHjKl2ZxCvBn"),
    _sample("api_key", "export key {} now", "sk-proj-" + "AbCdEfGhIjKlMnOpQrStUvWxYz0123456789"),
    _sample("anthropic", "claude works with {}", "sk-ant-api03-" + "Xy9Wv8Ut7Sr6Qp5On4Ml3Kj2Ih1Gf0EdCb-AA"),
    _sample("stripe", "charge with {} in prod", "sk_live_" + "51HxYz2AbCdEfGhIjKlMn0pQ"),
    _sample("stripe", "tests use {}", "sk_test_" + "4eC39HqLyjWDarjtT1zdp7dc"),
    _sample("stripe", "the restricted key {} reads charges", "rk_live_" + "51HxYz2AbCdEfGhIjKlMnRsT"),
    _sample("aws_key", "the access key id is {}", _AWS_ID),
    _sample("aws_secret", "aws_secret_access_key = {}", _AWS_SECRET),
    _sample("aws_secret", '{{"AccessKeyId": "' + _AWS_ID + '", "SecretAccessKey": "{}"}}', _AWS_SECRET),
    _sample("aws_secret", "creds: " + _AWS_ID + " {}", _AWS_SECRET),  # unlabelled, next to its id
    _sample("github", "git clone https://{}@github.com/acme/app", "ghp_" + "a1B2c3D4e5F6g7H8i9J0k1L2m3N4o5P6q7R8"),
    _sample("github", "oauth token {}", "gho_" + "16C7e42F292c6912E7710c838347Ae178B4a"),
    _sample("github", "the app token {} expires", "ghs_" + "16C7e42F292c6912E7710c838347Ae178B4a"),
    _sample("github", "user-to-server {}", "ghu_" + "16C7e42F292c6912E7710c838347Ae178B4a"),
    _sample("github", "refresh with {}", "ghr_" + "16C7e42F292c6912E7710c838347Ae178B4a"),
    _sample("github", "fine-grained {}", "github_pat_" + "11ABCDEFG0123456789_abcdefghijklmnopqrstuvwxyz"),
    _sample("gitlab", "CI uses {}", "glpat-" + "xY7zA9bC3dE5fG1hJ2kL"),
    _sample("huggingface", "huggingface-cli login --token {}", "hf_" + "AbCdEfGhIjKlMnOpQrStUvWxYz01234567"),
    _sample("slack", "bot {}", "xoxb-" + "1234567890123-1234567890123-AbCdEfGhIjKlMnOpQrStUvWx"),
    _sample("slack", "user {}", "xoxp-" + "1234567890123-1234567890123-1234567890123-abcdef0123456789"),
    _sample("slack", "legacy {}", "xoxa-" + "2-1234567890-abcdefghijklmnop"),
    _sample("slack", "socket mode {}", "xapp-" + "1-A0123456789-1234567890123-abcdef0123456789abcdef"),
    _sample("google_key", "maps key {}", "AIza" + "SyD-9tSrke72PouQMnMX-a7eZSW0jkFMBWY"),
    _sample("npm", "//registry.npmjs.org/:_authToken {}", "npm_" + "AbCdEfGhIjKlMnOpQrStUvWxYz0123456789"),
    _sample(
        "pypi",
        "twine upload -p {}",
        "pypi-" + "AgEIcHlwaS5vcmcCJGQ4YjU1ZWI4LTk3ZWYtNDE3Yi1hMzNmLTM4ZTRhOTg5NjFjYgACKlszLCJ",
    ),
    _sample("private_key", "deploy key:\n{}\nend", _PEM),
    _sample(
        "jwt",
        "session cookie {}",
        "eyJhbGciOiJIUzI1NiJ9." + "eyJzdWIiOiIxMjM0NTY3ODkwIn0.dozjgNryP4J3jVmNHl0w5N_XgL0n3I9PlFUP0THsR8U",
    ),
    _sample("bearer", "curl -H 'Authorization: Bearer {}' https://api.acme.dev", "abcdef0123456789abcdef"),
    _sample("url_password", "DATABASE_URL is postgres://admin:{}@db.internal:5432/app", "hunter2secret"),
    _sample("password", "mysql -u root --password={} app", "S3cr3t-pw!"),
    _sample("password", '{{"username": "ops", "password": "{}"}}', "correct horse battery"),
    _sample("password", "DB_PASSWORD={}", "pg-pass-2026"),
    _sample("password", "secret: {}", "shh-its-a-secret"),
    _sample("password", "token={}", "tkn_93f0a1b2c3"),
    _sample("password", "api_key: {}", "abcd1234efgh"),
    _sample("password", "数据库密码：{}", "mima123456"),
)
