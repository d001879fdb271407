"""Run page and diff rendering time, query count and HTML size at 1k, 2k and 5k messages.

Run: .venv/bin/python bench/diff.py [--sizes 1000,2000,5000] [--repeat 5] [--window 128000]
                                    [--database-url sqlite:////tmp/x.sqlite3]

Builds one synthetic but realistic agent session per size (user / assistant / tool turns,
parallel calls, tool output of varied sizes, some Chinese, some secrets, a few long
arguments), compresses it in-process as a worker would (offline extractive summarizer),
then renders, logged in as a superuser through django.test.Client:

- the run page (``runs/<pk>/``, side by side),
- the diff fragment alone, unified (``runs/<pk>/diff?view=unified`` with HX-Request),
- one collapsed stretch expanded (``runs/<pk>/diff?from=&to=``, the largest unchanged block),

each ``--repeat`` times, and prints the median server time (ms), the query count and the
HTML size, and the time without the masking of template strings (``console.masking``).
Targets: under 500 ms, and the same query count at every size. Also prints the
time of the alignment alone. Uses a throwaway SQLite file unless ``--database-url`` is given.
"""

from __future__ import annotations

import argparse
import logging
import os
import random
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from bench.pages import time_page  # noqa: E402

SECRETS = [
    "sk-proj-{n}Ab3xQ9LmT2vW8yZ1cD4eF6gH",
    "export DATABASE_PASSWORD=hunter2-{n}-s3cret",
    "Authorization: Bearer ghp_{n}aB1cD2eF3gH4iJ5kL6mN7oP8qR9sT0uV",
]


def make_messages(size: int, seed: int = 11) -> list[dict[str, Any]]:
    """bench.speed's session, with secrets sprinkled into some tool output and user turns."""
    from bench.speed import make_session

    rng = random.Random(seed)
    messages = make_session(size, seed=seed)[:size]
    for i, m in enumerate(messages):
        if i > 1 and isinstance(m.get("content"), str) and rng.random() < 0.04:
            secret = rng.choice(SECRETS).format(n=i)
            m["content"] = f"{m['content']}\n{secret}\n" if m["role"] == "tool" else f"{m['content']} ({secret})"
    if messages[-1]["role"] != "user":
        messages.append({"role": "user", "content": "继续。Summarize what is left; do not touch the deploy script."})
    return messages


def setup(database_url: str | None) -> str:
    if database_url:
        os.environ["DATABASE_URL"] = database_url
        where = database_url
    else:
        folder = tempfile.mkdtemp(prefix="bench-diff-")
        where = f"sqlite:///{folder}/bench.sqlite3"
        os.environ["DATABASE_URL"] = where
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "console.settings")
    os.environ.setdefault("AUTO_COMPRESS", "false")
    import django

    django.setup()
    from django.core.management import call_command

    call_command("migrate", verbosity=0)
    logging.disable(logging.WARNING)  # eager tasks log every success
    return where


#: name -> (share of the history consolidated, config beyond the window): what each scenario stresses
SCENARIOS = {
    # the usual shape: a short head, most of the history archived, a tail of recent turns
    "archived": (0.0, {}),
    # a long tail with old tool output pruned inside it: hundreds of changed rows
    "pruned": (0.0, {"tail_ratio": 0.75, "prune_protect_tokens": 4_000}),
    # a long consolidated prefix: thousands of unchanged rows in one collapsed block
    "consolidated": (0.6, {}),
}


def compress(size: int, window: int, scenario: str = "archived") -> Any:
    from console.celery import tasks_inline
    from console.services import runs
    from console.services.sessions import ImportedSession, create_session

    consolidated, extra = SCENARIOS[scenario]
    config: dict[str, Any] = {"context_window_tokens": window}
    if "tail_ratio" in extra:
        config["tail_tokens"] = int(window * extra["tail_ratio"])
    config |= {k: v for k, v in extra.items() if k != "tail_ratio"}
    key = f"bench:diff-{scenario}-{size}-{time.time_ns()}"
    data = ImportedSession(
        key=key, messages=make_messages(size), metadata={}, last_consolidated=int(size * consolidated)
    )
    session = create_session(data)
    with tasks_inline():
        run, _ = runs.request_compression(session.key, config=config)
        runs.execute_run(run.pk)
    run.refresh_from_db()
    return run


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="1000,2000,5000")
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--window", type=int, default=128_000, help="context window of the compressions")
    parser.add_argument("--database-url", default=None, help="default: a throwaway SQLite file")
    parser.add_argument("--scenarios", default=",".join(SCENARIOS), help=f"some of {', '.join(SCENARIOS)}")
    args = parser.parse_args()
    where = setup(args.database_url)

    from django.contrib.auth.models import User
    from django.test import Client

    from console.diff import history
    from console.models import Archive

    user = User.objects.filter(username="bench-admin").first() or User.objects.create_superuser(
        "bench-admin", "bench@example.invalid", "bench"
    )
    client = Client()
    client.force_login(user)
    print(f"database {where}; median of {args.repeat} renders; server time in-process")
    counts: dict[str, set[int]] = {}
    from django.template.base import Variable

    masked = Variable.resolve
    unmasked = getattr(masked, "unmasked", masked)  # console.masking's template hook, taken out
    cases = [(size, name) for name in args.scenarios.split(",") for size in (int(s) for s in args.sizes.split(","))]
    for size, scenario in cases:
        t0 = time.perf_counter()
        run = compress(size, args.window, scenario)
        made = time.perf_counter() - t0
        archive = Archive.objects.filter(run=run).first()
        t0 = time.perf_counter()
        for _ in range(args.repeat):
            rows = history.align(
                run.input_keys,
                run.output_keys,
                archive_range=(archive.start, archive.end) if archive else None,
                pruned=run.pruned,
                repair=run.repair,
            )
        align_ms = (time.perf_counter() - t0) * 1000 / args.repeat
        same = max((b for b in history.group_rows(rows) if b.kind == "same"), key=lambda b: b.size, default=None)
        kinds = {k: c for k, c in history.count_kinds(rows).items() if c}
        print(
            f"{scenario:>12} {size:>5} msgs: run {run.pk} {run.status} in {made:.1f}s, {len(run.input_keys)} -> "
            f"{len(run.output_keys)} messages, {run.tokens_before} -> {run.tokens_after} tokens; "
            f"align {align_ms:.1f} ms; rows {kinds}"
        )
        pages = [("run page", f"/runs/{run.pk}/", False), ("diff unified", f"/runs/{run.pk}/diff?view=unified", True)]
        if same is not None:
            pages.append((f"expand {same.size:>4}", f"/runs/{run.pk}/diff?from={same.start}&to={same.end}", True))
        for label, url, htmx in pages:
            headers = {"HX-Request": "true"} if htmx else {}
            t = time_page(client, url, None, args.repeat, **headers)
            Variable.resolve = unmasked  # type: ignore[method-assign]
            try:
                plain = time_page(client, url, None, args.repeat, **headers)
            finally:
                Variable.resolve = masked  # type: ignore[method-assign]
            ms, queries, html = t.ms, t.queries, len(t.response.content)
            if label == "run page":
                counts.setdefault(scenario, set()).add(queries)
            flag = "" if ms < 500 else "  (over the 500 ms target)"
            print(
                f"{'':>14}{label:<14} {ms:7.1f} ms  {queries:3d} queries  {html / 1024:7.1f} KiB"
                f"  ({plain.ms:.1f} ms unmasked){flag}"
            )
    for scenario, seen in counts.items():
        same = "the same at every size" if len(seen) == 1 else f"DIFFERENT across sizes: {sorted(seen)}"
        print(f"{scenario}: run page query count {same}")


if __name__ == "__main__":
    main()
