from __future__ import annotations

import time

from compression.secrets import contains_secret, mask_secrets, secret_placeholder

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
