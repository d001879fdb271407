from __future__ import annotations

import hashlib
import json
import subprocess
import sys
import time

import pytest

from agent_compression.secrets import contains_secret, mask_arguments, mask_messages, mask_secrets, secret_placeholder
from tests.compression.secret_samples import SECRET_SAMPLES, SecretSample

OPENAI_KEY = "sk-proj-AbCdEfGhIjKlMnOpQrStUvWxYz0123456789"


class TestMaskSecrets:
    def test_it_masks_openai_keys_with_a_stable_placeholder(self) -> None:
        text = f"export OPENAI_API_KEY={OPENAI_KEY}\nagain: {OPENAI_KEY}"
        masked = mask_secrets(text)
        assert OPENAI_KEY not in masked
        placeholder = secret_placeholder("api_key", OPENAI_KEY)
        assert masked.count(placeholder) == 2

    def test_it_maps_different_secrets_to_different_placeholders(self) -> None:
        a = mask_secrets("sk-aaaaaaaaaaaaaaaaaaaaaaaa")
        b = mask_secrets("sk-bbbbbbbbbbbbbbbbbbbbbbbb")
        assert a != b and a.startswith("[secret:api_key:")

    def test_it_masks_each_kind(self) -> None:
        samples = {
            "github": "token ghp_abcdefghijklmnopqrstuvwxyz0123456789",
            "slack": "xoxb-1234567890-abcdefghijkl",
            "aws_key": "AKIAIOSFODNN7EXAMPLE",
            "jwt": "eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxMjM0NTY3ODkwIn0.dozjgNryP4J3jVmNHl0w5N_XgL0n3I9PlFUP0THsR8U",
            "bearer": "Authorization: Bearer abcdef0123456789abcdef",
            "url_password": "postgres://admin:hunter2secret@db.internal:5432/app",
            "password": 'password="correct horse"; api_key=abcd1234efgh',
            "private_key": "-----BEGIN RSA PRIVATE KEY-----\nMIIEowIBAAKCAQEA\n-----END RSA PRIVATE KEY-----",
        }
        for kind, text in samples.items():
            masked = mask_secrets(text)
            assert f"[secret:{kind}:" in masked, (kind, masked)

    def test_it_keeps_the_key_name_and_url_host(self) -> None:
        masked = mask_secrets("postgres://admin:hunter2secret@db.internal:5432/app api_key=abcd1234efgh")
        assert "postgres://admin:" in masked and "@db.internal:5432/app" in masked
        assert "api_key=" in masked and "hunter2secret" not in masked and "abcd1234efgh" not in masked

    def test_it_masks_chinese_password_labels(self) -> None:
        assert "mima123456" not in mask_secrets("数据库密码：mima123456")

    def test_it_is_idempotent(self) -> None:
        text = f"key {OPENAI_KEY} token: abcdefgh12345678 Bearer abcdef0123456789abcdef"
        once = mask_secrets(text)
        assert mask_secrets(once) == once

    def test_it_leaves_ordinary_text_alone(self) -> None:
        text = "Do not change anything under infra/terraform. 先不要修改部署脚本。 The key point is speed."
        assert mask_secrets(text) == text
        assert not contains_secret(text)

    def test_it_is_fast_on_big_text_without_secrets(self) -> None:
        text = "rows = fetch_batch(cursor, size=BATCH)  # a line of code\n" * 200_000  # ~11 MB
        started = time.perf_counter()
        assert mask_secrets(text) == text
        assert time.perf_counter() - started < 5  # generous: a smoke check, not a benchmark


@pytest.mark.parametrize("sample", SECRET_SAMPLES, ids=lambda s: f"{s.kind}:{s.text[:24]}")
def test_it_masks_every_kind_of_sample(sample: SecretSample) -> None:
    masked = mask_secrets(sample.text)
    assert sample.secret not in masked
    assert f"[secret:{sample.kind}:" in masked, masked
    assert mask_secrets(masked) == masked


class TestKeyedPlaceholders:
    def test_the_callers_key_changes_the_placeholder_and_keeps_it_stable(self) -> None:
        a = mask_secrets(OPENAI_KEY, key="console-key")
        assert (
            a
            == mask_secrets(OPENAI_KEY, key=b"console-key")
            == secret_placeholder("api_key", OPENAI_KEY, "console-key")
        )
        assert a != mask_secrets(OPENAI_KEY, key="another") != mask_secrets(OPENAI_KEY)

    def test_a_short_password_cannot_be_confirmed_with_a_plain_hash(self) -> None:
        placeholder = mask_secrets("password=hunter2x", key="k")
        assert hashlib.sha256(b"hunter2x").hexdigest()[:8] not in placeholder

    def test_the_default_is_stable_across_processes(self) -> None:
        code = "from agent_compression.secrets import mask_secrets; print(mask_secrets('password=hunter2x'))"
        out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
        assert out.strip() == mask_secrets("password=hunter2x")


class TestFewerFalseAlarms:
    def test_it_leaves_git_shas_and_booleans_near_labels_alone(self) -> None:
        sha = "9fceb02d0ae598e95dc970b74767f19372d61af8"
        text = f"AKIAIOSFODNN7EXAMPLE was rotated in commit {sha}; auth: true"
        masked = mask_secrets(text)
        assert sha in masked and "auth: true" in masked and "AKIAIOSFODNN7EXAMPLE" not in masked

    def test_it_masks_a_quoted_password_with_spaces_whole(self) -> None:
        assert "horse" not in mask_secrets('password = "correct horse battery"')

    def test_an_assignment_right_after_a_colon_is_masked(self) -> None:
        # was: the label's lookbehind refused any ':' before it, so session keys like `x:password=...` leaked
        for text in ("wechat:password=hunter22", "prod:token=abcdef123456"):
            assert "hunter22" not in mask_secrets(text) and "abcdef123456" not in mask_secrets(text)

    def test_a_placeholder_is_not_read_as_a_new_assignment(self) -> None:
        for kind in ("password", "api_key", "url_password", "private_key"):
            placeholder = f"[secret:{kind}:abcd1234]"
            assert mask_secrets(f"value {placeholder} end") == f"value {placeholder} end"


class TestMaskMessages:
    def test_it_masks_content_parts_and_arguments_keeping_ids_and_json(self) -> None:
        token = "ghp_" + "a" * 36
        args = json.dumps({"command": f'export TOKEN="{OPENAI_KEY}" GH={token}'})
        messages = [
            {"role": "user", "content": [{"type": "text", "text": f"key {OPENAI_KEY}"}]},
            {"role": "assistant", "content": None, "tool_calls": [
                {"id": "call_sk-123456789012345678", "type": "function",
                 "function": {"name": "terminal", "arguments": args}},
            ]},
            {"role": "tool", "tool_call_id": "call_sk-123456789012345678", "content": f"ok {token}"},
            {"role": "assistant", "content": "nothing secret here"},
        ]  # fmt: skip
        masked = mask_messages(messages)
        assert OPENAI_KEY not in json.dumps(masked) and token not in json.dumps(masked)
        call = masked[1]["tool_calls"][0]
        assert call["id"] == masked[2]["tool_call_id"] == "call_sk-123456789012345678"
        assert "[secret:api_key:" in json.loads(call["function"]["arguments"])["command"]
        assert masked[3] is messages[3]  # unchanged messages are reused
        assert messages[0]["content"][0]["text"] == f"key {OPENAI_KEY}"  # the input is not mutated

    def test_an_escaped_quote_does_not_hide_a_value_nor_break_the_json(self) -> None:
        args = json.dumps({"command": 'export PASSWORD="pw-9f8e7d6c" && deploy'})
        masked = mask_arguments(args)
        assert "pw-9f8e7d6c" not in masked and json.loads(masked)["command"].endswith("&& deploy")


def test_masking_a_long_history_without_secrets_stays_cheap() -> None:
    messages = [
        {"role": "tool", "tool_call_id": f"c{i}", "content": "rows = fetch_batch(cursor, size=BATCH)\n" * 50}
        for i in range(4_000)
    ]  # ~8 MB
    started = time.perf_counter()
    assert mask_messages(messages) == messages
    assert time.perf_counter() - started < 5  # a smoke check, not a benchmark
