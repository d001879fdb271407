"""Masking by context (issue 33): the name a value sits under, or is written near, says it is a secret."""

from __future__ import annotations

import hashlib
import json

import pytest

from agent_compression.secret_names import SECRET_NAMES, is_secret_name
from agent_compression.secrets import mask_arguments, mask_json, mask_secrets

SECRET_KEYS = [
    "password", "PASSWORD", "db_password", "DB-PASSWORD", "dbPassword", "PGPASSWORD", "passwd", "SMTP_PASSWD",
    "pwd", "passphrase", "secret", "client_secret", "CLIENT-SECRET", "session_secret", "cookie_secret", "token",
    "access_token", "X-Auth-Token", "csrftoken", "api_key", "apikey", "apiKey", "X-Api-Key", "API KEY",
    "aws_secret_access_key", "AWS_SECRET_ACCESS_KEY", "awsSecretAccessKey", "SecretAccessKey", "access_key",
    "private_key", "privateKey", "secret_key", "DJANGO_SECRET_KEY", "signing_key", "auth", "basic_auth",
    "Authorization", "Proxy-Authorization", "credential", "credentials", "cookie", "Set-Cookie", "session_cookie",
    "sessionid", "password_hash", "token_b64", "数据库密码", "口令",
]  # fmt: skip

ORDINARY_KEYS = [
    "key", "session_key", "keys", "token_count", "tokens", "max_tokens", "context_window_tokens", "tokens_before",
    "summary_max_tokens", "password_policy", "password_hint", "secret_name", "secret_id", "author", "authors",
    "authority", "channel", "passage", "keyboard", "monkey", "session_id", "cookies_enabled", "id", "name", "",
]  # fmt: skip


@pytest.mark.parametrize("key", SECRET_KEYS)
def test_secret_names_in_any_case_and_spelling(key: str) -> None:
    assert is_secret_name(key)


@pytest.mark.parametrize("key", ORDINARY_KEYS)
def test_keys_that_only_contain_a_name_are_not_secret_names(key: str) -> None:
    assert not is_secret_name(key)


def test_every_name_is_data_and_each_is_matched() -> None:
    for name in SECRET_NAMES:
        assert is_secret_name(name), name
        assert is_secret_name(f"MY_{name.upper()}"), name


class TestValuesUnderSecretNames:
    def test_values_are_masked_whole_at_any_depth_and_others_kept(self) -> None:
        value = {
            "password": "hunter2",
            "aws_secret_access_key": "harmless-looking",
            "auth": {"token": "abc", "scheme": "basic"},
            "headers": [{"X-Api-Key": "k1"}, {"Accept": "text/html"}],
            "db": {"Pin-Password": 73914682, "port": 5432, "ssl": True},
            "tokens_before": 1234,
            "key": "wechat:wxid_1",
        }
        masked = mask_json(value)
        text = json.dumps(masked)
        for raw in ("hunter2", "harmless-looking", '"abc"', "basic", '"k1"', "73914682"):
            assert raw not in text, raw
        assert masked["tokens_before"] == 1234 and masked["key"] == "wechat:wxid_1"
        assert masked["db"]["port"] == 5432 and masked["db"]["ssl"] is True
        assert masked["headers"][1] == {"Accept": "text/html"}
        assert masked["password"].startswith("[secret:named:")

    def test_references_and_empty_values_are_not_secrets(self) -> None:
        value = {"password": "", "token": "${GITHUB_TOKEN}", "secret": "required", "password_file": "/run/secrets/db"}
        assert mask_json(value) == value

    def test_it_is_idempotent_and_the_placeholder_depends_on_the_key(self) -> None:
        once = mask_json({"password": "hunter2"}, key="k1")
        assert mask_json(once, key="k1") == once
        assert mask_json({"password": "hunter2"}, key="k2") != once

    def test_tool_call_arguments_are_read_as_json(self) -> None:
        arguments = json.dumps({"credentials": {"user": "bob", "value": "plainvalue"}, "cmd": "ls"})
        masked = mask_arguments(arguments)
        assert "plainvalue" not in masked and json.loads(masked)["cmd"] == "ls"
        message = {"tool_calls": [{"function": {"name": "login", "arguments": arguments}}]}
        assert "plainvalue" not in json.dumps(mask_json(message))


class TestNamesInText:
    @pytest.mark.parametrize(
        ("text", "secret"),
        [
            ("SMTP_PASSWD=sup3rs3cret", "sup3rs3cret"),
            ("db-password: sup3rs3cret", "sup3rs3cret"),
            ('{"client_secret": "sup3r s3cret"}', "sup3r s3cret"),
            ('"{\\"apiKey\\": \\"sup3rs3cret\\"}"', "sup3rs3cret"),  # JSON text inside a JSON string
            ("Authorization: Basic dXNlcjpwYXNzd29yZA==", "dXNlcjpwYXNzd29yZA"),
            ("Cookie: sessionid=abc123def456", "abc123def456"),
            ("export GITHUB_TOKEN='sup3rs3cret'", "sup3rs3cret"),
        ],
    )
    def test_labelled_values(self, text: str, secret: str) -> None:
        assert secret not in mask_secrets(text)

    @pytest.mark.parametrize(
        "text",
        [
            "PWD=/srv/ci/project OLDPWD=/tmp",
            "password=$DB_PASSWORD token: ${{ secrets.TOKEN }}",
            "max_tokens=512 token_count: 77 tokens: 1200",
            "the author: Jane, authored 3 files",
            "password_policy: strict",
        ],
    )
    def test_references_and_counts_are_left_alone(self, text: str) -> None:
        assert mask_secrets(text) == text


class TestCredentialsWithoutAPrefix:
    SECRET = "Kq7xFarAwsZqkwXy0+3mB9vLpQz2R8sTuWn4HaP1"

    def test_an_aws_secret_far_from_its_id_is_masked_when_a_name_is_near(self) -> None:
        text = f"id AKIAZ7QX4ND2LMVB6HPE\n{'filler text about the rotation. ' * 12}\nsecret access key is {self.SECRET}"
        assert len(text) > 300 + len(self.SECRET)
        assert self.SECRET not in mask_secrets(text)
        assert "[secret:credential:" in mask_secrets(f"api token for the bot:\n  {self.SECRET}\n")

    def test_without_a_name_near_it_a_random_run_stays(self) -> None:
        text = f"checksum column: {self.SECRET}"
        assert mask_secrets(text) == text

    @pytest.mark.parametrize(
        "value",
        [
            hashlib.sha1(b"x").hexdigest(),  # a git sha
            hashlib.sha256(b"x").hexdigest(),
            "/srv/runner/builds/ProjectName2/src/auth/TokenStore.py",
            "django/contrib/auth/tokens/PasswordResetTokenGenerator",
            "PasswordResetTokenGeneratorTests2",
            "test_password_reset_token_generator_2024",
        ],
    )
    def test_hashes_paths_and_identifiers_near_a_name_stay(self, value: str) -> None:
        text = f"the token check failed in {value} (secret key rotation)"
        assert mask_secrets(text) == text
