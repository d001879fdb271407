"""Pipeline speed against one tiktoken pass, at 1k, 5k and 20k messages.

Run: .venv/bin/python bench/speed.py [--sizes 1000,5000,20000] [--repeat 3] [--profile]

Prints, per size: session size, the time of one tiktoken pass over every
text of the session (single thread, cold), and against it (target <= 1.0):

- ``cold``: the pipeline with the offline ExtractiveSummarizer and a cold
  token cache, counting every message itself (wall clock; ``cpu`` is the
  process's CPU time against the pass's, threads included);
- ``given``: the same with the per-message counts the caller has (the
  console's stored counts), so the input is never tokenized;

per-stage milliseconds of the cold run, and the time of ``should_compress``
after appending 10 messages to a session counted before (target <= 1 ms at
20,000 messages). Each time is the best of ``--repeat`` runs, the pass and
the pipeline taking turns: on a shared machine the best run is the one
least disturbed by others.
"""

from __future__ import annotations

import argparse
import cProfile
import json
import pstats
import random
import time
from typing import Any

from agent_compression import CompressionConfig, Compressor, ExtractiveSummarizer
from agent_compression.tokens import TokenCounter, _encoding

CODE_LINE = "    result = process_batch(rows[{i}:{j}], retries=3)  # handle chunk {i}\n"
LOG_LINE = "2026-11-28T10:{m:02d}:{s:02d} INFO export worker {i}: wrote {n} rows to s3://bucket/export/{i}.csv\n"
ZH_LINE = "第{i}条：杭州西湖附近的酒店，每晚{n}元，距离地铁站{m}分钟。\n"
USER_EN = [
    "Please look at the export job again, the nightly run failed.",
    "Do not change anything under infra/terraform.",
    "Run the tests and tell me what fails.",
    "OK, go ahead with the fix in jobs/export_nightly.py.",
]
USER_ZH = ["帮我看看这个报错是什么原因。", "先不要修改部署脚本。", "继续", "好的，按这个方案改。"]


def _tool_output(rng: random.Random, kind: str, no: int) -> str:
    # every output is distinct (real sessions rarely repeat one verbatim), a few repeat on purpose
    if rng.random() < 0.05:
        no = 0
    if kind == "read_file":
        n = rng.randint(5, 60)
        return "".join(CODE_LINE.format(i=i + no, j=i + 100) for i in range(n))
    if kind == "terminal":
        n = rng.randint(3, 50)
        body = "".join(LOG_LINE.format(m=i % 60, s=(i * 7) % 60, i=i + no, n=i * 13) for i in range(n))
        return body + f"exit code: {rng.choice([0, 0, 1])}\n"
    if kind == "web_search":
        return "".join(ZH_LINE.format(i=i + no, n=400 + i, m=i % 15) for i in range(rng.randint(3, 25)))
    return json.dumps({"matches": [f"src/module_{i + no}.py:{i * 3}: TODO fix" for i in range(rng.randint(1, 30))]})


def make_session(n_messages: int, seed: int = 7) -> list[dict[str, Any]]:
    """A realistic agent session: user turns, parallel tool calls, large outputs, some Chinese."""
    rng = random.Random(seed)
    messages: list[dict[str, Any]] = [
        {"role": "system", "content": "You are a coding agent. Tools: read_file, terminal, search_files, web_search."},
        {
            "role": "user",
            "content": "The nightly export job crashes. Find out why. 不要修改 infra/terraform 下的文件。",
        },
    ]
    call_no = 0
    while len(messages) < n_messages:
        roll = rng.random()
        if roll < 0.12:
            messages.append({"role": "user", "content": rng.choice(USER_EN + USER_ZH)})
        elif roll < 0.25:
            text = rng.choice(["Looking at the logs now.", "我先检查一下配置文件。", "The failure is in fetch_batch."])
            messages.append({"role": "assistant", "content": text * rng.randint(1, 20)})
        else:
            calls = []
            for _ in range(rng.choice([1, 1, 1, 2, 3])):
                call_no += 1
                kind = rng.choice(["read_file", "terminal", "search_files", "web_search"])
                args = {"path": f"src/module_{call_no % 300}.py"} if kind == "read_file" else {"cmd": "make test"}
                if rng.random() < 0.03:
                    args["content"] = 'line with "quotes" and \\ escapes\n' * 120
                call = {"id": f"call_{call_no}", "type": "function", "function": {"name": kind}}
                call["function"]["arguments"] = json.dumps(args, ensure_ascii=False)
                calls.append(call)
            messages.append({"role": "assistant", "content": None, "tool_calls": calls})
            for call in calls:
                name = call["function"]["name"]
                messages.append(
                    {
                        "role": "tool",
                        "tool_call_id": call["id"],
                        "name": name,
                        "content": _tool_output(rng, name, call_no),
                    }
                )
    messages.append({"role": "user", "content": "Summarize what we changed and what is left. 记得不要动部署脚本。"})
    return messages


def _texts(messages: list[dict[str, Any]]) -> list[str]:
    out = []
    for m in messages:
        if isinstance(m.get("content"), str):
            out.append(m["content"])
        for call in m.get("tool_calls") or ():
            out.append(call["function"]["arguments"])
    return out


def tiktoken_pass(messages: list[dict[str, Any]]) -> float:
    enc = _encoding()
    texts = _texts(messages)
    t0 = time.perf_counter()
    for text in texts:
        enc.encode_ordinary(text)
    return time.perf_counter() - t0


def _timed(fn: Any, *args: Any, **kwargs: Any) -> tuple[float, float, Any]:
    """(wall seconds, CPU seconds of the whole process, result) of ``fn(*args, **kwargs)``."""
    t0, c0 = time.perf_counter(), time.process_time()
    out = fn(*args, **kwargs)
    return time.perf_counter() - t0, time.process_time() - c0, out


def run(size: int, window: int, repeat: int, profile: bool) -> None:
    messages = make_session(size)
    mb = len(json.dumps(messages, ensure_ascii=False).encode()) / 1e6
    config = CompressionConfig(context_window_tokens=window)
    counts = TokenCounter().per_message(messages)
    base = cold = given = (float("inf"), float("inf"))
    result = None
    for _ in range(repeat):
        # fresh copies of every string, so neither side profits from hashes or caches of the other
        wall, cpu, _ = _timed(tiktoken_pass, json.loads(json.dumps(messages)))
        base = min(base, (wall, cpu))
        fresh = json.loads(json.dumps(messages))
        compressor = Compressor(config, ExtractiveSummarizer(), counter=TokenCounter())
        wall, cpu, result = _timed(compressor.compress, fresh, focus_topic="export job")
        cold = min(cold, (wall, cpu))
        fresh = json.loads(json.dumps(messages))
        compressor = Compressor(config, ExtractiveSummarizer(), counter=TokenCounter())
        wall, cpu, _ = _timed(compressor.compress, fresh, focus_topic="export job", token_counts=counts)
        given = min(given, (wall, cpu))
    assert result is not None
    stages = " ".join(f"{s.name}={s.ms:.0f}" for s in result.stages)
    print(
        f"{size:>6} msgs {mb:5.1f} MB | tiktoken {base[0]:5.2f}s | cold {cold[0]:5.2f}s ratio {cold[0] / base[0]:4.2f} "
        f"(cpu {cold[1] / base[1]:4.2f}) | given counts {given[0]:5.2f}s ratio {given[0] / base[0]:4.2f} | "
        f"tokens {result.tokens_before}->{result.tokens_after} | ms: {stages}"
    )

    # a runtime's loop: the session was checked before, 10 messages arrive, it asks again
    compressor = Compressor(config, ExtractiveSummarizer(), counter=TokenCounter())
    session = json.loads(json.dumps(messages))
    compressor.should_compress(session)
    best = float("inf")
    for r in range(max(repeat, 5)):
        session = session + [{"role": "user", "content": f"appended message {r}.{i} 继续"} for i in range(10)]
        wall, _, _ = _timed(compressor.should_compress, session)
        best = min(best, wall)
    print(f"{'':>6}   should_compress after appending 10 messages: {best * 1000:.2f} ms")

    if profile:
        profiler = cProfile.Profile()
        fresh = json.loads(json.dumps(messages))
        compressor = Compressor(config, ExtractiveSummarizer(), counter=TokenCounter())
        profiler.runcall(compressor.compress, fresh, focus_topic="export job")
        pstats.Stats(profiler).sort_stats("cumulative").print_stats(25)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="1000,5000,20000")
    parser.add_argument("--window", type=int, default=128_000)
    parser.add_argument("--repeat", type=int, default=3, help="best of this many runs of each")
    parser.add_argument("--profile", action="store_true", help="print a cProfile of each pipeline run")
    args = parser.parse_args()
    for size in (int(s) for s in args.sizes.split(",")):
        run(size, args.window, args.repeat, args.profile)


if __name__ == "__main__":
    main()
