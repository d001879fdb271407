"""The quality dashboard with 20,000 runs and 5,000 summaries: server time and queries for 7, 30 and 90 days.

Run: .venv/bin/python bench/dashboard.py [--runs 20000] [--summaries 5000] [--repeat 7]
                                         [--database-url postgres://postgres@127.0.0.1:5432/postgres] [--keep]

Builds a throwaway database (a SQLite file in /tmp by default; with ``--database-url``
pointing at a PostgreSQL server, a new database named ``bench_dashboard_<pid>`` on it,
dropped afterwards) holding ``--runs`` compression runs spread over the last 95 days
(mostly succeeded, some degraded with warnings, among them repeated-compression ones,
some failed with a traceback, a few conflicts), ``--summaries`` summaries with drift
findings from four summarizer set-ups, and drift cases on a tenth of them. Then it
requests the dashboard in-process (Django's test client, logged in as a viewer:
middleware, view, queries and template) and prints, per period, the median time in
ms, the part of it spent in SQL, and the number of queries.
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

from agent_compression.drift import DRIFT_KINDS  # noqa: E402
from bench.pages import start_django, throwaway_database, time_page  # noqa: E402

CHANNELS = ["wechat"] * 5 + ["slack"] * 2 + ["telegram", "cli", "api"]
SUMMARIZERS = [
    ({"generator": "openai", "model": "gpt-4o-mini", "prompt_version": "v2"}, 40),
    ({"generator": "openai", "model": "qwen-plus", "prompt_version": "v2"}, 25),
    ({"generator": "openai", "model": "gpt-4o-mini", "prompt_version": "v1"}, 15),
    ({"generator": "extractive", "model": None, "prompt_version": "v1"}, 20),
]
TRACEBACK = "RuntimeError: the summarizer endpoint answered 502\nTraceback (most recent call last):\n" + (
    '  File "compression/pipeline.py", line 400, in run\n' * 20
)


def build(n_runs: int, n_summaries: int, *, sessions: int = 800, seed: int = 7) -> dict[str, int]:
    """Bulk-create runs over the last 95 days, summaries with findings on some of them, and drift cases."""
    from django.db import transaction
    from django.utils import timezone

    from console.models import Archive, CompressionRun, DriftCase, Session, Summary

    rng = random.Random(seed)
    now = timezone.now()
    with transaction.atomic():
        Session.objects.bulk_create(
            [
                Session(key=f"{rng.choice(CHANNELS)}:bench_{i:05d}", token_count=rng.randint(2_000, 90_000))
                for i in range(sessions)
            ],
            batch_size=1000,
            ignore_conflicts=True,
        )
        session_ids = list(Session.objects.filter(key__contains=":bench_").values_list("id", flat=True))
        runs = [_run(rng, rng.choice(session_ids), now) for _ in range(n_runs)]
        when = [r.created_at for r in runs]
        CompressionRun.objects.bulk_create(runs, batch_size=1000)
        runs = list(CompressionRun.objects.filter(session_id__in=session_ids).order_by("id"))[-n_runs:]
        for run, at in zip(runs, when, strict=True):  # auto_now_add stamped them all now
            run.created_at = at
        CompressionRun.objects.bulk_update(runs, ["created_at"], batch_size=1000)

        applied = [r for r in runs if r.applied]
        chosen = rng.sample(applied, k=min(n_summaries, len(applied)))
        Archive.objects.bulk_create(
            [
                Archive(session_id=r.session_id, run=r, start=3, end=30, message_keys=[], sha256="0" * 64)
                for r in chosen
            ],
            batch_size=1000,
        )
        archives = dict(Archive.objects.filter(run__in=chosen).values_list("run_id", "id"))
        summaries = [_summary(rng, archives[r.pk], r) for r in chosen]
        Summary.objects.bulk_create(summaries, batch_size=1000)
        summaries = list(Summary.objects.filter(summary_id__startswith="sum_bench_").select_related("run"))
        for summary in summaries:
            summary.created_at = summary.run.created_at  # type: ignore[union-attr]
        # bulk_update writes with QuerySet.update, which the Immutable rows allow
        Summary.objects.bulk_update(summaries, ["created_at"], batch_size=1000)

        cases = []
        for s in summaries:
            if s.drift_findings and rng.random() < 0.25:
                findings = rng.sample(s.drift_findings, k=rng.randint(1, len(s.drift_findings)))
                status = rng.choices(["open", "confirmed", "dismissed", "resolved"], [40, 20, 30, 10])[0]
                case = DriftCase(
                    summary_id=s.pk,
                    session_id=s.run.session_id,  # type: ignore[union-attr]
                    findings=findings,
                    severity=rng.choice(["high", "medium", "low"]),
                    status=status,
                )
                case.kinds = "".join(f",{k}" for k in dict.fromkeys(f["kind"] for f in findings)) + ","
                case.created_at = s.created_at + timedelta(hours=rng.randint(0, 48))
                cases.append(case)
        DriftCase.objects.bulk_create(cases, batch_size=1000)
        made = list(DriftCase.objects.filter(summary__summary_id__startswith="sum_bench_").order_by("id"))
        for case, source in zip(made, cases, strict=True):
            case.created_at = source.created_at
        DriftCase.objects.bulk_update(made, ["created_at"], batch_size=1000)
    return {"sessions": len(session_ids), "runs": len(runs), "summaries": len(summaries), "drift cases": len(cases)}


def _run(rng: random.Random, session_id: int, now: Any) -> Any:
    from console.models import CompressionRun

    status = rng.choices(["succeeded", "degraded", "failed", "conflict", "queued"], [78, 10, 7, 4, 1])[0]
    before = rng.randint(8_000, 120_000)
    warnings: list[dict[str, str]] = []
    if status == "degraded":
        warnings.append(
            rng.choice(
                [{"code": "summary_failed", "message": "the summarizer timed out after 60 s"}] * 2
                + [{"code": "still_over_threshold", "message": f"{before // 2} tokens left, trigger is {before // 3}"}]
            )
        )
        if rng.random() < 0.35:
            warnings.append({"code": "repeated_compression", "message": "compressed again and still over the trigger"})
        if rng.random() < 0.08:
            warnings.append({"code": "auto_compression_stopped", "message": "automatic compression is off"})
    done = status in ("succeeded", "degraded")
    return CompressionRun(
        session_id=session_id,
        trigger=rng.choice(["auto", "auto", "manual", "api"]),
        status=status,
        applied=done,
        was_compressed=done,
        tokens_before=before if status != "queued" else None,
        tokens_after=int(before * rng.uniform(0.1, 0.6)) if done else None,
        warnings=warnings,
        error=TRACEBACK if status == "failed" else "",
        created_at=now - timedelta(seconds=rng.randint(0, 95 * 86400)),
    )


def _summary(rng: random.Random, archive_id: int, run: Any) -> Any:
    from console.models import Summary

    provenance = dict(rng.choices([p for p, _ in SUMMARIZERS], [w for _, w in SUMMARIZERS])[0])
    failed = rng.random() < 0.03
    findings = []
    if not failed:
        for _ in range(rng.choices([0, 1, 2, 3], [70, 18, 8, 4])[0]):
            quote = (
                "先不要修改部署脚本，等我确认之后再上线。" if rng.random() < 0.3 else "Do not touch the production DB."
            )
            findings.append(
                {
                    "kind": rng.choice(DRIFT_KINDS),
                    "severity": rng.choice(["high", "medium", "low"]),
                    "evidence": {"original": quote * 3, "summary": quote[:20]},
                    "source_index": rng.randint(0, 40),
                    "detail": "",
                    "scope": "segment",
                }
            )
    return Summary(
        archive_id=archive_id,
        run=run,
        summary_id=f"sum_bench_{run.pk}",
        status="failed" if failed else "active",
        text="" if failed else "## Goal\nExport job fixes.",
        provenance=provenance,
        drift_findings=findings,
    )


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", type=int, default=20_000)
    parser.add_argument("--summaries", type=int, default=5_000)
    parser.add_argument("--repeat", type=int, default=7, help="requests per period to take the median of")
    parser.add_argument("--database-url", help="default: a SQLite file in /tmp; postgres://... creates a throwaway DB")
    parser.add_argument("--keep", action="store_true", help="keep the database afterwards")
    args = parser.parse_args()

    url, cleanup = throwaway_database(args.database_url, "dashboard")
    start_django(url)
    from django.contrib.auth.models import Group, User
    from django.core.management import call_command
    from django.db import connection
    from django.test import Client

    from console.roles import VIEWER

    try:
        call_command("migrate", verbosity=0)
        t0 = time.perf_counter()
        counts = build(args.runs, args.summaries)
        with connection.cursor() as cursor:
            cursor.execute("ANALYZE")  # planner statistics, as a live database has them
        built = time.perf_counter() - t0
        print(f"database: {connection.vendor} ({url.split('@')[-1]})")
        print(", ".join(f"{v:,} {k}" for k, v in counts.items()) + f" over 95 days; built in {built:.1f} s")
        print()
        user = User.objects.create_user("bench-viewer", password="bench-only")
        user.groups.add(Group.objects.get(name=VIEWER))
        client = Client()
        client.force_login(user)
        print(f"{'period':<10} {'median ms':>10} {'of it SQL':>10} {'queries':>8} {'page KB':>8}")
        for days in (7, 30, 90):
            t = time_page(client, "/dashboard/", {"days": days}, args.repeat)
            size = len(t.response.content)
            print(f"{days:>3} days   {t.ms:>10.1f} {t.sql_ms:>10.1f} {t.queries:>8} {size / 1024:>8.0f}")
    finally:
        if args.keep:
            print(f"kept: DATABASE_URL={url}")
        else:
            cleanup()


if __name__ == "__main__":
    main()
