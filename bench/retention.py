"""Fact retention, measured honestly: facts planted where they really occur, per kind and per window.

Run: .venv/bin/python bench/retention.py [--windows 8000,16000,32000] [--seeds 2] [--misses dev]

Synthetic sessions of three shapes, sized to several times the window:

- ``coding`` (English and Chinese): read_file / terminal / write_file tools, log and search output;
- ``swe``: shaped like mini-swe-agent runs (one ``bash`` tool, ``THOUGHT:`` + one command, edits
  through shell commands, ``<returncode>`` output, a 3,000-line pytest run);
- ``tau`` (English and Chinese): shaped like tau-bench airline customer service (user ids,
  reservation ids inside tool arguments, a user giving instructions mid-run).

Facts are planted where they occur in real sessions: early in the middle, anywhere in the middle,
in the middle of long tool output (an exception line inside 3,000 lines of pytest output), inside
tool arguments, in user turns phrased many ways in both languages (a command to run after every
change, limits, standing "from now on" instructions, approvals, prohibitions), an early file read,
files edited only through shell commands (``cat > x.py``, ``sed -i``, ``tee``, ``>``).

**Held-out split.** Every phrasing template is tagged ``dev`` or ``held``. Both sets were written
before the extractor was tuned; tuning looked only at ``dev`` misses (``--misses dev``). The
headline is the ``held`` number. A fact the code cannot find is a finding, not a reason to move it.

A fact counts as kept when its probe text appears in the output messages (whitespace collapsed).
The baseline is a sliding window: the system message plus the most recent messages in the same
number of tokens as the pipeline's output. Constraints are also checked with ``check_drift``
(no ``constraint_inverted`` / ``constraint_dropped`` finding): "kept with negation".

Real runs: given a folder of them (``--real DIR`` or ``$REAL_RUNS_DIR``), its runs are compressed
too and probed for task ids (ids in tool arguments), edited files, the last error and later user
instructions found in the middle. That folder is never part of the repository; without one this
part is skipped with a message. Prints numbers only; nothing is asserted.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import re
import sys
import time
from collections import Counter, defaultdict
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from agent_compression import CompressionConfig, Compressor, ExtractiveSummarizer, check_drift, count_tokens

Message = dict[str, Any]
Rng = random.Random

# ---------------------------------------------------------------- phrasings (dev / held-out)
# Each template: (split, text with {placeholders}, probe) where probe is "sentence" (the whole rendered
# sentence must survive) or the name of a placeholder whose value must survive.

CMDS = [
    "pytest -x tests/unit -q",
    "make lint && make test",
    "ruff check . && mypy src",
    "npm run test -- --watch=false",
    "python -m pytest tests/test_export.py -k refund",
    "go test ./... -race",
    "tox -e py312 -- -x",
    "./scripts/check.sh --fast",
]

USER_PLANTS: dict[str, dict[str, list[tuple[str, str, str]]]] = {
    "en": {
        "command": [
            ("dev", "After every change, run `{cmd}` and show me the result.", "cmd"),
            ("dev", "Please run {cmd} after each edit.", "cmd"),
            ("dev", "Make sure you run `{cmd}` whenever you touch the code.", "cmd"),
            ("held", "Every time you modify a file, execute `{cmd}` before moving on.", "cmd"),
            ("held", "Rule for this task: each change gets a `{cmd}` run.", "cmd"),
            ("held", "Before you tell me something is done, always run {cmd}.", "cmd"),
        ],
        "limit": [
            ("dev", "Keep every function under {n} lines.", "sentence"),
            ("dev", "No function may be longer than {n} lines.", "sentence"),
            ("dev", "Lines must be at most {m} characters.", "sentence"),
            ("held", "Please keep functions short: {n} lines max.", "sentence"),
            ("held", "Limit each PR to {k} files or fewer.", "sentence"),
            ("held", "Don't let any module grow past {n2} lines.", "sentence"),
            ("held", "The response time has to stay below {ms} ms.", "sentence"),
        ],
        "standing": [
            ("dev", "From now on, write all commit messages in English.", "sentence"),
            ("dev", "Going forward, use type hints on every new function.", "sentence"),
            ("held", "From here on, answer me in short bullet points.", "sentence"),
            ("held", "For the rest of this session, prefer pathlib over os.path.", "sentence"),
            ("held", "Henceforth put new tests under tests/unit/.", "sentence"),
        ],
        "constraint": [
            ("dev", "Do not modify {path} until I confirm.", "sentence"),
            ("dev", "Never run migrations against the production database.", "sentence"),
            ("dev", "Don't touch anything under infra/terraform.", "sentence"),
            ("held", "Please leave {path} exactly as it is.", "sentence"),
            ("held", "Under no circumstances push to main directly.", "sentence"),
            ("held", "I don't want you to add new dependencies.", "sentence"),
            ("held", "Stop editing the generated files in build/.", "sentence"),
            ("held", "You're not allowed to delete the backup bucket.", "sentence"),
        ],
        "approval": [
            ("dev", "I approve running migration 0042_add_index on staging.", "sentence"),
            ("held", "Yes, go ahead and rotate the API keys on Friday.", "sentence"),
            ("held", "Sure, you can delete the tmp/ folder now.", "sentence"),
        ],
    },
    "zh": {
        "command": [
            ("dev", "每次改完都跑一下 `{cmd}`。", "cmd"),
            ("dev", "以后每次修改代码后都要执行 {cmd}。", "cmd"),
            ("held", "改完任何文件都先运行 `{cmd}` 再继续。", "cmd"),
            ("held", "每改一处就跑 {cmd}，别忘了。", "cmd"),
            ("held", "提交之前务必跑一遍 {cmd} 看看结果。", "cmd"),
        ],
        "limit": [
            ("dev", "每个函数不超过 {n} 行。", "sentence"),
            ("dev", "单个文件最多 {n2} 行。", "sentence"),
            ("held", "函数长度控制在 {n} 行以内。", "sentence"),
            ("held", "每行不能超过 {m} 个字符。", "sentence"),
            ("held", "接口响应时间要低于 {ms} 毫秒。", "sentence"),
        ],
        "standing": [
            ("dev", "以后都用中文写注释。", "sentence"),
            ("dev", "从现在开始，所有新函数都要加类型注解。", "sentence"),
            ("held", "今后提交信息统一用英文。", "sentence"),
            ("held", "接下来的修改都放在 feature/export 分支上。", "sentence"),
            ("held", "以后凡是新接口都要写文档。", "sentence"),
        ],
        "constraint": [
            ("dev", "先不要修改部署脚本 deploy/prod.sh，等我确认。", "sentence"),
            ("dev", "不要动 infra/terraform 下面的任何文件。", "sentence"),
            ("held", "千万别直接推到 main 分支。", "sentence"),
            ("held", "没有我的同意不准删除任何数据表。", "sentence"),
            ("held", "禁止在工作时间重启数据库。", "sentence"),
            ("held", "先别改 {path} 里的逻辑。", "sentence"),
        ],
        "approval": [
            ("dev", "我批准执行数据库迁移 0042。", "sentence"),
            ("held", "可以，去把临时目录清掉吧。", "sentence"),
            ("held", "行，就按这个方案上线。", "sentence"),
        ],
    },
}

TAU_PLANTS: dict[str, dict[str, list[tuple[str, str, str]]]] = {
    "en": {
        "constraint": [
            ("dev", "Do not cancel my return flight.", "sentence"),
            ("held", "Please don't touch the reservation for my mother.", "sentence"),
            ("held", "I never want to fly basic economy again.", "sentence"),
        ],
        "limit": [
            ("dev", "I don't want to pay more than $200 in total.", "sentence"),
            ("held", "Keep the layover under 2 hours.", "sentence"),
            ("held", "The new flight must land before 6 pm.", "sentence"),
        ],
        "standing": [
            ("dev", "From now on, charge everything to gift_card_{g}.", "sentence"),
            ("held", "For any change today, use the credit card ending in {c4}.", "sentence"),
        ],
        "approval": [
            ("dev", "Yes, go ahead with the change to reservation {res}.", "sentence"),
            ("held", "Confirmed, please book it.", "sentence"),
        ],
    },
    "zh": {
        "constraint": [
            ("dev", "不要取消我的回程航班。", "sentence"),
            ("held", "我妈妈那张订单别动。", "sentence"),
            ("held", "千万不要给我订红眼航班。", "sentence"),
        ],
        "limit": [
            ("dev", "总共不要超过 200 美元。", "sentence"),
            ("held", "转机时间控制在两小时以内。", "sentence"),
        ],
        "standing": [
            ("dev", "以后都用礼品卡 gift_card_{g} 付款。", "sentence"),
            ("held", "今天所有改动都用尾号 {c4} 的信用卡。", "sentence"),
        ],
        "approval": [
            ("dev", "可以，就改订单 {res} 吧。", "sentence"),
            ("held", "确认，帮我订这个。", "sentence"),
        ],
    },
}

# files edited through shell commands: (split, command template); the file name is the probe
SHELL_EDITS = [
    ("dev", "cat > {f} <<'EOF'\nimport sys\n\n\ndef main():\n    return 0\nEOF"),
    ("dev", "sed -i 's/rate=rates\\[0\\]/rate=rates[idx]/' {f}"),
    ("held", "cat <<'EOF' > {f}\nfrom decimal import Decimal\nROUND = Decimal('0.01')\nEOF"),
    ("held", "echo 'TIMEOUT = 30' | tee -a {f}"),
    ("held", "printf 'VERSION = \"1.4.2\"\\n' > {f}"),
    ("held", "perl -pi -e 's/old_name/new_name/g' {f} && python -m py_compile {f}"),
]
EDIT_FILES = [
    "export_utils.py",
    "src/billing/rounding.py",
    "refund_service.py",
    "settings_local.py",
    "pkg/version.py",
    "lib/matplotlib/text.py",
]
# exception lines buried in long pytest output
DEEP_ERRORS = [
    ("dev", "E       AssertionError: assert 120 == 100"),
    ("dev", "sqlite3.OperationalError: no such table: invoices_line"),
    ("held", "FAILED tests/test_refunds.py::test_partial_refund - KeyError: 'currency_code'"),
    ("held", "django.core.exceptions.ImproperlyConfigured: TIME_ZONE must be set when USE_TZ is False"),
    ("held", "TypeError: unsupported operand type(s) for +: 'Decimal' and 'float'"),
]
EARLY_READS = ["src/billing/invoice_renderer.py", "services/export/nightly_job.py", "django/db/models/constraints.py"]
DECISIONS = {
    "en": [
        ("dev", "We decided to render invoices with WeasyPrint instead of wkhtmltopdf because it handles CJK fonts."),
        ("held", "Going with a unique index on invoice_number before the backfill, since duplicates break it."),
    ],
    "zh": [
        ("dev", "我们决定改用 WeasyPrint 渲染发票，因为它支持中文字体。"),
        ("held", "方案是先给 invoice_number 加唯一索引，再回填数据。"),
    ],
}

FILLER_USER = {
    "en": ["Continue.", "What do you see in the logs?", "OK, next step please.", "Check the other workers too."],
    "zh": ["继续", "日志里有什么？", "好的，下一步。", "其他 worker 也看一下。"],
}
FILLER_ASSISTANT = {
    "en": ["Looking at the next batch of logs.", "The worker logs look normal so far.", "Reading the module now."],
    "zh": ["我继续查看下一批日志。", "目前 worker 日志看起来正常。", "正在读取这个模块。"],
}
LOG_LINE = "2026-11-28T10:{m:02d}:{s:02d} INFO worker {i}: processed {n} rows from queue export-{q}\n"
CODE_LINE = "    total += compute_line_amount(item_{i}, rate=rates[{j}])  # line {i}\n"


@dataclass
class Plant:
    kind: str
    split: str
    probe: str
    sentence: str = ""  # the user sentence, for constraints (negation check)


@dataclass
class Session:
    name: str
    lang: str
    messages: list[Message]
    plants: list[Plant] = field(default_factory=list)


def _call(call_id: str, name: str, content: str | None = None, **args: Any) -> Message:
    fn = {"name": name, "arguments": json.dumps(args, ensure_ascii=False)}
    return {
        "role": "assistant",
        "content": content,
        "tool_calls": [{"id": call_id, "type": "function", "function": fn}],
    }


def _result(call_id: str, name: str, content: str) -> Message:
    return {"role": "tool", "tool_call_id": call_id, "name": name, "content": content}


def _params(rng: Rng) -> dict[str, Any]:
    return {
        "cmd": rng.choice(CMDS),
        "n": rng.choice([30, 40, 50, 60]),
        "n2": rng.choice([300, 400, 500, 800]),
        "m": rng.choice([88, 100, 120]),
        "k": rng.choice([5, 8, 10]),
        "ms": rng.choice([150, 200, 300]),
        "path": rng.choice(["config/prod.yaml", "deploy/helm/values-prod.yaml", "src/legacy/tax_rules.py"]),
        "g": rng.randint(1_000_000, 9_999_999),
        "c4": rng.randint(1000, 9999),
        "res": "".join(rng.choice("ABCDEFGHJKLMNPQRSTUVWXYZ0123456789") for _ in range(6)),
    }


def _user_plants(table: dict[str, list[tuple[str, str, str]]], rng: Rng) -> list[tuple[Plant, str]]:
    """(plant, user sentence) for every template in ``table`` (one kind -> templates)."""
    out = []
    for kind, templates in table.items():
        for split, template, probe in templates:
            params = _params(rng)
            sentence = template.format(**params)
            value = sentence if probe == "sentence" else str(params[probe])
            out.append((Plant(kind, split, value, sentence if kind == "constraint" else ""), sentence))
    return out


def pytest_output(rng: Rng, error: str | None, lines: int = 3_000) -> str:
    """Long pytest output: progress lines, near-identical summary counters, ``error`` buried in the middle."""
    out = ["============================= test session starts ==============================", "collected 3124 items"]
    bury = rng.randint(lines // 3, 2 * lines // 3)
    for i in range(lines):
        if error and i == bury:
            out += [
                f"_________________________________ test_case_{i} _________________________________",
                "    def test_case():",
                ">       assert compute() == expected",
                error,
                "",
            ]
        elif i % 400 == 399:
            out.append(f"=========== {rng.randint(1, 3)} failed, {i} passed in {rng.random() * 30:.2f}s ===========")
        else:
            out.append(f"tests/test_mod_{i % 97}.py::test_case_{i} PASSED{' ' * (i % 5)}[{i * 100 // lines:3d}%]")
    out.append(f"=========== 1 failed, {lines - 1} passed in 41.07s ===========")
    return "\n".join(out)


def _listing(rng: Rng, r: int) -> str:
    """grep -rn output naming many files (the kind of listing that used to evict edited files)."""
    return "\n".join(
        f"pkg/module_{(r * 31 + i) % 500}/file_{i}.py:{rng.randint(1, 400)}:    return compute(x)" for i in range(12)
    )


def _rounds_to_size(window: int, per_round: int) -> int:
    """Rounds for a session of about 3.5 windows (not counting the one 3,000-line test run)."""
    return max(40, int(window * 3.5 / per_round))


def _schedule(rng: Rng, rounds: int, items: list[Any], early: int = 0) -> dict[int, list[Any]]:
    """Spread ``items`` over rounds 1..85% of ``rounds``; the first ``early`` go to the first 10%."""
    slots: dict[int, list[Any]] = defaultdict(list)
    hi = int(rounds * 0.85)
    for n, item in enumerate(items):
        r = rng.randint(1, max(1, rounds // 10)) if n < early else rng.randint(1, hi)
        slots[r].append(item)
    return slots


def make_coding(lang: str, window: int, seed: int) -> Session:
    rng = random.Random(f"coding-{lang}-{window}-{seed}")
    rounds = _rounds_to_size(window, 330 if lang == "en" else 380)
    plants: list[Plant] = []
    events: list[tuple[str, Any]] = []
    for plant, sentence in _user_plants(USER_PLANTS[lang], rng):
        plants.append(plant)
        events.append(("user", sentence))
    for split, text in DECISIONS[lang]:
        plants.append(Plant("decision", split, text))
        events.append(("decision", text))
    for split, template in SHELL_EDITS:
        f = rng.choice(EDIT_FILES)
        plants.append(Plant("shell_edit", split, f))
        events.append(("edit", template.format(f=f)))
    split, error = DEEP_ERRORS[(seed + (lang == "zh")) % len(DEEP_ERRORS)]
    plants.append(Plant("deep_error", split, error))
    events.append(("pytest", error))
    ticket = f"INV-{rng.randint(1000, 9999)}"
    plants.append(Plant("tool_arg", "held", ticket))
    events.append(("branch", ticket))
    read = rng.choice(EARLY_READS)
    plants.append(Plant("early_read", "held", read))
    slots = _schedule(rng, rounds, [("read", read), *events], early=1)

    messages: list[Message] = [
        {"role": "system", "content": "You are a coding agent. Tools: read_file, terminal, write_file, search_files."},
        {"role": "user", "content": "The billing export keeps failing; find out why and fix it step by step."},
    ]
    for r in range(rounds):
        cid = f"call_{r:05d}"
        todo = slots.get(r, [])
        user_lines = [text for kind, text in todo if kind == "user"]
        lead = rng.choice(FILLER_USER[lang])
        if user_lines:
            glue = " " if lang == "en" else ""
            messages.append(
                {
                    "role": "user",
                    "content": glue.join([lead, *user_lines]) if rng.random() < 0.5 else glue.join(user_lines),
                }
            )
        elif r % 3 == 0:
            messages.append({"role": "user", "content": lead})
        decision = next((text for kind, text in todo if kind == "decision"), None)
        done_tool = False
        for kind, value in todo:
            if kind == "read":
                body = "".join(CODE_LINE.format(i=i, j=i % 7) for i in range(rng.randint(60, 160)))
                messages += [_call(cid, "read_file", decision, path=value), _result(cid, "read_file", body)]
                done_tool = True
            elif kind == "edit":
                messages += [_call(cid + "e", "terminal", decision, command=value), _result(cid + "e", "terminal", "")]
                done_tool = True
            elif kind == "pytest":
                messages += [
                    _call(cid + "p", "terminal", decision, command="python -m pytest -q"),
                    _result(cid + "p", "terminal", pytest_output(rng, value)),
                ]
                done_tool = True
            elif kind == "branch":
                messages += [
                    _call(cid + "b", "terminal", decision, command=f"git checkout -b fix/{value}-rounding"),
                    _result(cid + "b", "terminal", f"Switched to a new branch 'fix/{value}-rounding'"),
                ]
                done_tool = True
            if done_tool:
                decision = None
        if decision:
            messages.append({"role": "assistant", "content": decision})
        if not done_tool:
            if r % 4 == 1:
                cmd = f"grep -rn compute pkg/ | head -25  # round {r}"
                messages += [_call(cid, "terminal", None, command=cmd), _result(cid, "terminal", _listing(rng, r))]
            else:
                lines = "".join(
                    LOG_LINE.format(m=i % 60, s=(i * 7) % 60, i=i + r, n=i * 13, q=r % 9)
                    for i in range(rng.randint(4, 16))
                )
                cmd = f"tail -n 200 /var/log/export/worker-{r % 9}.log"
                messages += [
                    _call(cid, "terminal", rng.choice(FILLER_ASSISTANT[lang]), cmd=cmd),
                    _result(cid, "terminal", lines),
                ]
    messages.append({"role": "user", "content": FILLER_USER[lang][2]})
    return Session(f"coding-{lang}", lang, messages, plants)


def _swe_step(thought: str, command: str, cid: str, output: str, code: int = 0) -> list[Message]:
    content = f"THOUGHT: {thought}\n\n```bash\n{command}\n```"
    fn = {"name": "bash", "arguments": json.dumps({"command": command})}
    return [
        {"role": "assistant", "content": content, "tool_calls": [{"id": cid, "type": "function", "function": fn}]},
        {
            "role": "tool",
            "tool_call_id": cid,
            "content": f"<returncode>{code}</returncode>\n<output>\n{output}\n</output>",
        },
    ]


def make_swe(window: int, seed: int) -> Session:
    """Shaped like a mini-swe-agent run: bash only, THOUGHT + one command, a mid-run human nudge."""
    rng = random.Random(f"swe-{window}-{seed}")
    rounds = _rounds_to_size(window, 300)
    plants: list[Plant] = []
    events: list[tuple[str, Any]] = []
    for split, template in SHELL_EDITS:
        f = rng.choice(EDIT_FILES)
        plants.append(Plant("shell_edit", split, f))
        events.append(("edit", template.format(f=f)))
    split, error = DEEP_ERRORS[(seed + 3) % len(DEEP_ERRORS)]
    plants.append(Plant("deep_error", split, error))
    events.append(("pytest", error))
    picked = [p for p in _user_plants(USER_PLANTS["en"], rng) if p[0].kind in ("command", "limit", "constraint")]
    for plant, sentence in rng.sample(picked, 6):
        plants.append(plant)
        events.append(("user", sentence))
    read = "django/db/models/constraints.py"
    plants.append(Plant("early_read", "held", read))
    slots = _schedule(rng, rounds, [("read", read), *events], early=1)
    messages: list[Message] = [
        {
            "role": "system",
            "content": "You are a helpful assistant that can interact multiple times with a computer shell to solve "
            "programming tasks.\nYour response must contain exactly ONE bash code block with ONE command.",
        },
        {
            "role": "user",
            "content": "<pr_description>\nAllow to customize the code attribute of ValidationError.\n</pr_description>",
        },
    ]
    for r in range(rounds):
        cid = f"call_{r:04d}"
        todo = slots.get(r, [])
        for kind, value in todo:
            if kind == "user":
                messages.append({"role": "user", "content": value})
        step = next(((k, v) for k, v in todo if k != "user"), None)
        if step and step[0] == "read":
            body = "".join(CODE_LINE.format(i=i, j=i % 7) for i in range(rng.randint(60, 160)))
            messages += _swe_step("Let me look at the implementation.", f"cat {step[1]}", cid, body)
        elif step and step[0] == "edit":
            messages += _swe_step("I'll apply the change.", step[1], cid, "")
        elif step and step[0] == "pytest":
            messages += _swe_step(
                "Run the test suite.", "python -m pytest tests -q", cid, pytest_output(rng, step[1]), 1
            )
        elif r % 3 == 0:
            messages += _swe_step("Search for usages.", "grep -rn compute pkg/ | head -25", cid, _listing(rng, r))
        else:
            body = "".join(CODE_LINE.format(i=i + r, j=i % 7) for i in range(rng.randint(8, 25)))
            messages += _swe_step(
                "Look at the next part of the file.", f"sed -n '{r},{r + 60}p' pkg/core.py", cid, body
            )
    messages.append({"role": "user", "content": "Please continue; submit when the tests pass."})
    return Session("swe-en", "en", messages, plants)


def make_tau(lang: str, window: int, seed: int) -> Session:
    """Shaped like a tau-bench airline run: a customer with ids, tool calls carrying them, instructions mid-run."""
    rng = random.Random(f"tau-{lang}-{window}-{seed}")
    rounds = _rounds_to_size(window, 200)
    user_id = f"{rng.choice(['sofia_kim', 'omar_davis', 'mia_li', 'chen_wei'])}_{rng.randint(1000, 9999)}"
    plants: list[Plant] = [Plant("tool_arg", "held", user_id)]
    events: list[tuple[str, Any]] = []
    for plant, sentence in _user_plants(TAU_PLANTS[lang], rng):
        plants.append(plant)
        events.append(("user", sentence))
    reservations = ["".join(rng.choice("ABCDEFGHJKLMNPQRSTUVWXYZ0123456789") for _ in range(6)) for _ in range(3)]
    for n, res in enumerate(reservations):
        plants.append(Plant("tool_arg", "dev" if n == 0 else "held", res))
        events.append(("reservation", res))
    slots = _schedule(rng, rounds, [("uid", user_id), *events], early=1)
    messages: list[Message] = [
        {
            "role": "system",
            "content": "# Airline Agent Policy\nAs an airline agent, you can help users book, modify, or cancel "
            "flight reservations.",
        },
        {"role": "user", "content": "Hi! I need to change my flights." if lang == "en" else "你好，我想改一下航班。"},
    ]
    for r in range(rounds):
        cid = f"call_{rng.getrandbits(64):016x}"
        todo = slots.get(r, [])
        said = [v for k, v in todo if k == "user"]
        if said:
            messages.append({"role": "user", "content": " ".join(said)})
        for kind, value in todo:
            if kind == "uid":
                messages.append(
                    {"role": "user", "content": f"Sure, it's {value}." if lang == "en" else f"我的用户 ID 是 {value}。"}
                )
                details = {
                    "user_id": value,
                    "reservations": reservations,
                    "payment_methods": {"gift_card_1": {"amount": 157}},
                }
                messages += [
                    _call(cid, "get_user_details", None, user_id=value),
                    _result(cid, "get_user_details", json.dumps(details)),
                ]
            elif kind == "reservation":
                flights = [
                    {
                        "flight_number": f"HAT{rng.randint(100, 299)}",
                        "date": "2024-05-27",
                        "price": rng.randint(90, 500),
                    }
                ]
                messages += [
                    _call(
                        cid,
                        "update_reservation_flights",
                        None,
                        reservation_id=value,
                        cabin="economy",
                        flights=flights,
                        payment_id="credit_card_9879898",
                    ),
                    _result(
                        cid,
                        "update_reservation_flights",
                        json.dumps({"reservation_id": "…", "status": "updated", "flights": flights}),
                    ),
                ]
        if not todo:
            if r % 2:
                messages.append(
                    {
                        "role": "user",
                        "content": rng.choice(
                            ["Can you check other options?", "What about the next day?"]
                            if lang == "en"
                            else ["还有别的选择吗？", "第二天的呢？"]
                        ),
                    }
                )
            search = [
                {
                    "flight_number": f"HAT{rng.randint(100, 299)}",
                    "origin": "DEN",
                    "destination": "IAH",
                    "price": rng.randint(90, 700),
                    "available_seats": {"economy": rng.randint(0, 20), "business": rng.randint(0, 9)},
                }
                for _ in range(rng.randint(2, 4))
            ]
            messages += [
                _call(
                    cid,
                    "search_direct_flight",
                    None,
                    origin="DEN",
                    destination="IAH",
                    date=f"2024-05-{rng.randint(10, 30)}",
                ),
                _result(cid, "search_direct_flight", json.dumps(search)),
                {
                    "role": "assistant",
                    "content": "I found several options; the fastest is listed first."
                    if lang == "en"
                    else "找到了几个航班，最快的排在最前面。",
                },
            ]
    messages.append({"role": "user", "content": "Thanks, anything else?" if lang == "en" else "谢谢，还有别的吗？"})
    return Session(f"tau-{lang}", lang, messages, plants)


# ---------------------------------------------------------------- measuring


def _norm(text: str) -> str:
    return " ".join(text.replace("⏎", " ").split())


def _texts(messages: list[Message]) -> str:
    parts = []
    for m in messages:
        content = m.get("content")
        if isinstance(content, str):
            parts.append(content)
        for call in m.get("tool_calls") or ():
            parts.append(call.get("function", {}).get("arguments", ""))
            try:
                args = json.loads(call.get("function", {}).get("arguments") or "{}")
            except ValueError:
                continue
            if isinstance(args, dict):
                parts.extend(str(v) for v in args.values())
    return _norm("\n".join(parts))


def sliding_window(messages: list[Message], budget: int) -> list[Message]:
    """System message + the most recent messages that fit in ``budget`` tokens (no tool result at the start)."""
    head = [messages[0]] if messages and messages[0].get("role") == "system" else []
    used = count_tokens(head)
    kept: list[Message] = []
    for m in reversed(messages[len(head) :]):
        cost = count_tokens([m])
        if used + cost > budget:
            break
        kept.append(m)
        used += cost
    kept.reverse()
    while kept and kept[0].get("role") == "tool":
        kept.pop(0)
    return head + kept


def _compress(messages: list[Message], window: int) -> Any:
    compressor = Compressor(CompressionConfig(context_window_tokens=window), ExtractiveSummarizer())
    focus = next((m["content"] for m in reversed(messages) if m.get("role") == "user"), None)
    return compressor.compress(messages, focus_topic=focus)


def run_planted(windows: list[int], seeds: int, show: str) -> None:
    builders: list[Callable[[int, int], Session]] = [
        lambda w, s: make_coding("en", w, s),
        lambda w, s: make_coding("zh", w, s),
        make_swe,
        lambda w, s: make_tau("en", w, s),
        lambda w, s: make_tau("zh", w, s),
    ]
    print(
        f"{'session':9} {'window':>6} {'msgs':>5} {'tok before':>10} {'tok after':>9} {'trigger':>7} "
        f"{'summary':>7} {'kept':>6} {'held':>6} {'slide':>6} {'neg ok':>6} {'ms':>6}"
    )
    # (window, kind, split) -> [kept, base, total]
    table: dict[tuple[int, str, str], list[int]] = defaultdict(lambda: [0, 0, 0])
    negation: Counter[tuple[int, str]] = Counter()
    for window in windows:
        for seed in range(seeds):
            for build in builders:
                session = build(window, seed)
                started = time.perf_counter()
                result = _compress(session.messages, window)
                elapsed = (time.perf_counter() - started) * 1000
                out = _texts(result.messages)
                base = _texts(sliding_window(session.messages, result.tokens_after))
                kept_here: Counter[tuple[str, bool]] = Counter()
                for p in session.plants:
                    probe = _norm(p.probe)
                    row = table[(window, p.kind, p.split)]
                    row[0] += probe in out
                    row[1] += probe in base
                    row[2] += 1
                    kept_here[p.split, probe in out] += 1
                    if probe not in out and (show == "all" or show == p.split):
                        print(f"    MISS [{p.split}] {p.kind}: {p.probe[:100]}")
                archived = result.archive.messages if result.archive else []
                findings = check_drift(archived, result.summary_text or "", context_messages=session.messages)
                bad = [f for f in findings if f.kind in ("constraint_inverted", "constraint_dropped")]
                constraints = [_norm(p.sentence) for p in session.plants if p.sentence]
                ok = all(c in out for c in constraints) and not bad
                negation[window, "ok"] += ok
                negation[window, "runs"] += 1
                summary_tokens = count_tokens([{"role": "user", "content": result.summary_text or ""}])
                n_all = sum(kept_here.values())
                n_kept = kept_here["dev", True] + kept_here["held", True]
                n_held = kept_here["held", True] + kept_here["held", False]
                n_base = sum(1 for p in session.plants if _norm(p.probe) in base)
                print(
                    f"{session.name:9} {window:>6} {len(session.messages):>5} {result.tokens_before:>10} "
                    f"{result.tokens_after:>9} {int(window * 0.7):>7} {summary_tokens:>7} {n_kept / n_all:>6.1%} "
                    f"{kept_here['held', True] / max(1, n_held):>6.1%} {n_base / n_all:>6.1%} {str(ok):>6} "
                    f"{elapsed:>6.0f}"
                )
    kinds = sorted({k for _, k, _ in table})
    print("\nplanted facts kept, per kind (pipeline / sliding window), dev + held-out:")
    print(f"{'kind':12}" + "".join(f" {w:>16}" for w in windows))
    for kind in kinds:
        cells = []
        for w in windows:
            k = sum(table[(w, kind, s)][0] for s in ("dev", "held"))
            b = sum(table[(w, kind, s)][1] for s in ("dev", "held"))
            t = sum(table[(w, kind, s)][2] for s in ("dev", "held"))
            cells.append(f"{k:>3}/{t:<3} {k / t:>4.0%}/{b / t:>4.0%}" if t else "-")
        print(f"{kind:12}" + "".join(f" {c:>16}" for c in cells))
    print()
    for split in ("dev", "held"):
        parts = []
        for w in windows:
            k = sum(v[0] for (ww, _, s), v in table.items() if ww == w and s == split)
            b = sum(v[1] for (ww, _, s), v in table.items() if ww == w and s == split)
            t = sum(v[2] for (ww, _, s), v in table.items() if ww == w and s == split)
            parts.append(f"{w}: {k}/{t} = {k / t:.1%} (sliding {b / t:.1%})")
        print(f"{split:5} " + "; ".join(parts))
    print(
        "constraints kept with their negation (verbatim, no drift finding): "
        + "; ".join(f"{w}: {negation[w, 'ok']}/{negation[w, 'runs']} runs" for w in windows)
    )


# ---------------------------------------------------------------- real runs

_EDIT_CMD = re.compile(
    r"(?:cat\s+(?:<<-?\s*'?\"?\w+'?\"?\s*)?>>?\s*|tee\s+(?:-a\s+)?|sed\s+-i\S*\s+(?:-e\s+)?(?:'[^']*'|\"[^\"]*\")\s+"
    r"|(?<![0-9&])>{1,2}\s*)(?P<file>[A-Za-z0-9_./-]+\.[A-Za-z]{1,5})\b"
)
_REAL_ERROR = re.compile(r"^\s*(?:E\s+)?(?:[\w.]+(?:Error|Exception)|FAILED .+)(?::.*)?$")
_NOISE_USER = ("Please always provide EXACTLY ONE action", "The last command <command>", "<pr_description>")


def real_probes(messages: list[Message], start: int, end: int) -> dict[str, set[str]]:
    """What a reader of the middle ``[start, end)`` would need: ids in tool args, edited files, the last
    error line, later user instructions. Found with the benchmark's own patterns, not the library's."""
    probes: dict[str, set[str]] = {"task_id": set(), "edited_file": set(), "last_error": set(), "user_turn": set()}
    last_error = None
    for m in messages[start:end]:
        role = m.get("role")
        raw_content = m.get("content")
        content = raw_content if isinstance(raw_content, str) else ""
        for call in m.get("tool_calls") or ():
            raw = call.get("function", {}).get("arguments") or "{}"
            try:
                args = json.loads(raw)
            except ValueError:
                continue
            for key, value in args.items() if isinstance(args, dict) else ():
                if key.endswith("_id") and isinstance(value, str) and len(value) >= 5:
                    probes["task_id"].add(value)
            command = args.get("command") if isinstance(args, dict) else None
            if isinstance(command, str):
                for em in _EDIT_CMD.finditer(command):
                    f = em.group("file")
                    if not f.startswith("/dev/") and f not in ("/tmp",):
                        probes["edited_file"].add(f)
        if role == "tool":
            for line in content.splitlines():
                if _REAL_ERROR.match(line) and len(line) < 300:
                    last_error = line.strip()
        if role == "user" and content and not content.startswith(_NOISE_USER) and not content.startswith("diff --git"):
            probes["user_turn"].add(content if len(content) <= 160 else content[:120])
    if last_error:
        probes["last_error"].add(last_error)
    return probes


def run_real(folder: Path | None, windows: list[int]) -> None:
    files = sorted(folder.glob("*.json")) if folder and folder.is_dir() else []
    if not files:
        print(f"\nreal runs: {folder or 'no --real DIR / REAL_RUNS_DIR given'} not found (or empty); skipping them")
        return
    print(f"\nreal runs from {folder} ({len(files)} files): probes kept, pipeline / sliding window")
    totals: dict[tuple[int, str], list[int]] = defaultdict(lambda: [0, 0, 0])
    for path in files:
        messages = json.loads(path.read_text(encoding="utf-8"))["messages"]
        for window in windows:
            result = _compress(messages, window)
            if not result.was_compressed or result.archive is None:
                continue
            probes = real_probes(messages, result.archive.start, result.archive.end)
            out = _texts(result.messages)
            base = _texts(sliding_window(messages, result.tokens_after))
            line = []
            for kind, values in probes.items():
                k = sum(_norm(v) in out for v in values)
                b = sum(_norm(v) in base for v in values)
                row = totals[(window, kind)]
                row[0] += k
                row[1] += b
                row[2] += len(values)
                line.append(f"{kind}={k}/{len(values)}")
            print(
                f"  {path.stem[:34]:34} {window:>6} tok {result.tokens_before:>6}->{result.tokens_after:<6} "
                + " ".join(line)
            )
    for window in windows:
        cells = []
        k_all = b_all = t_all = 0
        for kind in ("task_id", "edited_file", "last_error", "user_turn"):
            k, b, t = totals[(window, kind)]
            k_all, b_all, t_all = k_all + k, b_all + b, t_all + t
            cells.append(f"{kind} {k}/{t}" + (f" ({k / t:.0%} vs {b / t:.0%})" if t else ""))
        if t_all:
            print(f"window {window:>6}: all {k_all / t_all:.1%} (sliding {b_all / t_all:.1%}); " + ", ".join(cells))


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--windows", default="8000,16000,32000")
    parser.add_argument("--seeds", type=int, default=2)
    parser.add_argument("--misses", choices=("none", "dev", "held", "all"), default="none", help="list missed facts")
    # real runs are never part of the repository: the caller names their folder
    parser.add_argument("--real", default=os.environ.get("REAL_RUNS_DIR", ""), help="a folder of real runs")
    parser.add_argument("--no-planted", action="store_true")
    args = parser.parse_args()
    windows = [int(w) for w in args.windows.split(",")]
    if not args.no_planted:
        run_planted(windows, args.seeds, args.misses)
    run_real(Path(args.real) if args.real else None, windows)
    sys.stdout.flush()


if __name__ == "__main__":
    main()
