"""Fact retention: planted facts kept by the pipeline vs a sliding window of the same size.

Run: .venv/bin/python bench/retention.py [--windows 8000,16000,32000] [--rounds 300] [--seeds 3]

Builds synthetic long agent sessions (English and Chinese) with planted facts:
user constraints and approvals, file paths the user names, error lines in tool
output, decisions the assistant states. Each session is compressed to a fixed
window with ``Compressor`` and the offline ``ExtractiveSummarizer``. A fact
counts as kept when its exact text is present in the output messages. The
baseline keeps the system message plus the most recent messages that fit in
the same number of tokens as the pipeline's output. Also prints whether every
constraint kept its negation (verbatim presence, and no ``constraint_inverted``
or ``constraint_dropped`` finding from ``check_drift`` on the summary).
Prints numbers only; nothing is asserted.
"""

from __future__ import annotations

import argparse
import random
import time
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

from compression import CompressionConfig, Compressor, ExtractiveSummarizer, check_drift, count_tokens

Message = dict[str, Any]

PLANTS = {
    "en": {
        "constraint": [
            "Do not modify config/prod.yaml until I confirm.",
            "Never run migrations against the production database.",
            "Don't touch anything under infra/terraform.",
            "You must not delete the backup bucket s3://acme-backups.",
            "Avoid adding new dependencies to requirements.txt.",
            "Only use the staging cluster for load tests.",
        ],
        "approval": [
            "I approve running migration 0042_add_index on staging.",
            "Approved: go ahead and rotate the API keys on Friday.",
            "You may restart the worker pool after 18:00.",
        ],
        "path": [
            "src/billing/invoice_renderer.py",
            "services/export/nightly_job.py",
            "deploy/helm/values-staging.yaml",
            "tests/integration/test_refunds.py",
            "docs/runbooks/incident-2026-11.md",
            "scripts/rebuild_search_index.sh",
        ],
        "error": [
            "ValueError: invalid literal for int() with base 10: 'N/A'",
            'psycopg.errors.UniqueViolation: duplicate key value violates unique constraint "invoice_pkey"',
            "FAILED tests/integration/test_refunds.py::test_partial_refund - AssertionError: 120 != 100",
            "KeyError: 'currency_code'",
            "TimeoutError: export worker 7 did not report within 300s",
            "Error: Cannot find module '@acme/pdf-kit'",
        ],
        "decision": [
            "We decided to render invoices with WeasyPrint instead of wkhtmltopdf because it handles CJK fonts.",
            "We decided to lower the export batch size to 5000 rows because of the statement timeout.",
            "Let's keep the refund rounding in the service layer, not in the database.",
            "We decided to cache exchange rates for 10 minutes to cut API costs.",
            "The fix is to add a unique index on invoice_number before the backfill.",
            "We'll pin pdf-kit to v3.2.1 until the font bug is fixed upstream.",
        ],
    },
    "zh": {
        "constraint": [
            "先不要修改部署脚本 deploy/prod.sh，等我确认。",
            "千万不要在工作时间重启数据库。",
            "不要动 infra/terraform 下面的任何文件。",
            "禁止删除 s3://acme-backups 里的备份。",
            "酒店预算每晚不超过 600 元。",
            "只能用测试环境做压测。",
        ],
        "approval": [
            "我批准执行数据库迁移 0042。",
            "同意周五轮换 API 密钥。",
            "可以执行清理脚本 scripts/cleanup_tmp.sh 了。",
        ],
        "path": [
            "src/billing/发票模板.html",
            "services/export/nightly_job.py",
            "deploy/helm/values-staging.yaml",
            "tests/integration/test_refunds.py",
            "docs/runbooks/故障复盘-2026-11.md",
            "scripts/rebuild_search_index.sh",
        ],
        "error": [
            "KeyError: 'hangzhou'",
            "报错：连接数据库超时（10.0.3.12:5432）",
            "FAILED tests/integration/test_refunds.py::test_partial_refund - AssertionError: 120 != 100",
            "ValueError: 不支持的币种 'HKD'",
            "TimeoutError: 导出任务 7 在 300s 内没有响应",
            "Error: Cannot find module '@acme/pdf-kit'",
        ],
        "decision": [
            "我们决定改用 WeasyPrint 渲染发票，因为它支持中文字体。",
            "决定把导出批次改为每批 5000 行，原因是语句超时。",
            "那就把退款的四舍五入放在服务层，不放在数据库里。",
            "决定把汇率缓存 10 分钟，以降低接口费用。",
            "方案是先给 invoice_number 加唯一索引，再回填数据。",
            "我们将把 pdf-kit 固定在 v3.2.1，直到上游修复字体问题。",
        ],
    },
}

FILLER = {
    "en": ["Continue.", "What do you see in the logs?", "OK, next step please.", "Check the other workers too."],
    "zh": ["继续", "日志里有什么？", "好的，下一步。", "其他 worker 也看一下。"],
}
ASSISTANT = {
    "en": ["Looking at the next batch of logs.", "The worker logs look normal so far.", "Reading the module now."],
    "zh": ["我继续查看下一批日志。", "目前 worker 日志看起来正常。", "正在读取这个模块。"],
}
LOG_LINE = "2026-11-28T10:{m:02d}:{s:02d} INFO worker {i}: processed {n} rows from queue export-{q}\n"
CODE_LINE = "    total += compute_line_amount(item_{i}, rate=rates[{j}])  # line {i}\n"


@dataclass
class Session:
    lang: str
    messages: list[Message]
    planted: dict[str, list[str]] = field(default_factory=dict)


def _tool_call(call_id: str, name: str, **args: Any) -> Message:
    import json

    fn = {"name": name, "arguments": json.dumps(args, ensure_ascii=False)}
    return {"role": "assistant", "content": None, "tool_calls": [{"id": call_id, "type": "function", "function": fn}]}


def _tool_result(call_id: str, name: str, content: str) -> Message:
    return {"role": "tool", "tool_call_id": call_id, "name": name, "content": content}


def make_session(lang: str, rounds: int, seed: int) -> Session:
    """A long session; planted facts land at random rounds anywhere but the very start and end."""
    rng = random.Random(f"{lang}-{seed}")
    plants = PLANTS[lang]
    slots: dict[int, tuple[str, str]] = {}
    free = list(range(2, rounds - 1))
    rng.shuffle(free)
    for kind, texts in plants.items():
        for text in texts:
            slots[free.pop()] = (kind, text)
    messages: list[Message] = [
        {"role": "system", "content": "You are a coding agent. Tools: read_file, terminal, search_files."},
        {"role": "user", "content": "The billing export keeps failing; find out why and fix it step by step."},
    ]
    for r in range(rounds):
        cid = f"call_{r:05d}"
        kind, text = slots.get(r, ("", ""))
        if kind in ("constraint", "approval"):
            lead = rng.choice(FILLER[lang])
            messages.append({"role": "user", "content": f"{lead} {text}" if lang == "en" else f"{lead}。{text}"})
        elif kind == "path":
            ask = f"Please read {text} next." if lang == "en" else f"请看一下 {text} 这个文件。"
            messages.append({"role": "user", "content": ask})
        else:
            messages.append({"role": "user", "content": rng.choice(FILLER[lang])})
        if kind == "decision":
            messages.append({"role": "assistant", "content": text})
        else:
            messages.append({"role": "assistant", "content": rng.choice(ASSISTANT[lang])})
        if kind == "path":
            body = "".join(CODE_LINE.format(i=i, j=i % 7) for i in range(rng.randint(40, 160)))
            messages += [_tool_call(cid, "read_file", path=text), _tool_result(cid, "read_file", body)]
            continue
        lines = "".join(
            LOG_LINE.format(m=i % 60, s=(i * 7) % 60, i=i + r, n=i * 13, q=r % 9) for i in range(rng.randint(30, 150))
        )
        if kind == "error":
            lines += f'Traceback (most recent call last):\n  File "worker.py", line {r}, in run\n{text}\nexit code 1\n'
        cmd = f"tail -n 200 /var/log/export/worker-{r % 9}.log"
        messages += [_tool_call(cid, "terminal", cmd=cmd), _tool_result(cid, "terminal", lines)]
    messages.append({"role": "user", "content": FILLER[lang][2]})
    planted: dict[str, list[str]] = {kind: list(texts) for kind, texts in plants.items()}
    return Session(lang, messages, planted)


def _texts(messages: list[Message]) -> str:
    import json

    parts = []
    for m in messages:
        content = m.get("content")
        if isinstance(content, str):
            parts.append(content)
        for call in m.get("tool_calls") or ():
            parts.append(json.dumps(call, ensure_ascii=False))
            parts.append(call.get("function", {}).get("arguments", ""))
    return "\n".join(parts)


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


def run(windows: list[int], rounds: int, seeds: int) -> None:
    print(
        f"{'lang':4} {'window':>7} {'msgs':>6} {'tok before':>10} {'tok after':>9} {'pipeline':>9} {'window':>8}  "
        f"{'negation ok':>11}  per-kind kept (pipeline)  ms"
    )
    totals: Counter[str] = Counter()  # keys: facts, kept, base, runs, negation_ok; facts@<window> ...
    for lang in ("en", "zh"):
        for window in windows:
            for seed in range(seeds):
                session = make_session(lang, rounds, seed)
                compressor = Compressor(CompressionConfig(context_window_tokens=window), ExtractiveSummarizer())
                started = time.perf_counter()
                result = compressor.compress(session.messages, focus_topic=session.messages[-1]["content"])
                elapsed = (time.perf_counter() - started) * 1000
                out_text = _texts(result.messages)
                base_text = _texts(sliding_window(session.messages, result.tokens_after))
                kept: Counter[str] = Counter()
                base: Counter[str] = Counter()
                total = 0
                for kind, texts in session.planted.items():
                    for text in texts:
                        total += 1
                        kept[kind] += text in out_text
                        base[kind] += text in base_text
                constraints = session.planted["constraint"]
                archived = result.archive.messages if result.archive else []
                findings = check_drift(archived, result.summary_text or "", context_messages=session.messages)
                bad = [f for f in findings if f.kind in ("constraint_inverted", "constraint_dropped")]
                negation_ok = all(c in out_text for c in constraints) and not bad
                pipe_share = sum(kept.values()) / total
                base_share = sum(base.values()) / total
                totals["facts"] += total
                totals[f"facts@{window}"] += total
                totals[f"kept@{window}"] += sum(kept.values())
                totals[f"base@{window}"] += sum(base.values())
                totals["kept"] += sum(kept.values())
                totals["base"] += sum(base.values())
                totals["negation_ok"] += negation_ok
                totals["runs"] += 1
                per_kind = " ".join(f"{k[:4]}={kept[k]}/{len(v)}" for k, v in session.planted.items())
                print(
                    f"{lang:4} {window:>7} {len(session.messages):>6}"
                    f" {result.tokens_before:>10} {result.tokens_after:>9}"
                    f" {pipe_share:>8.1%} {base_share:>8.1%}  {str(negation_ok):>11}  {per_kind}  {elapsed:.0f}"
                )
                if findings:
                    print(
                        "      drift findings:", [(f.kind, f.evidence.get("original", "")[:40]) for f in findings[:5]]
                    )
    print()
    for key in sorted((k for k in totals if k.startswith("facts@")), key=lambda k: int(k.split("@")[1])):
        size = key.split("@")[1]
        print(
            f"window {size:>6}: pipeline kept {totals['kept@' + size] / totals[key]:.1%}, "
            f"sliding window {totals['base@' + size] / totals[key]:.1%} of {totals[key]} planted facts"
        )
    print(
        f"overall: pipeline kept {totals['kept'] / totals['facts']:.1%} of {totals['facts']} planted facts, "
        f"sliding window {totals['base'] / totals['facts']:.1%} (target >= 95%); "
        f"every constraint kept with its negation in {totals['negation_ok']}/{totals['runs']} runs"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--windows", default="8000,16000,32000")
    parser.add_argument("--rounds", type=int, default=300)
    parser.add_argument("--seeds", type=int, default=3)
    args = parser.parse_args()
    run([int(w) for w in args.windows.split(",")], args.rounds, args.seeds)


if __name__ == "__main__":
    main()
