"""The sessions list page with 10,000 sessions: server time and queries per search, filter, sort and page.

Run: .venv/bin/python bench/sessions_list.py [--sessions 10000] [--repeat 7]
                                             [--database-url postgres://postgres@127.0.0.1:5432/postgres]
                                             [--migrate-to 0002] [--keep]

Builds a throwaway database (a SQLite file in /tmp by default; with ``--database-url``
pointing at a PostgreSQL server, a new database named ``bench_sessions_<pid>`` on it,
dropped afterwards) holding ``--sessions`` sessions of about 20 messages each, stored
the way the console stores them (content-addressed: system prompts, tool calls and
tool output are shared between sessions, each session has its own user requests),
with runs on a third of them and drift cases on a few. Then it requests the list
page in-process (Django's test client, logged in as a superuser: middleware,
view, queries and template) and prints, per case, the median time in ms and the
number of SQL queries, and the time without the masking of template strings
(``console.masking``), measured in turn on the same data. ``--migrate-to 0002`` leaves out later migrations (the
list's indexes), to compare.
"""

from __future__ import annotations

import argparse
import random
import sys
import time
from datetime import timedelta
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from bench.pages import start_django, throwaway_database, time_page  # noqa: E402

CASES: list[tuple[str, dict[str, str]]] = [
    ("no filter", {}),
    ("key search (keys only)", {"q": "user_0042", "scope": "key"}),
    ("key search (keys + content)", {"q": "user_0042"}),
    ("content search, rare word", {"q": "ORD-77123"}),
    ("content search, common word", {"q": "export"}),
    ("content search, no match", {"q": "zzqqxx-nothing"}),
    ("filter compressed=yes", {"compressed": "yes"}),
    ("filter compressed=no", {"compressed": "no"}),
    ("filter drift=open", {"drift": "open"}),
    ("filter status=idle", {"status": "idle"}),
    ("filter channel=slack", {"channel": "slack"}),
    ("sort tokens desc", {"sort": "tokens"}),
    ("sort key asc", {"sort": "key"}),
    ("page 100", {"page": "100"}),
    ("htmx fragment, page 100", {"page": "100", "_htmx": "1"}),
]

CHANNELS = ["wechat"] * 5 + ["slack"] * 2 + ["telegram", "cli", "api"]
STATUSES = ["active"] * 8 + ["idle", "closed"]
SYSTEM = [
    "You are a coding agent. Tools: read_file, terminal, search_files, write_file.",
    "你是一个长期陪伴型个人助理，可以使用工具：calendar_list, calendar_create, web_search, read_file, exec。",
    "You are a support agent for an online shop. Tools: order_lookup, refund, send_email.",
    "You are a data assistant. Tools: sql, chart, export_csv.",
    "You are a DevOps agent. Tools: kubectl, terminal, read_file. Never touch production without approval.",
]
USER = [
    "The nightly export job crashes again, please look.",
    "先不要修改部署脚本。",
    "Run the tests and tell me what fails.",
    "帮我看看这个报错是什么原因。",
    "OK, go ahead with the fix.",
    "Summarize what you changed so far.",
    "继续",
    "Can you check the logs from last night?",
]
TOOLS = ["read_file", "terminal", "search_files", "web_search", "order_lookup", "sql"]


def build(n_sessions: int, seed: int = 11) -> dict[str, Any]:
    """Bulk-create ``n_sessions`` sessions with histories, runs, archives, summaries and drift cases."""
    from django.db import transaction
    from django.utils import timezone

    from agent_compression.messages import message_sha256
    from agent_compression.tokens import count_tokens
    from console.masking import mask_text
    from console.models import (
        Archive,
        CompressionRun,
        DriftCase,
        Message,
        Session,
        SessionEntry,
        Summary,
        searchable_text,
    )

    rng = random.Random(seed)
    messages: dict[str, Message] = {}

    def store(data: dict[str, Any]) -> Message:
        key = message_sha256(data)
        row = messages.get(key)
        if row is None:
            row = Message(sha256=key, role=data["role"], data=data, text=mask_text(searchable_text(data)), tokens=0)
            row.tokens = count_tokens([data])
            messages[key] = row
        return row

    # shared pieces: tool calls and their outputs recur across sessions (same file read, same command)
    shared_turns = []
    for no in range(600):
        tool = TOOLS[no % len(TOOLS)]
        call_id = f"call_{no:04d}"
        args = f'{{"path": "src/module_{no}.py"}}' if tool == "read_file" else f'{{"command": "make test-{no}"}}'
        call = {
            "role": "assistant",
            "content": None,
            "tool_calls": [{"id": call_id, "type": "function", "function": {"name": tool, "arguments": args}}],
        }
        lines = rng.randint(5, 40)
        output = "".join(
            f"line {i}: export worker {no} wrote {i * 13} rows to s3://bucket/{no}.csv\n" for i in range(lines)
        )
        result = {"role": "tool", "tool_call_id": call_id, "name": tool, "content": output}
        shared_turns.append((store(call), store(result)))
    systems = [store({"role": "system", "content": text}) for text in SYSTEM]
    users = [store({"role": "user", "content": text}) for text in USER]
    replies = [
        store({"role": "assistant", "content": f"Done: step {i} finished, {i * 3} files checked."}) for i in range(300)
    ]

    now = timezone.now()
    sessions: list[Session] = []
    histories: list[list[Message]] = []
    for i in range(n_sessions):
        channel = rng.choice(CHANNELS)
        history = [rng.choice(systems)]
        # the session's own request: makes content search selective (order numbers, names)
        history.append(store({"role": "user", "content": f"Please check order ORD-{i + 70000} for customer {i}."}))
        while len(history) < 20:
            call, result = rng.choice(shared_turns)
            history += [rng.choice(users), call, result, rng.choice(replies)]
        history = history[:20]
        tokens = sum(m.tokens for m in history)
        sessions.append(
            Session(
                key=f"{channel}:user_{i:05d}",
                channel=channel,
                status=rng.choice(STATUSES),
                metadata={"channel": channel, "user": f"user {i}"},
                version=rng.randint(1, 40),
                message_count=len(history),
                token_count=tokens,
                context_window_tokens=rng.choice([8_000, 32_000, 128_000]),
            )
        )
        histories.append(history)

    with transaction.atomic():
        Message.objects.bulk_create(list(messages.values()), batch_size=1000, ignore_conflicts=True)
        Session.objects.bulk_create(sessions, batch_size=1000)
        by_key = Session.objects.in_bulk([s.key for s in sessions], field_name="key")
        sessions = [by_key[s.key] for s in sessions]
        for s in sessions:  # auto_now set them all to now; spread them over two months
            s.updated_at = now - timedelta(seconds=rng.randint(0, 60 * 86400))
        Session.objects.bulk_update(sessions, ["updated_at"], batch_size=1000)
        SessionEntry.objects.bulk_create(
            [
                SessionEntry(session_id=s.pk, position=p, message_id=m.sha256)
                for s, history in zip(sessions, histories, strict=True)
                for p, m in enumerate(history)
            ],
            batch_size=5000,
        )
        runs: list[CompressionRun] = []
        for s in sessions:
            if rng.random() < 0.33:
                for _ in range(rng.randint(1, 3)):
                    status = rng.choices(["succeeded", "degraded", "failed", "conflict"], [80, 8, 8, 4])[0]
                    done = status in ("succeeded", "degraded")
                    runs.append(
                        CompressionRun(
                            session_id=s.pk,
                            trigger=rng.choice(["auto", "manual", "api"]),
                            status=status,
                            was_compressed=done,
                            applied=done,
                            tokens_before=s.token_count * 3,
                            tokens_after=s.token_count,
                            base_length=40,
                            started_at=now,
                            finished_at=now,
                        )
                    )
        CompressionRun.objects.bulk_create(runs, batch_size=1000)
        ours = CompressionRun.objects.filter(session_id__in=[s.pk for s in sessions], applied=True)
        compressed = list(ours.order_by("id").values_list("id", "session_id"))
        drifting = rng.sample(compressed, k=min(len(compressed), max(1, n_sessions // 30)))
        archives = [
            Archive(session_id=sid, run_id=rid, start=3, end=10, message_keys=[], sha256="0" * 64, inserted_id="")
            for rid, sid in drifting
        ]
        Archive.objects.bulk_create(archives, batch_size=1000)
        archive_ids = dict(Archive.objects.filter(run_id__in=[r for r, _ in drifting]).values_list("run_id", "id"))
        Summary.objects.bulk_create(
            [
                Summary(
                    archive_id=archive_ids[rid], run_id=rid, summary_id=f"sum_bench_{rid}", status="active", text=""
                )
                for rid, _sid in drifting
            ],
            batch_size=1000,
        )
        summary_ids = dict(Summary.objects.filter(run_id__in=[r for r, _ in drifting]).values_list("run_id", "id"))
        DriftCase.objects.bulk_create(
            [
                DriftCase(
                    summary_id=summary_ids[rid],
                    session_id=sid,
                    severity="high",
                    status="open" if n % 3 else "dismissed",
                    findings=[],
                )
                for n, (rid, sid) in enumerate(drifting)
            ],
            batch_size=1000,
        )
    return {
        "sessions": len(sessions),
        "entries": sum(len(h) for h in histories),
        "messages": len(messages),
        "runs": len(runs),
        "drift cases": len(drifting),
    }


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--sessions", type=int, default=10_000)
    parser.add_argument("--repeat", type=int, default=7, help="requests per case to take the median of")
    parser.add_argument("--database-url", help="default: a SQLite file in /tmp; postgres://... creates a throwaway DB")
    parser.add_argument("--migrate-to", help="stop at this console migration (e.g. 0002: without the list's indexes)")
    parser.add_argument("--keep", action="store_true", help="keep the database afterwards")
    args = parser.parse_args()

    url, cleanup = throwaway_database(args.database_url, "sessions")
    start_django(url)
    from django.contrib.auth.models import User
    from django.core.management import call_command
    from django.db import connection
    from django.test import Client

    try:
        call_command("migrate", verbosity=0)
        if args.migrate_to:
            call_command("migrate", "console", args.migrate_to, verbosity=0)
        t0 = time.perf_counter()
        counts = build(args.sessions)
        with connection.cursor() as cursor:
            cursor.execute("ANALYZE")  # planner statistics, as a live database has them
        built = time.perf_counter() - t0
        print(f"database: {connection.vendor} ({url.split('@')[-1]}), migrated to {args.migrate_to or 'latest'}")
        print(", ".join(f"{v:,} {k}" for k, v in counts.items()) + f"; built in {built:.1f} s")
        print()
        user = User.objects.create_superuser("bench", password="bench-only")
        client = Client()
        client.force_login(user)
        from django.template.base import Variable

        masked = Variable.resolve
        unmasked = getattr(masked, "unmasked", masked)  # console.masking's template hook, taken out
        print(f"{'case':<32} {'median ms':>10} {'of it SQL':>10} {'queries':>8} {'rows':>5} {'unmasked ms':>12}")
        for name, params in CASES:
            params = dict(params)
            headers = {"HX-Request": "true"} if params.pop("_htmx", None) else {}
            t = time_page(client, "/", params, args.repeat, **headers)
            Variable.resolve = unmasked  # type: ignore[method-assign]
            try:
                plain = time_page(client, "/", params, args.repeat, **headers)
            finally:
                Variable.resolve = masked  # type: ignore[method-assign]
            rows = t.response.content.count(b"<tr data-nav")
            print(f"{name:<32} {t.ms:>10.1f} {t.sql_ms:>10.1f} {t.queries:>8} {rows:>5} {plain.ms:>12.1f}")
    finally:
        if args.keep:
            print(f"kept: DATABASE_URL={url}")
        else:
            cleanup()


if __name__ == "__main__":
    main()
