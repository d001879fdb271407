from __future__ import annotations

import copy
import json
from typing import Any

import pytest

from agent_compression.archive import Archive
from agent_compression.config import CompressionConfig
from agent_compression.pipeline import STAGES, Compressor, ThrashState
from agent_compression.summary_message import is_summary_message
from agent_compression.validate import validate_messages
from tests.compression.builders import FakeSummarizer, assistant, call, calls, result, run_async, session, system, user

CONFIG = CompressionConfig(context_window_tokens=4_000)


def compressor(summarizer: Any = None, **options: Any) -> Compressor:
    config = CompressionConfig(**{"context_window_tokens": 4_000, **options})
    return Compressor(config, summarizer or FakeSummarizer())


def test_it_triggers_on_tokens_not_message_count() -> None:
    c = compressor()
    assert not c.should_compress([user("x")] * 50)
    assert c.should_compress([user("word " * 3_000)])


def test_it_compresses_a_long_session() -> None:
    history = session(30)
    result = compressor().compress(history, focus_topic="tests")
    assert result.was_compressed
    assert result.tokens_after < result.tokens_before
    assert result.summary_text is not None and result.summary_text.startswith("SUMMARY BODY\n\n## Pinned facts")
    assert validate_messages(result.messages) == []
    assert result.messages[-1] == history[-1]
    assert sum(is_summary_message(m) for m in result.messages) == 1
    assert result.messages[:3] == history[:3]


def test_it_archives_the_original_middle_before_summarizing() -> None:
    history = session(30)
    seen: list[str] = []
    summarizer = FakeSummarizer()

    def on_archive(archive: Archive) -> None:
        assert not summarizer.requests
        seen.append(archive.sha256)

    result = compressor(summarizer).compress(history, on_archive=on_archive)
    archive = result.archive
    assert archive is not None and seen == [archive.sha256]
    assert archive.messages == history[archive.start : archive.end]
    assert summarizer.requests[0].messages == archive.messages
    assert summarizer.requests[0].start_index == archive.start


def test_it_lets_on_archive_errors_propagate() -> None:
    def on_archive(archive: Archive) -> None:
        raise OSError("disk full")

    with pytest.raises(OSError):
        compressor().compress(session(30), on_archive=on_archive)


def test_it_announces_and_times_every_stage() -> None:
    names: list[str] = []
    result = compressor().compress(session(30), on_stage=names.append)
    assert tuple(names) == STAGES
    assert [s.name for s in result.stages] == list(STAGES)
    assert all(s.ms >= 0 for s in result.stages)


def test_it_passes_budgets_focus_and_facts_to_the_summarizer() -> None:
    summarizer = FakeSummarizer()
    compressor(summarizer).compress(session(30), focus_topic="the export job")
    request = summarizer.requests[0]
    assert request.focus_topic == "the export job"
    # the budget follows the room: at most the ceiling, within what is free under the trigger
    assert 256 <= request.max_tokens <= CONFIG.effective_summary_max_tokens
    assert request.input_tokens == CONFIG.effective_summary_input_tokens


@pytest.mark.parametrize("summarizer", [FakeSummarizer(fail=True), FakeSummarizer(raises=True)])
def test_it_still_compresses_when_the_summarizer_fails(summarizer: FakeSummarizer) -> None:
    history = session(30)
    history[3] = user("Never push to the main branch.")
    result = compressor(summarizer).compress(history)
    assert result.was_compressed and result.summary_text is None
    assert "summary_failed" in result.warning_codes()
    assert result.tokens_after < result.tokens_before
    note = next(m for m in result.messages if is_summary_message(m))
    assert "Summary unavailable" in note["content"]
    assert "Never push to the main branch." in note["content"]
    assert validate_messages(result.messages) == []


def test_it_returns_short_histories_unchanged() -> None:
    history = [user("hi"), assistant("hello"), user("how are you")]
    result = compressor().compress(history)
    assert not result.was_compressed
    assert result.messages == history
    assert result.warning_codes() == ["nothing_to_compress"]
    assert result.archive is None


def test_it_does_not_compress_its_own_output_again() -> None:
    c = compressor()
    first = c.compress(session(30))
    second = c.compress(first.messages)
    assert not second.was_compressed
    assert second.messages == first.messages


def test_it_updates_the_previous_summary_on_a_second_compression() -> None:
    summarizer = FakeSummarizer()
    c = compressor(summarizer)
    first = c.compress(session(30))
    grown = first.messages + session(30)[2:]
    second = c.compress(grown)
    assert second.was_compressed
    assert summarizer.requests[1].previous_summary is not None
    assert sum(is_summary_message(m) for m in second.messages) == 1


def test_it_never_mutates_the_input() -> None:
    history = session(30)
    before = copy.deepcopy(history)
    compressor().compress(history)
    assert history == before


def test_it_keeps_the_prefix_untouched() -> None:
    history = session(30)
    result = compressor().compress(history, keep_prefix=10)
    assert result.messages[:10] == history[:10]


def test_it_stops_automatic_compression_when_it_cannot_get_under_the_trigger() -> None:
    state = ThrashState()
    c = Compressor(CompressionConfig(context_window_tokens=4_000), FakeSummarizer(), thrash_state=state)
    huge_latest = user("please read this: " + "word " * 5_000)
    history = [*session(10), huge_latest]
    first = c.compress(history)
    assert "still_over_threshold" in first.warning_codes()
    second = c.compress(first.messages + [assistant("ok"), huge_latest])
    assert "auto_compression_stopped" in second.warning_codes() or state.stopped
    assert state.stopped
    assert not c.should_compress(history)
    state.reset()
    assert c.should_compress(history)


def test_it_resummarizes_an_archive() -> None:
    result = compressor().compress(session(30))
    assert result.archive is not None
    other = FakeSummarizer("AGAIN")
    outcome, facts = compressor().resummarize(
        result.archive.messages, start_index=result.archive.start, summarizer=other
    )
    assert outcome.text == "AGAIN"
    assert other.requests[0].start_index == result.archive.start
    assert isinstance(facts, list)


def test_it_shares_all_logic_between_sync_and_async() -> None:
    history = session(30)
    sync = compressor().compress(history)
    async_ = run_async(compressor().acompress(history))
    assert [m["role"] for m in async_.messages] == [m["role"] for m in sync.messages]
    assert abs(async_.tokens_after - sync.tokens_after) <= 8  # only the random summary id differs


def test_it_serializes_the_result_to_json() -> None:
    result = compressor().compress(session(30))
    data = json.loads(json.dumps(result.to_dict()))
    assert data["was_compressed"] is True
    assert data["archive"]["sha256"] == result.archive.sha256  # type: ignore[union-attr]
    assert {s["name"] for s in data["stages"]} == set(STAGES)


def test_it_repairs_broken_input_it_does_not_compress() -> None:
    history = [{"role": "tool", "tool_call_id": "x", "content": "orphan"}, user("hi")]
    result = compressor().compress(history)
    assert result.messages == [user("hi")]
    assert "input_repaired" in result.warning_codes()


def test_it_supports_the_strict_profile() -> None:
    history = session(30)
    history.insert(5, user("an extra user turn"))
    c = Compressor(CONFIG, FakeSummarizer(), profile="strict")
    result = c.compress(history)
    assert validate_messages(result.messages, "strict") == []
    assert result.messages[-1] == history[-1]


def test_it_keeps_in_flight_calls_at_the_end() -> None:
    history = session(30)
    history += [
        {"role": "assistant", "content": None, "tool_calls": [call("late1"), call("late2")]},
        {"role": "tool", "tool_call_id": "late1", "content": "first result"},
    ]
    result = compressor().compress(history)
    assert result.was_compressed
    assert result.messages[-2:] == history[-2:]
    assert validate_messages(result.messages) == []


def test_it_pins_facts_of_tail_results_that_pruning_shortened() -> None:
    # The latest user message is far back, so the tail reaches past the prune-protected budget:
    # an early tool result in the tail is pruned, and its error line must survive as a pinned fact.
    history = session(12)
    history.append(calls(call("t0", "terminal", cmd="pytest tests/test_refunds.py")))
    failing = "\n".join(f"collected line {i}" for i in range(300)) + "\nKeyError: 'currency_code'\n1 failed"
    history.append(result("t0", failing, "terminal"))
    for i in range(1, 6):
        history.append(calls(call(f"t{i}", "read_file", path=f"src/refunds_{i}.py")))
        history.append(result(f"t{i}", "\n".join(f"code line {n}" for n in range(250)), "read_file"))
    outcome = compressor().compress(history)
    assert outcome.was_compressed
    kept = next(m for m in outcome.messages if m.get("tool_call_id") == "t0")
    assert "KeyError" not in kept["content"], "the test needs the failing result to be pruned"
    assert any(f.kind == "error" and "KeyError: 'currency_code'" in f.text for f in outcome.facts)


def test_pruning_alone_compresses_when_everything_left_fits_the_tail() -> None:
    """Few turns, huge tool outputs: once they are pruned the rest fits the tail, so there is nothing to summarize."""
    summarizer = FakeSummarizer()
    history = [system(), user("Read the config and the log. Do not edit anything."), assistant("On it.")]
    for i in range(4):
        history += [calls(call(f"c{i}", path=f"logs/part{i}.log")), result(f"c{i}", f"line {i}\n" * 3_000)]
    history += [assistant("Both read."), user("What did you find?")]
    result_ = compressor(summarizer, context_window_tokens=16_000).compress(history)
    assert result_.was_compressed
    assert result_.warning_codes()[0] == "pruned_only"
    assert "summary_failed" not in result_.warning_codes()
    assert result_.archive is None and result_.summary is None and result_.summary_text is None
    assert summarizer.requests == []
    assert result_.tokens_after < result_.tokens_before / 5
    assert result_.pruned and validate_messages(result_.messages) == []
    assert result_.messages[:3] == history[:3]  # the protected head is never pruned
    assert result_.messages[-1] == history[-1]  # the latest user message stays verbatim
    assert [m["role"] for m in result_.messages] == [m["role"] for m in history]


def texts_encoded(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    from agent_compression import tokens

    seen: list[str] = []
    real = tokens._encode_len

    def spy(enc: Any, text: str) -> int:
        seen.append(text)
        return real(enc, text)

    monkeypatch.setattr(tokens, "_encode_len", spy)
    return seen


def test_it_uses_the_token_counts_the_caller_has(monkeypatch: pytest.MonkeyPatch) -> None:
    from agent_compression.tokens import TokenCounter

    history = session(30)
    counts = TokenCounter().per_message(history)
    expected = compressor().compress(history)
    encoded = texts_encoded(monkeypatch)
    c = Compressor(CONFIG, FakeSummarizer(), counter=TokenCounter())  # a cold cache: nothing counted yet
    given = c.compress(history, token_counts=counts)
    assert (given.tokens_before, given.boundaries) == (expected.tokens_before, expected.boundaries)
    assert abs(given.tokens_after - expected.tokens_after) <= 8  # only the random summary id differs
    stored = {m["content"] for m in history} | {m["tool_calls"][0]["function"]["arguments"] for m in history[3::4]}
    assert encoded and not stored & set(encoded), "an input message was tokenized again"


def test_it_tokenizes_each_input_text_once(monkeypatch: pytest.MonkeyPatch) -> None:
    from collections import Counter

    from agent_compression.tokens import TokenCounter

    history = session(30)
    encoded = texts_encoded(monkeypatch)
    Compressor(CONFIG, FakeSummarizer(), counter=TokenCounter()).compress(history)
    times = Counter(encoded)
    inputs = {m["content"] for m in history} | {m["tool_calls"][0]["function"]["arguments"] for m in history[3::4]}
    inputs.discard(None)
    assert inputs <= set(times), "every input text is counted"
    assert all(times[text] == 1 for text in inputs), "an input text was tokenized twice"


def test_it_rejects_token_counts_that_do_not_line_up() -> None:
    history = session(5)
    with pytest.raises(ValueError, match="token_counts"):
        compressor().compress(history, token_counts=[10] * (len(history) - 1))
    with pytest.raises(ValueError, match="token_counts"):
        compressor().should_compress(history, token_counts=[-1] * len(history))


def test_should_compress_takes_the_callers_counts() -> None:
    history = [user("x")] * 10
    c = compressor()
    assert not c.should_compress(history)
    assert c.should_compress(history, token_counts=[400] * 10)  # trigger: 2,800 of the 4,000 window


def test_should_compress_after_appends_looks_at_the_appended_messages(monkeypatch: pytest.MonkeyPatch) -> None:
    from agent_compression.tokens import HistoryTally, TokenCounter

    c = compressor(context_window_tokens=1_000_000)
    history = session(500)
    assert not c.should_compress(history)
    looked: list[int] = []
    real = TokenCounter._message

    def spy(self: TokenCounter, message: dict[str, Any]) -> int:
        looked.append(1)
        return real(self, message)

    monkeypatch.setattr(TokenCounter, "_message", spy)
    grown = history + [user(f"appended {i}") for i in range(10)]
    assert not c.should_compress(grown)
    assert len(looked) <= 10 + HistoryTally.RECHECK
    grown[-1]["content"] = "word " * 800_000  # edited in place after it was counted
    assert c.should_compress(grown)


def test_pruning_alone_with_given_counts_tokenizes_only_the_descriptions(monkeypatch: pytest.MonkeyPatch) -> None:
    from agent_compression.tokens import TokenCounter

    history = [system(), user("Read the logs. Do not edit anything."), assistant("On it.")]
    for i in range(4):
        history += [calls(call(f"c{i}", path=f"logs/part{i}.log")), result(f"c{i}", f"line {i}\n" * 3_000)]
    history += [assistant("Both read."), user("What did you find?")]
    counts = TokenCounter().per_message(history)
    config = CompressionConfig(context_window_tokens=16_000)
    expected = Compressor(config, FakeSummarizer()).compress(history)
    encoded = texts_encoded(monkeypatch)
    given = run_async(
        Compressor(config, FakeSummarizer(), counter=TokenCounter()).acompress(history, token_counts=counts)
    )
    assert given.warning_codes() == expected.warning_codes() and given.warning_codes()[0] == "pruned_only"
    assert (given.tokens_before, given.tokens_after) == (expected.tokens_before, expected.tokens_after)
    assert all(text.startswith("[pruned]") or len(text) < 20 for text in encoded), encoded
