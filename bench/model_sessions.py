# ruff: noqa: E501  (the sessions are data: long sentences stay on one line)
"""Write the six sessions the real-model benchmark runs on (``bench/data/sessions/``).

Run: .venv/bin/python bench/model_sessions.py   (the output is the same byte for byte every time)

Shaped like real agent runs, three in English and three in Chinese:

- ``*_coding_*``: a coding agent with read_file / write_file / terminal tools, pytest output, edits;
- ``*_ops_*``: deploys and migrations over kubectl / psql / shell, long logs;
- ``*_support_*``: tau-bench-like customer service (user ids such as ``sofia_kim_7287``, reservation and
  order ids inside tool arguments, a harness system prompt with "MUST" rules, a simulated user giving
  new requests mid-run).

Each one says what people really say, the way they say it: prohibitions, approvals, limits, a standing
test command, hedged statements, errors that appear only in tool output, identifiers, requests made
mid-run. What a reader of the compressed history needs is listed in the session's
``metadata.facts`` (kind, probe text, message index): ``bench/model.py`` checks the probes against
the summary. The facts were written with the sessions, before any model summarized them.

Each file is a session object ``{"key", "metadata", "messages"}`` (``agent_compression.session_file`` reads it).
"""

from __future__ import annotations

import json
import random
import sys
from pathlib import Path
from typing import Any

OUT = Path(__file__).resolve().parent / "data" / "sessions"

Message = dict[str, Any]
#: how long file reads are, relative to the numbers written below (keeps the files near 20-30k tokens)
SCALE = 0.6


class Builder:
    """Appends messages and records the facts planted in them (with their message index)."""

    def __init__(self, key: str, language: str, system: str, seed: int) -> None:
        self.key = key
        self.language = language
        self.rng = random.Random(seed)
        self.messages: list[Message] = [{"role": "system", "content": system}]
        self.facts: list[dict[str, Any]] = []
        self._calls = 0

    def fact(self, kind: str, probe: str, note: str = "") -> None:
        """A fact in the message just added: ``probe`` is the text a faithful summary keeps."""
        entry: dict[str, Any] = {"kind": kind, "probe": probe, "index": len(self.messages) - 1}
        if note:
            entry["note"] = note
        self.facts.append(entry)

    def user(self, text: str) -> None:
        self.messages.append({"role": "user", "content": text})

    def say(self, text: str) -> None:
        self.messages.append({"role": "assistant", "content": text})

    def tool(self, name: str, args: dict[str, Any], output: str, thought: str | None = None) -> None:
        self._calls += 1
        call_id = f"call_{self.key[:2]}{self._calls:03d}"
        self.messages.append(
            {
                "role": "assistant",
                "content": thought,
                "tool_calls": [
                    {
                        "id": call_id,
                        "type": "function",
                        "function": {"name": name, "arguments": json.dumps(args, ensure_ascii=False)},
                    }
                ],
            }
        )
        self.messages.append({"role": "tool", "tool_call_id": call_id, "name": name, "content": output})

    def write(self) -> Path:
        OUT.mkdir(parents=True, exist_ok=True)
        path = OUT / f"{self.key}.json"
        data = {
            "key": self.key,
            "metadata": {"language": self.language, "written_by": "bench/model_sessions.py", "facts": self.facts},
            "messages": self.messages,
        }
        lines = ",\n".join(json.dumps(m, ensure_ascii=False) for m in data["messages"])
        head = json.dumps({k: v for k, v in data.items() if k != "messages"}, ensure_ascii=False, indent=1)
        path.write_text(head[:-2] + ',\n "messages": [\n' + lines + "\n ]\n}\n", encoding="utf-8")
        json.loads(path.read_text(encoding="utf-8"))  # the hand-made layout must stay valid JSON
        return path


# ---------------------------------------------------------------- filler shaped like real tool output


def code_file(rng: random.Random, module: str, functions: list[str], lines: int = 120, zh: bool = False) -> str:
    out = [
        f'"""{module}: {"账单导出的行处理" if zh else "row handling for the export"}."""',
        "from decimal import Decimal",
        "",
    ]
    n = 0
    lines = int(lines * SCALE)
    while len(out) < lines:
        name = functions[n % len(functions)] + ("" if n < len(functions) else f"_{n}")
        out.append(f"def {name}(row, rates, ctx):")
        for j in range(rng.randint(6, 14)):
            out.append(f"    value_{j} = row.get('field_{j}', Decimal('0')) * rates[{j % 4}]")
        out.append(f"    ctx.log.debug('{name} done for %s', row.get('id'))")
        out.append("    return row")
        out.append("")
        n += 1
    return "\n".join(f"{i + 1:4}  {line}" for i, line in enumerate(out))


def pytest_run(
    rng: random.Random, suite: str, tests: int, failures: list[tuple[str, str]], seconds: float, code: int | None = None
) -> str:
    lines = [
        "============================= test session starts ==============================",
        "platform linux -- Python 3.11.7, pytest-8.3.3, pluggy-1.5.0",
        "rootdir: /srv/app",
        "configfile: pyproject.toml",
        f"collected {tests} items",
        "",
    ]
    files = [f"{suite}/test_{name}.py" for name in ("rows", "money", "writer", "totals", "currency", "filters")]
    fail_names = {name for name, _ in failures}
    per = max(1, tests // len(files))
    for f in files:
        marks = "".join("F" if f"{f}::case_{k}" in fail_names else "." for k in range(per))
        lines.append(f"{f} {marks}{' ' * max(1, 60 - len(f) - len(marks))}[{rng.randint(5, 99):3d}%]")
    for name, error in failures:
        lines += [
            "",
            f"___________________________ {name.split('::')[-1]} ___________________________",
            "",
            "    def test_case(rows, rates):",
            "        out = build_rows(rows, rates)",
            ">       assert out[0]['total'] == expected",
            f"E       {error}",
            "",
            f"{name.split('::')[0]}:{rng.randint(20, 200)}: {error.split(':')[0]}",
        ]
    passed = tests - len(failures)
    summary = f"{len(failures)} failed, {passed} passed" if failures else f"{passed} passed"
    lines += ["", "=========================== short test summary info ============================"]
    lines += [f"FAILED {name} - {error}" for name, error in failures]
    lines.append(f"{'=' * 20} {summary} in {seconds:.2f}s {'=' * 20}")
    rc = code if code is not None else (1 if failures else 0)
    lines.append(f"[exit code {rc}]")
    return "\n".join(lines)


def log_lines(rng: random.Random, service: str, n: int, inject: dict[int, str] | None = None) -> str:
    out = []
    n = int(n * SCALE)
    if inject:
        n = max(n, max(inject) + 1)
    for i in range(n):
        if inject and i in inject:
            out.append(inject[i])
            continue
        out.append(
            f"2026-11-30T14:{(i // 60) % 60:02d}:{i % 60:02d}.{rng.randint(100, 999)}Z INFO {service} "
            f"request_id=req-{rng.randint(10000, 99999)} path=/v1/{rng.choice(['orders', 'invoices', 'health'])} "
            f"status=200 duration_ms={rng.randint(3, 180)}"
        )
    return "\n".join(out)


def pods(rng: random.Random, service: str, ready: int, total: int, restarts: int = 0) -> str:
    lines = ["NAME                                READY   STATUS    RESTARTS   AGE"]
    for i in range(total):
        ok = i < ready
        suffix = f"{rng.randint(1000000, 9999999):x}"[:5]
        lines.append(
            f"{service}-7d9f8c{suffix}   {'1/1' if ok else '0/1'}     {'Running' if ok else 'CrashLoopBackOff'}   "
            f"{0 if ok else restarts}          {rng.randint(2, 59)}m"
        )
    return "\n".join(lines)


# ---------------------------------------------------------------- English coding


def en_coding() -> Builder:
    b = Builder(
        "en_coding_refactor",
        "en",
        "You are a coding agent working in /srv/app. Tools: read_file, write_file, terminal. Work step by step.",
        seed=11,
    )
    r = b.rng
    b.user(
        "The invoice export is too slow and export/invoice_writer.py has grown into one 300-line function. "
        "Please refactor build_rows into smaller pieces. Ticket is INV-20931."
    )
    b.fact("identifier", "INV-20931")
    b.user(
        "A few ground rules before you start: run `pytest tests/export -q` after every change and show me the "
        "tail of the output. Keep each function ≤ 40 lines. And don't modify deploy.sh yet, I'm still talking "
        "to ops about the rollout."
    )
    b.fact("command", "pytest tests/export -q")
    b.fact("limit", "≤ 40 lines")
    b.fact("constraint", "don't modify deploy.sh yet")
    b.say("Understood. I'll read the writer and its tests first, then split build_rows step by step.")
    funcs = ["build_rows", "apply_rates", "format_money", "group_by_customer", "write_csv", "fmt_money"]
    b.tool("read_file", {"path": "export/invoice_writer.py"}, code_file(r, "export/invoice_writer.py", funcs, 170))
    b.fact("path", "export/invoice_writer.py")
    b.tool(
        "read_file", {"path": "tests/export/test_rows.py"}, code_file(r, "tests/export/test_rows.py", ["test_case"], 90)
    )
    b.tool(
        "terminal",
        {"cmd": "pytest tests/export -q"},
        pytest_run(r, "tests/export", 48, [], 6.41),
        "Baseline run before any change.",
    )
    b.say(
        "Baseline: 48 passed. build_rows does four things: rate lookup, money formatting, grouping and CSV "
        "writing. I'll extract apply_rates first."
    )
    b.tool(
        "write_file",
        {"path": "export/invoice_writer.py", "content": code_file(r, "x", ["build_rows", "apply_rates"], 60)},
        "wrote 60 lines to export/invoice_writer.py",
    )
    b.tool(
        "terminal",
        {"cmd": "pytest tests/export -q"},
        pytest_run(
            r,
            "tests/export",
            48,
            [("tests/export/test_currency.py::case_3", "KeyError: 'currency_code'")],
            6.88,
        ),
    )
    b.fact("error", "KeyError: 'currency_code'", "only in the pytest output")
    b.say(
        "One failure in the currency tests after extracting apply_rates. The rate table lookup now happens before "
        "the row is normalized, so the currency key is missing for legacy rows."
    )
    b.user("ok. btw is the slowness the database or our code? the nightly run took 41 minutes yesterday")
    b.fact("identifier", "41 minutes")
    b.tool(
        "terminal",
        {"cmd": "python -m cProfile -s cumtime scripts/export_sample.py --rows 20000 | head -40"},
        "\n".join(
            [
                f"   {r.randint(1, 90000):>6}    {r.random() * 3:6.3f}    {r.random():.4f}   {r.random() * 40:7.3f} "
                f"export/invoice_writer.py:{r.randint(10, 300)}(<genexpr>)"
                for _ in range(38)
            ]
            + ["   20000   31.207    0.0016   38.112 export/rates.py:44(lookup_rate)"]
        ),
    )
    b.say(
        "Most of the time is in export/rates.py:44 lookup_rate — it re-reads the rate table for every row. "
        "It's probably the cache: the lru_cache on load_rate_table was removed in the last release, but I haven't "
        "confirmed that yet."
    )
    b.fact("hedge", "probably the cache", "suspected, not confirmed")
    b.fact("path", "export/rates.py")
    b.user("Interesting. Don't touch rates.py in this PR though, open a separate ticket for the cache.")
    b.fact("constraint", "Don't touch rates.py in this PR")
    b.tool(
        "read_file",
        {"path": "export/rates.py"},
        code_file(r, "export/rates.py", ["lookup_rate", "load_rate_table"], 110),
    )
    b.say("I'll leave rates.py alone and note the cache question for a separate ticket. Back to the currency failure.")
    b.tool(
        "write_file",
        {"path": "export/invoice_writer.py", "content": code_file(r, "x", ["normalize_row", "apply_rates"], 70)},
        "wrote 70 lines to export/invoice_writer.py",
        "Normalize the row before the rate lookup.",
    )
    b.tool("terminal", {"cmd": "pytest tests/export -q"}, pytest_run(r, "tests/export", 48, [], 6.12))
    b.say("48 passed again. Next: extract format_money.")
    b.user("Can you rename fmt_money to format_money while you're at it? It's only used in this module.")
    b.fact("approval", "rename fmt_money to format_money")
    b.tool(
        "terminal",
        {"cmd": "grep -rn 'fmt_money' --include=*.py ."},
        "export/invoice_writer.py:88:def fmt_money(value, currency):\nexport/invoice_writer.py:131:        "
        "cells.append(fmt_money(total, row['currency_code']))\nscripts/backfill_2025.py:19:from export.invoice_writer "
        "import fmt_money",
    )
    b.say(
        "fmt_money is also imported by scripts/backfill_2025.py. I'll rename it and keep a fmt_money alias so the "
        "backfill script does not break."
    )
    b.fact("path", "scripts/backfill_2025.py")
    b.tool(
        "write_file",
        {"path": "export/invoice_writer.py", "content": code_file(r, "x", ["format_money", "fmt_money"], 80)},
        "wrote 80 lines to export/invoice_writer.py",
    )
    b.tool(
        "terminal",
        {"cmd": "pytest tests/export -q"},
        pytest_run(
            r,
            "tests/export",
            48,
            [
                ("tests/export/test_money.py::case_1", "AssertionError: assert '1,204.50 EUR' == '1.204,50 EUR'"),
                ("tests/export/test_money.py::case_4", "AssertionError: assert '0.00 JPY' == '0 JPY'"),
            ],
            7.02,
        ),
    )
    b.fact("error", "assert '0.00 JPY' == '0 JPY'", "only in the pytest output")
    b.say(
        "Two money formatting failures: the locale-specific separators and zero-decimal currencies. The old code "
        "passed a locale argument that my extraction dropped."
    )
    b.tool(
        "read_file",
        {"path": "export/locales.py"},
        code_file(r, "export/locales.py", ["decimals_for", "separators"], 90),
    )
    b.tool(
        "write_file",
        {"path": "export/invoice_writer.py", "content": code_file(r, "x", ["format_money", "decimals_for"], 80)},
        "wrote 80 lines to export/invoice_writer.py",
    )
    b.tool(
        "terminal",
        {"cmd": "pytest tests/export -q"},
        pytest_run(
            r,
            "tests/export",
            48,
            [("tests/export/test_money.py::case_1", "AssertionError: assert '1,204.50 EUR' == '1.204,50 EUR'")],
            6.95,
        ),
    )
    b.say(
        "JPY is fixed; the EUR separator case still fails. The locale comes from the customer record, not the currency."
    )
    b.user(
        "Also, while you're in there, add a test for negative amounts (credit notes). We had a bug last month where "
        "they were exported as positive."
    )
    b.fact("request", "add a test for negative amounts")
    b.tool(
        "terminal",
        {"cmd": "git log --oneline -8 -- export/"},
        "\n".join(
            f"{r.getrandbits(28):07x} {msg}"
            for msg in [
                "Drop lru_cache from load_rate_table (memory)",
                "Export credit notes",
                "Fix rounding of JPY totals",
                "Add group_by_customer",
                "Speed up CSV writing",
                "Rename export job",
                "Initial export",
                "Add rates table",
            ]
        ),
    )
    b.say("The commit 'Drop lru_cache from load_rate_table (memory)' fits the cache suspicion; still unconfirmed.")
    for k in range(3):
        b.tool(
            "read_file",
            {"path": f"tests/export/test_{['money', 'writer', 'totals'][k]}.py"},
            code_file(r, f"tests/export/test_{k}.py", ["test_case", "fixture_rows"], 100),
        )
    b.tool(
        "write_file",
        {"path": "tests/export/test_money.py", "content": "def test_negative_amounts_stay_negative(): ..."},
        "wrote 41 lines to tests/export/test_money.py",
        "Adding the credit-note test.",
    )
    b.tool(
        "write_file",
        {"path": "export/invoice_writer.py", "content": code_file(r, "x", ["format_money", "group_by_customer"], 90)},
        "wrote 90 lines to export/invoice_writer.py",
    )
    b.tool(
        "terminal",
        {"cmd": "pytest tests/export -q"},
        pytest_run(
            r,
            "tests/export",
            49,
            [
                ("tests/export/test_money.py::case_1", "AssertionError: assert '1,204.50 EUR' == '1.204,50 EUR'"),
                (
                    "tests/export/test_writer.py::case_2",
                    "TypeError: group_by_customer() missing 1 required positional argument: 'ctx'",
                ),
            ],
            7.31,
        ),
    )
    b.fact("error", "group_by_customer() missing 1 required positional argument: 'ctx'", "only in the pytest output")
    b.say("The negative-amount test passes. New failure: I forgot to pass ctx to group_by_customer in write_csv.")
    b.tool(
        "terminal",
        {"cmd": "wc -l export/invoice_writer.py && python scripts/func_lengths.py export/invoice_writer.py"},
        "212 export/invoice_writer.py\nbuild_rows 38\nnormalize_row 22\napply_rates 31\nformat_money 27\n"
        "group_by_customer 44\nwrite_csv 35",
    )
    b.fact("identifier", "group_by_customer 44", "over the 40-line limit")
    b.say("group_by_customer is 44 lines, over the 40-line limit. I'll split the sorting out of it next.")
    b.user("Sounds good. Don't commit yet, I want to look at the diff first.")
    b.fact("constraint", "Don't commit yet")
    for _ in range(4):
        b.tool(
            "terminal",
            {"cmd": "git diff --stat && git diff export/invoice_writer.py | head -120"},
            "\n".join(
                f"{'+' if r.random() < 0.5 else '-'}    value_{r.randint(0, 13)} = row.get('field_{r.randint(0, 13)}')"
                for _ in range(120)
            ),
        )
    b.tool(
        "terminal",
        {"cmd": "pytest tests/export -q"},
        pytest_run(
            r,
            "tests/export",
            49,
            [("tests/export/test_money.py::case_1", "AssertionError: assert '1,204.50 EUR' == '1.204,50 EUR'")],
            7.12,
        ),
    )
    b.say(
        "Current state: 48 of 49 pass; the EUR separator test still fails. group_by_customer still needs splitting. "
        "Nothing committed, deploy.sh and rates.py untouched."
    )
    b.user("Fix the EUR one, then split group_by_customer, and stop there so I can review.")
    b.say("Will do: the EUR separator first, then group_by_customer, then I stop for your review.")
    b.tool(
        "read_file",
        {"path": "export/customers.py"},
        code_file(r, "export/customers.py", ["locale_for", "load_customer"], 100),
    )
    b.tool(
        "terminal",
        {"cmd": "pytest tests/export -q -k money"},
        pytest_run(
            r,
            "tests/export",
            12,
            [("tests/export/test_money.py::case_1", "AssertionError: assert '1,204.50 EUR' == '1.204,50 EUR'")],
            1.9,
        ),
    )
    return b


# ---------------------------------------------------------------- English ops


def en_ops() -> Builder:
    b = Builder(
        "en_ops_deploy",
        "en",
        "You are an ops agent with shell access to the staging and production clusters (kubectl, psql, helm). "
        "Explain what you are about to run before running anything that changes state.",
        seed=22,
    )
    r = b.rng
    b.user(
        "We need payments-api 2.14.0 on staging today. It ships migration 0042_add_index (an index on "
        "payments.created_at). Release ticket OPS-5521."
    )
    b.fact("identifier", "OPS-5521")
    b.fact("identifier", "0042_add_index")
    b.user(
        "Rules: never run migrations against production, this is staging only. Run `kubectl -n staging get pods` "
        "after each step so I can see the state. And if the health check fails, retry at most 3 times, then stop and tell me."
    )
    b.fact("constraint", "never run migrations against production")
    b.fact("command", "kubectl -n staging get pods")
    b.fact("limit", "at most 3 times")
    b.say(
        "Understood: staging only, pods listed after each step, at most 3 health-check retries. Checking the current state first."
    )
    b.tool("terminal", {"cmd": "kubectl -n staging get pods"}, pods(r, "payments-api", 3, 3))
    b.tool(
        "terminal",
        {"cmd": "helm -n staging history payments-api --max 10"},
        "\n".join(
            f"{i}\t{['Mon', 'Tue', 'Wed', 'Thu'][i % 4]} Nov {10 + i} 09:1{i}:00 2026\tsuperseded\tpayments-api-2.{i + 4}.0\t2.{i + 4}.0\tUpgrade complete"
            for i in range(1, 10)
        )
        + "\n10\tSun Nov 29 11:02:00 2026\tdeployed\tpayments-api-2.13.2\t2.13.2\tUpgrade complete",
    )
    b.tool(
        "terminal", {"cmd": "kubectl -n staging logs deploy/payments-api --tail=150"}, log_lines(r, "payments-api", 150)
    )
    b.say("Staging runs 2.13.2, three pods healthy. Next I'll look at the migration plan before applying anything.")
    b.tool(
        "terminal",
        {"cmd": "cat migrations/0042_add_index.sql"},
        "-- 0042_add_index\nCREATE INDEX CONCURRENTLY IF NOT EXISTS payments_created_at_idx ON payments (created_at);\n",
    )
    b.tool(
        "terminal",
        {"cmd": 'psql "$STAGING_DSN" -c "select count(*) from payments"'},
        "  count\n----------\n 18403312\n(1 row)",
    )
    b.say(
        "18.4M rows on staging. CREATE INDEX CONCURRENTLY avoids a table lock but needs no long-running transaction on the table. "
        "Shall I apply 0042_add_index on staging?"
    )
    b.user("Yes, I approve running 0042_add_index on staging. Do it before the helm upgrade.")
    b.fact("approval", "I approve running 0042_add_index on staging")
    b.tool(
        "terminal",
        {"cmd": "./scripts/migrate.sh staging 0042_add_index"},
        log_lines(
            r,
            "migrate",
            60,
            {
                55: "2026-11-30T14:00:55.201Z ERROR migrate psycopg.errors.LockNotAvailable: canceling statement due to lock timeout",
                56: "2026-11-30T14:00:55.202Z ERROR migrate migration 0042_add_index failed; nothing applied",
            },
        )
        + "\n[exit code 1]",
    )
    b.fact("error", "psycopg.errors.LockNotAvailable: canceling statement due to lock timeout", "only in tool output")
    b.say("The migration failed with a lock timeout; nothing was applied. Something holds a lock on payments.")
    b.tool(
        "terminal",
        {
            "cmd": 'psql "$STAGING_DSN" -c "select pid, state, xact_start, left(query, 60) from pg_stat_activity where datname=\'payments\'"'
        },
        "\n".join(
            f" {r.randint(1000, 9999)} | idle in transaction | 2026-11-30 1{r.randint(0, 3)}:{r.randint(10, 59)}:00 | "
            f"SELECT * FROM payments WHERE id = {r.randint(1, 10**7)}"
            for _ in range(25)
        ),
    )
    b.say(
        "25 connections 'idle in transaction' from the reporting worker. It's maybe the connection pool of "
        "report-worker leaking transactions; I haven't proven it."
    )
    b.fact("hedge", "maybe the connection pool", "suspected, not confirmed")
    b.user("Don't restart report-worker during business hours, finance runs their closing reports on it until 18:00.")
    b.fact("constraint", "Don't restart report-worker during business hours")
    b.tool("terminal", {"cmd": "kubectl -n staging get pods"}, pods(r, "payments-api", 3, 3))
    b.tool(
        "terminal",
        {"cmd": "kubectl -n staging logs deploy/report-worker --tail=200"},
        log_lines(r, "report-worker", 200),
    )
    b.say("I'll not restart report-worker. Instead I can set lock_timeout higher for the migration session only.")
    b.tool(
        "terminal",
        {"cmd": "PGOPTIONS='-c lock_timeout=120s' ./scripts/migrate.sh staging 0042_add_index --dry-run"},
        "dry run: would execute 1 statement(s)\nCREATE INDEX CONCURRENTLY IF NOT EXISTS payments_created_at_idx ON payments (created_at);\n[exit code 0]",
    )
    b.say("Dry run looks right. I have not run it for real yet.")
    b.user("Hold on with the real run, let me ask finance first whether they can pause reports for 10 minutes.")
    b.fact("constraint", "Hold on with the real run")
    b.user("Meanwhile, can you prepare the helm values diff for 2.14.0 and check the image digest?")
    b.fact("request", "prepare the helm values diff for 2.14.0")
    b.tool(
        "terminal",
        {
            "cmd": "helm -n staging diff upgrade payments-api charts/payments-api -f values/staging.yaml --set image.tag=2.14.0"
        },
        "\n".join(
            f"{'+' if i % 3 else '-'}   {r.choice(['replicas', 'cpu', 'memory', 'env.FEATURE_X', 'image.tag'])}: {r.randint(1, 900)}"
            for i in range(140)
        ),
    )
    b.tool(
        "terminal",
        {"cmd": "crane digest registry.internal/payments-api:2.14.0"},
        "sha256:9f2c4e1b7a0d3c5e8f6a1b2c3d4e5f60718293a4b5c6d7e8f9a0b1c2d3e4f5a6",
    )
    b.fact("identifier", "sha256:9f2c4e1b7a0d3c5e8f6a1b2c3d4e5f60718293a4b5c6d7e8f9a0b1c2d3e4f5a6")
    b.say("Diff prepared; image digest recorded. Waiting for your go on the migration.")
    for _ in range(3):
        b.tool(
            "terminal",
            {"cmd": "kubectl -n staging top pods"},
            "\n".join(
                f"payments-api-{r.getrandbits(20):05x}   {r.randint(100, 900)}m   {r.randint(200, 900)}Mi"
                for _ in range(60)
            ),
        )
    b.tool(
        "terminal",
        {"cmd": "kubectl -n staging logs deploy/payments-api --tail=200"},
        log_lines(
            r,
            "payments-api",
            200,
            {
                120: "2026-11-30T14:02:00.001Z WARN payments-api upstream fx-rates timeout after 2000ms (attempt 1/3)",
            },
        ),
    )
    b.user(
        "Finance says reports can pause at 17:30 for ten minutes. We'll do the migration then. For now only the health checks."
    )
    b.fact("identifier", "17:30")
    b.tool(
        "terminal",
        {"cmd": "./scripts/healthcheck.sh staging payments-api"},
        "GET https://payments.staging.internal/healthz -> 503 (db: degraded)\n[exit code 2]",
    )
    b.tool(
        "terminal",
        {"cmd": "./scripts/healthcheck.sh staging payments-api"},
        "GET https://payments.staging.internal/healthz -> 503 (db: degraded)\n[exit code 2]",
    )
    b.say("Two failed health checks (503, db degraded) — retry 2 of 3. The idle transactions are likely the cause.")
    b.tool("terminal", {"cmd": "kubectl -n staging get pods"}, pods(r, "payments-api", 2, 3, restarts=4))
    b.tool(
        "terminal",
        {"cmd": "kubectl -n staging describe pod payments-api-0"},
        "\n".join(
            f"  {k}: {v}"
            for k, v in [
                ("Liveness", "http-get :8080/healthz delay=10s"),
                ("Last State", "Terminated"),
                ("Reason", "OOMKilled"),
                ("Exit Code", "137"),
            ]
            * 20
        ),
    )
    b.fact("error", "OOMKilled", "only in tool output")
    b.say("One pod is in CrashLoopBackOff, last state OOMKilled (exit 137). That is separate from the db issue.")
    b.user(
        "ok. Don't bump the memory limit yet, I want to see the heap profile first. Leave things as they are until 17:30."
    )
    b.fact("constraint", "Don't bump the memory limit yet")
    b.say("Leaving everything as is until 17:30. Nothing applied: migration not run, helm upgrade not done.")
    return b


# ---------------------------------------------------------------- English support (tau-bench-like)


AIRLINE_POLICY = (
    "# Airline Agent Policy\nThe current time is 2024-05-15 15:00:00 EST.\nAs an airline agent, you can help users "
    "book, modify, or cancel flight reservations.\n- Before taking any actions that update the booking database "
    "(booking, modifying flights, editing baggage, upgrading cabin class, or updating passenger information), you must "
    "list the action details and obtain explicit user confirmation (yes) to proceed.\n- You should only make one tool "
    "call at a time.\n- Every response MUST include at least one tool call or a message to the user.\n- You should deny "
    "user requests that are against this policy.\n"
)


def flight_search(r: random.Random, origin: str, dest: str, date: str, n: int = 14) -> str:
    flights = []
    for _ in range(n):
        code = f"HAT{r.randint(100, 299)}"
        flights.append(
            {
                "flight_number": code,
                "origin": origin,
                "destination": dest,
                "status": "available",
                "scheduled_departure_time_est": f"{r.randint(6, 21):02d}:00:00",
                "date": date,
                "available_seats": {
                    "basic_economy": r.randint(0, 9),
                    "economy": r.randint(0, 12),
                    "business": r.randint(0, 4),
                },
                "prices": {
                    "basic_economy": r.randint(60, 120),
                    "economy": r.randint(120, 260),
                    "business": r.randint(300, 900),
                },
            }
        )
    return json.dumps(flights)


def en_support() -> Builder:
    b = Builder(
        "en_support_airline",
        "en",
        AIRLINE_POLICY
        + "\n"
        + "\n".join(
            f"- Rule {i}: {t}"
            for i, t in enumerate(
                [
                    "Basic economy flights cannot be modified.",
                    "Cabin class must be the same across all flights in a reservation.",
                    "Each reservation can use at most one travel certificate, one credit card and three gift cards.",
                    "Checked bags: regular members get 0 free bags in basic economy, 1 in economy.",
                    "Refunds go to the original payment method within 5 to 7 business days.",
                ]
                * 3
            )
        ),
        seed=33,
    )
    r = b.rng
    b.user("Hi, I need to change my flight. My user id is sofia_kim_7287.")
    b.fact("identifier", "sofia_kim_7287")
    b.tool(
        "get_user_details",
        {"user_id": "sofia_kim_7287"},
        json.dumps(
            {
                "user_id": "sofia_kim_7287",
                "name": {"first_name": "Sofia", "last_name": "Kim"},
                "address": {"address1": "225 Lake Street", "city": "Denver", "state": "CO", "zip": "80203"},
                "membership": "silver",
                "payment_methods": {
                    "credit_card_4421": {"source": "credit_card", "last_four": "7447"},
                    "gift_card_8836": {"source": "gift_card", "amount": 127},
                },
                "reservations": ["NO6JO3", "K1NW8N", "Q4ZB2R"],
            }
        ),
        "Looking up the user.",
    )
    b.say("Thanks Sofia. I see three reservations: NO6JO3, K1NW8N and Q4ZB2R. Which one would you like to change?")
    b.user(
        "NO6JO3, the Denver to Boston one. I want to leave on May 17 instead of May 16. Don't cancel my return flight, I still need it."
    )
    b.fact("identifier", "NO6JO3")
    b.fact("constraint", "Don't cancel my return flight")
    b.tool(
        "get_reservation_details",
        {"reservation_id": "NO6JO3"},
        json.dumps(
            {
                "reservation_id": "NO6JO3",
                "user_id": "sofia_kim_7287",
                "origin": "DEN",
                "destination": "BOS",
                "flight_type": "round_trip",
                "cabin": "economy",
                "flights": [
                    {"flight_number": "HAT084", "date": "2024-05-16", "price": 174},
                    {"flight_number": "HAT211", "date": "2024-05-22", "price": 163},
                ],
                "passengers": [{"first_name": "Sofia", "last_name": "Kim", "dob": "1991-03-08"}],
                "payment_history": [{"payment_id": "credit_card_4421", "amount": 337}],
                "total_baggages": 0,
                "insurance": "no",
            }
        ),
    )
    b.tool(
        "search_direct_flight",
        {"origin": "DEN", "destination": "BOS", "date": "2024-05-17"},
        flight_search(r, "DEN", "BOS", "2024-05-17"),
    )
    b.say("On May 17 there are several economy options. Do you have a preferred time?")
    b.user("Morning if possible. And I don't want to pay more than $200 in total for the change.")
    b.fact("limit", "more than $200 in total")
    b.tool(
        "search_direct_flight",
        {"origin": "DEN", "destination": "BOS", "date": "2024-05-17"},
        flight_search(r, "DEN", "BOS", "2024-05-17"),
    )
    b.tool(
        "update_reservation_flights",
        {
            "reservation_id": "NO6JO3",
            "cabin": "economy",
            "flights": [
                {"flight_number": "HAT170", "date": "2024-05-17"},
                {"flight_number": "HAT211", "date": "2024-05-22"},
            ],
            "payment_id": "credit_card_4421",
        },
        "Error: flight HAT170 not available on 2024-05-17",
        "Checking availability of HAT170.",
    )
    b.fact("error", "flight HAT170 not available on 2024-05-17", "only in tool output")
    b.say(
        "HAT170 turned out to be unavailable. The 08:00 HAT136 has economy seats at $189, a difference of $15. Shall I change to it?"
    )
    b.user("Yes, go ahead with the change to reservation NO6JO3 on HAT136.")
    b.fact("approval", "go ahead with the change to reservation NO6JO3")
    b.tool(
        "update_reservation_flights",
        {
            "reservation_id": "NO6JO3",
            "cabin": "economy",
            "flights": [
                {"flight_number": "HAT136", "date": "2024-05-17"},
                {"flight_number": "HAT211", "date": "2024-05-22"},
            ],
            "payment_id": "credit_card_4421",
        },
        json.dumps(
            {
                "reservation_id": "NO6JO3",
                "flights": [
                    {"flight_number": "HAT136", "date": "2024-05-17", "price": 189},
                    {"flight_number": "HAT211", "date": "2024-05-22", "price": 163},
                ],
                "payment_history": [
                    {"payment_id": "credit_card_4421", "amount": 337},
                    {"payment_id": "credit_card_4421", "amount": 15},
                ],
            }
        ),
    )
    b.fact("identifier", "HAT136")
    b.say(
        "Done: NO6JO3 now departs May 17 on HAT136; the return HAT211 on May 22 is unchanged. $15 charged to the card ending 7447."
    )
    b.user("Great. Also, can you add one checked bag to that reservation?")
    b.fact("request", "add one checked bag")
    b.tool(
        "get_user_details",
        {"user_id": "sofia_kim_7287"},
        json.dumps({"membership": "silver", "note": "silver: 1 free bag in economy"}),
    )
    for _ in range(7):
        b.tool(
            "search_direct_flight",
            {"origin": "BOS", "destination": "DEN", "date": "2024-05-22"},
            flight_search(r, "BOS", "DEN", "2024-05-22", 18),
        )
    b.say("As a silver member in economy you get one free checked bag. Shall I add it to NO6JO3?")
    b.user(
        "Wait, before that — my friend's ticket K1NW8N, I think it was cancelled by the airline? Can you check? Maybe it was a schedule change."
    )
    b.fact("hedge", "Maybe it was a schedule change", "the user is not sure")
    b.tool(
        "get_reservation_details",
        {"reservation_id": "K1NW8N"},
        json.dumps(
            {
                "reservation_id": "K1NW8N",
                "user_id": "sofia_kim_7287",
                "origin": "LAX",
                "destination": "DEN",
                "flights": [{"flight_number": "HAT277", "date": "2024-05-19", "status": "cancelled"}],
                "passengers": [{"first_name": "Ivan", "last_name": "D-0", "dob": "1990-11-02"}],
                "cabin": "business",
                "payment_history": [{"payment_id": "gift_card_8836", "amount": 612}],
            }
        ),
    )
    b.fact("identifier", "K1NW8N")
    b.say(
        "K1NW8N's flight HAT277 on May 19 was cancelled by the airline. The passenger record lists Ivan D-0. It qualifies for a full refund."
    )
    b.fact("identifier", "D-0")
    b.user(
        "Don't refund it yet, I need to ask Ivan if he wants a rebooking instead. Just add the bag to my trip for now."
    )
    b.fact("constraint", "Don't refund it yet")
    b.tool(
        "update_reservation_baggages",
        {"reservation_id": "NO6JO3", "total_baggages": 1, "nonfree_baggages": 0, "payment_id": "credit_card_4421"},
        json.dumps({"reservation_id": "NO6JO3", "total_baggages": 1, "nonfree_baggages": 0}),
    )
    b.say("One free checked bag added to NO6JO3. K1NW8N is untouched until you hear from Ivan.")
    for _ in range(3):
        b.tool(
            "list_all_airports",
            {},
            json.dumps(
                {
                    f"{chr(65 + r.randint(0, 25))}{chr(65 + r.randint(0, 25))}{chr(65 + r.randint(0, 25))}": f"City {r.randint(1, 999)}"
                    for _ in range(120)
                }
            ),
        )
    b.user("One more thing: for anything else today, use the gift card, not the credit card.")
    b.fact("standing", "use the gift card, not the credit card")
    b.tool(
        "get_reservation_details",
        {"reservation_id": "Q4ZB2R"},
        json.dumps(
            {
                "reservation_id": "Q4ZB2R",
                "origin": "DEN",
                "destination": "SEA",
                "cabin": "basic_economy",
                "flights": [{"flight_number": "HAT033", "date": "2024-06-02", "price": 88}],
                "insurance": "no",
            }
        ),
    )
    b.say(
        "Noted: gift_card_8836 for anything else today. Q4ZB2R (DEN to SEA, June 2) is basic economy, so it cannot be modified."
    )
    return b


# ---------------------------------------------------------------- Chinese coding


def zh_coding() -> Builder:
    b = Builder(
        "zh_coding_refactor",
        "zh",
        "你是一个编程助手，工作目录 /srv/billing。工具：read_file、write_file、terminal。每一步先说明再执行。",
        seed=44,
    )
    r = b.rng
    b.user(
        "账单模块 billing/tax.py 里的 calc_tax 太长了，帮我重构一下，顺便看看为什么月底对账总差一分钱。需求单号 BIL-3307。"
    )
    b.fact("identifier", "BIL-3307")
    b.fact("path", "billing/tax.py")
    b.user(
        "几条规矩：每次改完都跑一下 `pytest tests/billing -q`，把结果贴给我。每个函数不超过 40 行。先别改部署脚本 deploy/prod.sh，上线的事还没定。"
    )
    b.fact("command", "pytest tests/billing -q")
    b.fact("limit", "每个函数不超过 40 行")
    b.fact("constraint", "先别改部署脚本 deploy/prod.sh")
    b.say("好的，我先读 billing/tax.py 和相关测试，再逐步拆分 calc_tax。")
    funcs = ["calc_tax", "round_cents", "apply_discount", "sum_lines", "tax_rate_for"]
    b.tool("read_file", {"path": "billing/tax.py"}, code_file(r, "billing/tax.py", funcs, 170, zh=True))
    b.tool("terminal", {"cmd": "pytest tests/billing -q"}, pytest_run(r, "tests/billing", 36, [], 4.2))
    b.say("基线：36 个测试全部通过。calc_tax 里混了折扣、税率查询、四舍五入和汇总，我先把 round_cents 抽出来。")
    b.tool(
        "write_file",
        {"path": "billing/tax.py", "content": code_file(r, "x", ["calc_tax", "round_cents"], 60, zh=True)},
        "已写入 60 行到 billing/tax.py",
    )
    b.tool(
        "terminal",
        {"cmd": "pytest tests/billing -q"},
        pytest_run(
            r,
            "tests/billing",
            36,
            [("tests/billing/test_totals.py::case_2", "AssertionError: expected 118.00, got 117.99")],
            4.5,
        ),
    )
    b.fact("error", "AssertionError: expected 118.00, got 117.99", "只出现在测试输出里")
    b.say("有一个失败：对账金额差了 0.01。可能是缓存的问题——税率表缓存了旧的四舍五入模式，但我还没确认。")
    b.fact("hedge", "可能是缓存的问题", "猜测，未确认")
    b.user("嗯，先别下结论。税率表那边 billing/rates_cache.py 不要动，那是另一个组的代码。")
    b.fact("constraint", "billing/rates_cache.py 不要动")
    b.tool(
        "read_file",
        {"path": "billing/rates_cache.py"},
        code_file(r, "billing/rates_cache.py", ["get_rate", "refresh"], 100, zh=True),
    )
    b.say("好，我只读不改 rates_cache.py。看起来 round_cents 用的是 ROUND_HALF_EVEN，原来内联的代码是 ROUND_HALF_UP。")
    b.tool(
        "write_file",
        {"path": "billing/tax.py", "content": code_file(r, "x", ["round_cents"], 50, zh=True)},
        "已写入 50 行到 billing/tax.py",
        "改回 ROUND_HALF_UP。",
    )
    b.tool("terminal", {"cmd": "pytest tests/billing -q"}, pytest_run(r, "tests/billing", 36, [], 4.3))
    b.say("36 个全部通过，一分钱的差异来自舍入模式，不是缓存。下一步抽 apply_discount。")
    b.user("可以，把 calc_tax 拆成 calc_tax 和 apply_discount 两个函数吧，我同意。")
    b.fact("approval", "把 calc_tax 拆成 calc_tax 和 apply_discount 两个函数")
    for _ in range(2):
        b.tool(
            "read_file",
            {"path": "tests/billing/test_discount.py"},
            code_file(r, "tests/billing/test_discount.py", ["test_case"], 110, zh=True),
        )
    b.tool(
        "write_file",
        {"path": "billing/tax.py", "content": code_file(r, "x", ["calc_tax", "apply_discount"], 90, zh=True)},
        "已写入 90 行到 billing/tax.py",
    )
    b.tool(
        "terminal",
        {"cmd": "pytest tests/billing -q"},
        pytest_run(
            r,
            "tests/billing",
            36,
            [("tests/billing/test_discount.py::case_0", "ZeroDivisionError: division by zero")],
            4.6,
        ),
    )
    b.fact("error", "ZeroDivisionError: division by zero", "只出现在测试输出里")
    b.say("折扣测试报除零错误：数量为 0 的行没有被跳过。")
    b.user("顺便把日志级别改成 INFO，现在 DEBUG 日志太多了。")
    b.fact("request", "把日志级别改成 INFO")
    b.tool(
        "terminal",
        {"cmd": "grep -rn 'DEBUG' billing/ config/"},
        "config/logging.yaml:12:  level: DEBUG\nbilling/tax.py:3:logging.basicConfig(level=logging.DEBUG)",
    )
    b.tool(
        "write_file",
        {"path": "config/logging.yaml", "content": "root:\n  level: INFO\n"},
        "已写入 14 行到 config/logging.yaml",
    )
    b.fact("path", "config/logging.yaml")
    for _ in range(3):
        b.tool("terminal", {"cmd": "tail -n 150 logs/billing.log"}, log_lines(r, "billing", 150))
    b.tool(
        "write_file",
        {"path": "billing/tax.py", "content": code_file(r, "x", ["apply_discount", "sum_lines"], 90, zh=True)},
        "已写入 90 行到 billing/tax.py",
        "跳过数量为 0 的行。",
    )
    b.tool("terminal", {"cmd": "pytest tests/billing -q"}, pytest_run(r, "tests/billing", 36, [], 4.4))
    b.tool(
        "terminal",
        {"cmd": "python scripts/func_lengths.py billing/tax.py"},
        "calc_tax 46\nround_cents 12\napply_discount 33\nsum_lines 18\ntax_rate_for 21",
    )
    b.fact("identifier", "calc_tax 46", "超过 40 行的限制")
    b.say("测试全部通过，但 calc_tax 还有 46 行，超过 40 行的限制，需要再拆。")
    b.user("行。先不要提交，我要先看一下 diff。另外最多再花半小时在这个上面。")
    b.fact("constraint", "先不要提交")
    b.fact("limit", "最多再花半小时")
    for _ in range(4):
        b.tool(
            "terminal",
            {"cmd": "git diff billing/tax.py | head -120"},
            "\n".join(
                f"{'+' if r.random() < 0.5 else '-'}    value_{r.randint(0, 13)} = row.get('field_{r.randint(0, 13)}')"
                for _ in range(120)
            ),
        )
    b.tool(
        "read_file",
        {"path": "billing/invoice.py"},
        code_file(r, "billing/invoice.py", ["render", "totals"], 120, zh=True),
    )
    b.say("目前：36 个测试通过；calc_tax 还要拆到 40 行以内；没有提交；deploy/prod.sh 和 rates_cache.py 都没动。")
    b.user("好，把 calc_tax 再拆一下就停，等我 review。")
    b.tool("terminal", {"cmd": "pytest tests/billing -q -k tax"}, pytest_run(r, "tests/billing", 10, [], 1.3))
    return b


# ---------------------------------------------------------------- Chinese ops


def zh_ops() -> Builder:
    b = Builder(
        "zh_ops_deploy",
        "zh",
        "你是运维助手，可以在预发和生产集群上执行 kubectl、psql、helm。执行任何有副作用的命令之前先说明。",
        seed=55,
    )
    r = b.rng
    b.user("今天要把 order-service 3.2.0 发到预发环境，里面带了迁移 0057_split_orders。变更单 CHG-8812。")
    b.fact("identifier", "CHG-8812")
    b.fact("identifier", "0057_split_orders")
    b.user(
        "注意：先不要执行生产环境的迁移，今天只动预发。每一步之后都运行 `kubectl -n staging get pods` 给我看状态。健康检查失败的话最多重试三次，然后停下来告诉我。"
    )
    b.fact("constraint", "先不要执行生产环境的迁移")
    b.fact("command", "kubectl -n staging get pods")
    b.fact("limit", "最多重试三次")
    b.say("明白：只动预发，每步之后列出 pod，健康检查最多重试三次。先看当前状态。")
    b.tool("terminal", {"cmd": "kubectl -n staging get pods"}, pods(r, "order-service", 3, 3))
    b.tool(
        "terminal",
        {"cmd": "kubectl -n staging logs deploy/order-service --tail=200"},
        log_lines(r, "order-service", 200),
    )
    b.tool(
        "terminal",
        {"cmd": "cat migrations/0057_split_orders.sql"},
        "-- 0057_split_orders\nALTER TABLE orders ADD COLUMN shard_key integer;\nUPDATE orders SET shard_key = id % 16;\n",
    )
    b.say("迁移会给 orders 加列并回填 shard_key。要在预发执行 0057_split_orders 吗？")
    b.user("我批准在预发环境执行迁移 0057_split_orders。")
    b.fact("approval", "我批准在预发环境执行迁移 0057_split_orders")
    b.tool(
        "terminal",
        {"cmd": "./scripts/migrate.sh staging 0057_split_orders"},
        log_lines(
            r,
            "migrate",
            80,
            {
                77: "2026-11-30T14:01:17.330Z ERROR migrate redis.exceptions.ConnectionError: Error 111 connecting to 10.0.3.17:6379. Connection refused.",
                78: "2026-11-30T14:01:17.331Z ERROR migrate could not acquire migration lock; aborting",
            },
        )
        + "\n[exit code 1]",
    )
    b.fact("error", "Error 111 connecting to 10.0.3.17:6379. Connection refused.", "只出现在工具输出里")
    b.fact("identifier", "10.0.3.17:6379")
    b.say("迁移没有执行：迁移脚本要先在 Redis 上拿锁，连接 10.0.3.17:6379 被拒绝。")
    b.tool("terminal", {"cmd": "kubectl -n staging get pods -l app=redis"}, pods(r, "redis", 0, 1, restarts=7))
    b.tool(
        "terminal",
        {"cmd": "kubectl -n staging logs redis-0 --previous --tail=150"},
        log_lines(
            r, "redis", 150, {149: "1:M 30 Nov 2026 14:00:59.001 # Can't open the append-only file: Permission denied"}
        ),
    )
    b.fact("error", "Can't open the append-only file: Permission denied", "只出现在工具输出里")
    b.say("Redis 在 CrashLoopBackOff，日志说打不开 AOF 文件（权限被拒绝）。疑似昨天挂载卷的权限变更导致的，还没确认。")
    b.fact("hedge", "疑似昨天挂载卷的权限变更导致的", "猜测，未确认")
    b.user("redis 的卷别动，存储组在查。不要删 PVC，里面有别的服务的数据。")
    b.fact("constraint", "不要删 PVC")
    b.tool("terminal", {"cmd": "kubectl -n staging get pods"}, pods(r, "order-service", 3, 3))
    for _ in range(3):
        b.tool(
            "terminal",
            {"cmd": "kubectl -n staging describe pvc redis-data-redis-0"},
            "\n".join(
                f"  {k}: {v}"
                for k, v in [
                    ("Status", "Bound"),
                    ("Volume", "pvc-5d1e9c"),
                    ("StorageClass", "ceph-rbd"),
                    ("Access Modes", "RWO"),
                    ("Events", "<none>"),
                ]
                * 25
            ),
        )
    b.user("先准备一下 helm 升级到 3.2.0 的 diff，看看镜像 digest。")
    b.fact("request", "准备一下 helm 升级到 3.2.0 的 diff")
    b.tool(
        "terminal",
        {"cmd": "helm -n staging diff upgrade order-service charts/order-service --set image.tag=3.2.0"},
        "\n".join(
            f"{'+' if i % 3 else '-'}   {r.choice(['replicas', 'cpu', 'memory', 'env.SHARDS', 'image.tag'])}: {r.randint(1, 900)}"
            for i in range(150)
        ),
    )
    b.tool(
        "terminal",
        {"cmd": "crane digest registry.internal/order-service:3.2.0"},
        "sha256:4b8e2d7f1c9a0e3b5d6f7a8c9e0b1d2f3a4c5e6f7b8d9e0a1c2b3d4e5f6a7b8c",
    )
    b.fact("identifier", "sha256:4b8e2d7f1c9a0e3b5d6f7a8c9e0b1d2f3a4c5e6f7b8d9e0a1c2b3d4e5f6a7b8c")
    b.say("diff 已准备好，镜像 digest 已记录。迁移还没执行，helm 也没升级。")
    b.tool(
        "terminal",
        {"cmd": "./scripts/healthcheck.sh staging order-service"},
        "GET https://orders.staging.internal/healthz -> 503 (redis: down)\n[exit code 2]",
    )
    b.tool(
        "terminal",
        {"cmd": "./scripts/healthcheck.sh staging order-service"},
        "GET https://orders.staging.internal/healthz -> 503 (redis: down)\n[exit code 2]",
    )
    b.tool(
        "terminal",
        {"cmd": "./scripts/healthcheck.sh staging order-service"},
        "GET https://orders.staging.internal/healthz -> 503 (redis: down)\n[exit code 2]",
    )
    b.say("健康检查已经重试三次，全部 503（redis: down）。按你的要求停下来：等 Redis 恢复再继续。")
    for _ in range(3):
        b.tool(
            "terminal",
            {"cmd": "kubectl -n staging logs deploy/order-service --tail=200"},
            log_lines(r, "order-service", 200),
        )
    b.user("好的，等存储组的消息。在那之前什么都别改，也别重启 order-service。")
    b.fact("constraint", "别重启 order-service")
    b.tool("terminal", {"cmd": "kubectl -n staging get pods"}, pods(r, "order-service", 3, 3))
    b.say(
        "收到：在存储组回复之前不做任何改动，也不重启 order-service。当前：迁移未执行、helm 未升级、Redis 仍在崩溃重启。"
    )
    return b


# ---------------------------------------------------------------- Chinese support (tau-bench-like retail)


RETAIL_POLICY = (
    "# 零售客服规则\n当前时间 2024-05-15 15:00。你可以帮用户查询、退货、换货、取消订单。\n- 在修改数据库之前（退货、换货、"
    "取消、修改地址），必须列出操作详情并得到用户明确确认（是）。\n- 每次只调用一个工具。\n- 每条回复必须至少包含一次工具调用或一条给用户的消息。\n"
    "- 违反规则的请求要拒绝。\n"
)


def order_json(r: random.Random, order_id: str, user_id: str, status: str, items: int = 4) -> str:
    return json.dumps(
        {
            "order_id": order_id,
            "user_id": user_id,
            "status": status,
            "items": [
                {
                    "name": r.choice(["蓝牙耳机", "保温杯", "机械键盘", "运动鞋", "台灯"]),
                    "item_id": str(r.randint(10**9, 10**10 - 1)),
                    "price": r.randint(30, 400),
                    "options": {"颜色": r.choice(["黑", "白", "蓝"])},
                }
                for _ in range(items)
            ],
            "payment_history": [
                {"payment_method_id": "paypal_5514830", "amount": r.randint(100, 900), "transaction_type": "payment"}
            ],
        },
        ensure_ascii=False,
    )


def zh_support() -> Builder:
    b = Builder(
        "zh_support_retail",
        "zh",
        RETAIL_POLICY
        + "\n"
        + "\n".join(
            f"- 条款 {i}：{t}"
            for i, t in enumerate(
                [
                    "已发货订单不能取消，只能在收货后退货。",
                    "换货只能换同一商品的其他选项。",
                    "退款原路返回，5 到 7 个工作日到账。",
                    "礼品卡余额不能提现。",
                    "一个订单只能退货一次。",
                ]
                * 3
            )
        ),
        seed=66,
    )
    r = b.rng
    b.user("你好，我想退一个东西。我的用户名是 li_wei_3391。")
    b.fact("identifier", "li_wei_3391")
    b.tool("find_user_id_by_username", {"username": "li_wei_3391"}, "li_wei_3391")
    b.tool(
        "get_user_details",
        {"user_id": "li_wei_3391"},
        json.dumps(
            {
                "user_id": "li_wei_3391",
                "name": {"first_name": "伟", "last_name": "李"},
                "address": {"city": "杭州", "address1": "西湖区文三路 88 号"},
                "payment_methods": {
                    "paypal_5514830": {"source": "paypal"},
                    "gift_card_2207": {"source": "gift_card", "balance": 65},
                },
                "orders": ["#W5823417", "#W1192604", "#W7730285"],
            },
            ensure_ascii=False,
        ),
    )
    b.say("您好，李先生。您名下有三个订单：#W5823417、#W1192604、#W7730285。您想退哪一个里面的商品？")
    b.user("#W5823417 里的那个机械键盘。不要取消我妈妈那张订单 #W1192604，那个她还要用。")
    b.fact("identifier", "#W5823417")
    b.fact("constraint", "不要取消我妈妈那张订单 #W1192604")
    b.tool("get_order_details", {"order_id": "#W5823417"}, order_json(r, "#W5823417", "li_wei_3391", "delivered"))
    b.tool("get_order_details", {"order_id": "#W1192604"}, order_json(r, "#W1192604", "li_wei_3391", "pending"))
    for _ in range(4):
        b.tool(
            "get_product_details",
            {"product_id": str(r.randint(10**9, 10**10 - 1))},
            json.dumps(
                {
                    "name": "机械键盘",
                    "variants": {
                        str(r.randint(10**9, 10**10 - 1)): {
                            "颜色": r.choice(["黑", "白"]),
                            "轴体": r.choice(["红轴", "青轴", "茶轴"]),
                            "available": r.random() < 0.5,
                            "price": r.randint(200, 500),
                        }
                        for _ in range(40)
                    },
                },
                ensure_ascii=False,
            ),
        )
    b.user("退款总共不要超过 200 元也行，我只是想把钱退回 PayPal。可能是键盘的轴体有问题，按键有时候不灵。")
    b.fact("hedge", "可能是键盘的轴体有问题", "用户的猜测")
    b.tool(
        "return_delivered_order_items",
        {"order_id": "#W5823417", "item_ids": ["8823019934"], "payment_method_id": "paypal_5514830"},
        "Error: item 8823019934 not found in order #W5823417",
    )
    b.fact("error", "item 8823019934 not found in order #W5823417", "只出现在工具输出里")
    b.say(
        "刚才的商品编号不对。订单里的机械键盘编号是 6117428830，价格 329 元。确认退这一件，退款 329 元回到 PayPal 吗？"
    )
    b.fact("identifier", "6117428830")
    b.user("确认，就退这件吧。")
    b.fact("approval", "确认，就退这件吧")
    b.tool(
        "return_delivered_order_items",
        {"order_id": "#W5823417", "item_ids": ["6117428830"], "payment_method_id": "paypal_5514830"},
        json.dumps(
            {
                "order_id": "#W5823417",
                "status": "return requested",
                "return_items": ["6117428830"],
                "refund": {"payment_method_id": "paypal_5514830", "amount": 329},
            },
            ensure_ascii=False,
        ),
    )
    b.say("已提交退货：#W5823417 的机械键盘（6117428830），329 元将原路退回 PayPal，5 到 7 个工作日到账。")
    b.user("顺便帮我查一下 #W7730285 的物流，好像一直没动。还有，工单 D-0 是我上周提的投诉，能看到吗？")
    b.fact("request", "查一下 #W7730285 的物流")
    b.fact("identifier", "D-0")
    b.tool("get_order_details", {"order_id": "#W7730285"}, order_json(r, "#W7730285", "li_wei_3391", "processed"))
    for _ in range(3):
        b.tool(
            "track_shipment",
            {"order_id": "#W7730285"},
            json.dumps(
                [
                    {
                        "time": f"2024-05-{r.randint(8, 14):02d} {r.randint(0, 23):02d}:00",
                        "location": r.choice(["杭州转运中心", "上海分拨", "嘉兴网点"]),
                        "event": r.choice(["到达", "发出", "滞留"]),
                    }
                    for _ in range(60)
                ],
                ensure_ascii=False,
            ),
        )
    b.say("#W7730285 已在杭州转运中心滞留 3 天。工单 D-0 我这边查不到详情，系统只显示状态“处理中”。")
    b.user("那就先别催了，明天再说。以后退款都用礼品卡 gift_card_2207 就行，不要再退到 PayPal 了。")
    b.fact("standing", "以后退款都用礼品卡 gift_card_2207")
    b.tool(
        "get_user_details",
        {"user_id": "li_wei_3391"},
        json.dumps({"payment_methods": {"gift_card_2207": {"balance": 65}}}, ensure_ascii=False),
    )
    for _ in range(4):
        b.tool(
            "list_products",
            {"category": "键盘"},
            json.dumps(
                {str(r.randint(10**9, 10**10 - 1)): f"键盘 {r.randint(1, 999)} 型" for _ in range(150)},
                ensure_ascii=False,
            ),
        )
    b.say("好的，之后的退款都用礼品卡 gift_card_2207。#W1192604 没有动。")
    return b


BUILDERS = [en_coding, en_ops, en_support, zh_coding, zh_ops, zh_support]


def main() -> None:
    from agent_compression import count_tokens

    total = 0
    for build in BUILDERS:
        b = build()
        path = b.write()
        size = path.stat().st_size
        total += size
        print(
            f"{path.name:28} {len(b.messages):4} msgs {count_tokens(b.messages):7} tokens {size / 1024:7.1f} KB {len(b.facts):3} facts"
        )
    print(f"total {total / 1024:.0f} KB")


if __name__ == "__main__":
    sys.exit(main())
