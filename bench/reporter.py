"""What a ConsoleReporter costs compress(): the median call with and without one attached.

Run: .venv/bin/python bench/reporter.py [--calls 41] [--messages 400] [--console URL --key KEY]

Compresses the same session ``--calls`` times without and with a reporter, taking turns (one
Compressor, its reporter switched on and off: the same caches on both sides), and prints the median
of each and their difference. The reporter sends to ``--console`` (a running console, e.g. ``make
run``, with a key from ``manage.py create_api_key --role operator``); without one it sends to a
socket that accepts connections and never answers (a console that hangs: every report waits in the
queue, the case where a blocking client would hurt most). It also prints the median time of
``report()`` alone, what compress() itself pays for reporting. With a console that answers, the
reporter's thread masks and serializes each report while compress() runs, so the difference also
holds that thread's share of the interpreter.
"""

from __future__ import annotations

import argparse
import socket
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from agent_compression import CompressionConfig, Compressor, ConsoleReporter  # noqa: E402
from bench.speed import make_session  # noqa: E402

_SILENT: list[socket.socket] = []


def silent_url() -> str:
    """A console that accepts connections (the kernel does) and never answers."""
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    sock.listen(1024)
    _SILENT.append(sock)  # open until the process ends
    return f"http://127.0.0.1:{sock.getsockname()[1]}"


def median_ms(samples: list[float]) -> float:
    return statistics.median(samples) * 1000


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=41)
    parser.add_argument("--messages", type=int, default=400)
    parser.add_argument("--console", default=None, help="a console's base URL (default: one that never answers)")
    parser.add_argument("--key", default="unused", help="an API key of the operator role for --console")
    args = parser.parse_args()

    url = args.console or silent_url()
    messages = make_session(args.messages)
    config = CompressionConfig(context_window_tokens=8000)
    reporter = ConsoleReporter(url, args.key, session_key="bench:reporter", queue_size=args.calls + 1, timeout=30)
    # one compressor, its reporter switched on and off: the same caches on both sides
    compressor = Compressor(config)
    result = compressor.compress(messages)  # warm the token cache and the imports
    without: list[float] = []
    with_reporter: list[float] = []
    for call in range(args.calls):
        sides = [(None, without), (reporter, with_reporter)]
        for attached, times in sides if call % 2 else reversed(sides):
            compressor.reporter = attached
            started = time.perf_counter()
            result = compressor.compress(messages)
            times.append(time.perf_counter() - started)
    # report() alone, into a queue nobody empties (a reporter to a socket that never answers)
    idle = ConsoleReporter(silent_url(), "unused", session_key="bench:enqueue", queue_size=args.calls + 1)
    enqueue: list[float] = []
    for _ in range(args.calls):
        started = time.perf_counter()
        idle.report(messages, result)
        enqueue.append(time.perf_counter() - started)
    idle.close(timeout=0)
    print(f"session: {len(messages)} messages; {args.calls} calls each; console: {args.console or 'never answers'}")
    print(f"compress() without a reporter: median {median_ms(without):.2f} ms")
    print(f"compress() with a reporter:    median {median_ms(with_reporter):.2f} ms")
    print(f"difference of the medians:     {median_ms(with_reporter) - median_ms(without):+.2f} ms")
    print(f"report() alone:                median {median_ms(enqueue) * 1000:.1f} us")
    reporter.close(timeout=30 if args.console else 0)
    print(f"reporter: {reporter.stats}")


if __name__ == "__main__":
    main()
