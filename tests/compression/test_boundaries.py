from __future__ import annotations

from agent_compression.boundaries import resolve_boundaries
from agent_compression.config import CompressionConfig
from tests.compression.builders import assistant, call, calls, result, system, user


def config(tail: int, head: int = 2) -> CompressionConfig:
    return CompressionConfig(context_window_tokens=10_000, protect_head_messages=head, tail_tokens=tail)


def flat(n: int) -> list[dict]:
    return [system()] + [user(f"u{i}") if i % 2 == 0 else assistant(f"a{i}") for i in range(n)]


def test_it_protects_the_head_by_count() -> None:
    b = resolve_boundaries(flat(20), config(tail=30, head=3))
    assert b.head_end == 3


def test_it_uses_keep_prefix_when_it_is_longer_than_the_head() -> None:
    assert resolve_boundaries(flat(20), config(tail=30), keep_prefix=6).head_end == 6


def test_it_extends_the_head_over_tool_results() -> None:
    history = [system(), calls(call("a"), call("b")), result("a"), result("b"), *flat(10)[1:]]
    assert resolve_boundaries(history, config(tail=30, head=3)).head_end == 4


def test_it_sizes_the_tail_by_tokens() -> None:
    history = flat(40)
    counts = [10] * len(history)
    b = resolve_boundaries(history, config(tail=55), token_counts=counts)
    assert b.tail_start == len(history) - 5
    assert b.tail_tokens == 50


def test_it_keeps_an_assistant_call_with_all_its_parallel_results() -> None:
    history = [*flat(10), calls(call("a"), call("b"), call("c")), result("a"), result("b"), result("c"), user("go")]
    counts = [10] * len(history)
    b = resolve_boundaries(history, config(tail=25), token_counts=counts)
    assert history[b.tail_start]["tool_calls"]
    assert b.tail_start == len(history) - 5


def test_it_keeps_a_result_separated_by_a_user_message_with_its_call() -> None:
    history = [*flat(10), calls(call("a")), user("meanwhile"), result("a"), assistant("ok")]
    counts = [10] * len(history)
    b = resolve_boundaries(history, config(tail=25), token_counts=counts)
    assert b.tail_start == len(history) - 4


def test_it_always_keeps_the_latest_user_message_in_the_tail() -> None:
    history = [*flat(10), user("the real question"), *[assistant(f"long {i}") for i in range(10)]]
    counts = [10] * len(history)
    b = resolve_boundaries(history, config(tail=30), token_counts=counts)
    assert b.tail_start == 11


def test_it_returns_an_empty_middle_for_short_histories() -> None:
    b = resolve_boundaries(flat(3), config(tail=10_000))
    assert b.is_empty and b.middle_size == 0


def test_it_handles_an_empty_history() -> None:
    b = resolve_boundaries([], config(tail=10))
    assert (b.head_end, b.tail_start, b.total) == (0, 0, 0)


def test_it_never_lets_the_tail_start_inside_the_head() -> None:
    history = [system(), user("q"), calls(call("a")), result("a"), calls(call("b")), result("b")]
    b = resolve_boundaries(history, config(tail=1, head=2), token_counts=[10] * 6)
    assert b.head_end <= b.tail_start == 4


def test_it_keeps_calls_in_flight_at_the_end_in_the_tail() -> None:
    history = [system(), user("q"), *[assistant(f"a{i}") for i in range(8)], calls(call("a"), call("b")), result("a")]
    b = resolve_boundaries(history, config(tail=1), token_counts=[10] * len(history))
    assert b.tail_start == len(history) - 2


def test_it_ignores_a_tool_result_with_an_unhashable_call_id() -> None:
    history = [system(), user("a"), assistant("b"), {"role": "tool", "tool_call_id": [], "content": "x"}]
    b = resolve_boundaries(history, config(tail=5, head=1), token_counts=[10] * 4)
    assert b.head_end <= b.tail_start <= 3


# --------------------------------------------------------------------------- the head obeys the budget


def test_a_giant_tool_result_in_the_head_joins_the_middle() -> None:
    history = [system(), user("fix it"), calls(call("a")), result("a", "word " * 3_000), *flat(20)[1:]]
    cfg = CompressionConfig(context_window_tokens=4_000, protect_head_messages=4)
    b = resolve_boundaries(history, cfg)
    assert b.head_end == 2  # the system prompt and the first request stay; the call and its result move


def test_the_head_keeps_what_fits_its_budget_and_the_first_request_whatever_its_size() -> None:
    history = [system(), user("y " * 3_000), assistant("short"), *flat(20)[1:]]
    cfg = CompressionConfig(context_window_tokens=4_000, protect_head_messages=3, head_tokens=100)
    assert resolve_boundaries(history, cfg).head_end == 2
    roomy = CompressionConfig(context_window_tokens=4_000, protect_head_messages=3, head_tokens=100_000)
    assert resolve_boundaries(history, roomy).head_end == 3


def test_the_head_never_gives_up_the_kept_prefix() -> None:
    history = [system(), user("a"), assistant("x " * 3_000), *flat(20)[1:]]
    cfg = CompressionConfig(context_window_tokens=4_000, head_tokens=50)
    assert resolve_boundaries(history, cfg, keep_prefix=3).head_end == 3


def test_shorten_head_shortens_what_must_stay_in_place_biggest_first() -> None:
    from agent_compression.boundaries import shorten_head
    from agent_compression.tokens import default_counter

    big = "line of output\n" * 2_000
    history = [system(), calls(call("a", "read_file", path="src/a.py")), result("a", big), user("go"), assistant("ok")]
    cfg = CompressionConfig(context_window_tokens=4_000, head_tokens=200)
    counts = default_counter.per_message(history)
    head, changed = shorten_head(history, 4, cfg, counts)
    assert [i for i, _ in changed] == [2]
    assert head[2]["content"].startswith("[pruned] read_file: read file `src/a.py`")
    assert head[0] is history[0] and head[3] is history[3] and history[2]["content"] == big
    # a kept prefix is never rewritten
    assert shorten_head(history, 4, cfg, counts, keep_prefix=3) == (history[:4], [])
