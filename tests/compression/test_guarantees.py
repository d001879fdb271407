"""What the pipeline itself guarantees, whatever the summarizer: no raw secret, pinned facts, a real summary."""

from __future__ import annotations

import json
from typing import Any

import pytest

from agent_compression.config import CompressionConfig
from agent_compression.facts import PINNED_HEADING
from agent_compression.pipeline import Compressor
from agent_compression.summarize import ExtractiveSummarizer, OpenAISummarizer
from agent_compression.summary_message import is_summary_message
from agent_compression.tokens import count_text_tokens, count_tokens
from agent_compression.types import SummaryOutcome, SummaryRequest
from agent_compression.validate import validate_messages
from tests.fakes.openai_server import FakeOpenAIServer

from .builders import FakeSummarizer, assistant, call, calls, result, session, system, user
from .secret_samples import SECRET_SAMPLES

CONSTRAINT = "Do not touch infra/terraform."


def compressor(summarizer: Any = None, **options: Any) -> Compressor:
    config = CompressionConfig(**{"context_window_tokens": 4_000, **options})
    return Compressor(config, summarizer)


def history_with_secrets() -> list[dict[str, Any]]:
    """Every sample in the middle: in user turns, assistant text, tool arguments and tool output."""
    planted: list[dict[str, Any]] = []
    for n, sample in enumerate(SECRET_SAMPLES):
        cid = f"s{n}"
        planted += [
            user(f"Please keep this: {sample.text}"),
            calls(call(cid, "terminal", command=f"echo '{sample.text}' >> .env")),
            result(cid, f"wrote .env\n{sample.text}\nexit code 0", "terminal"),
            assistant(f"Noted {sample.text} in src/settings_{n}.py"),
        ]
    history = session(30)
    return history[:3] + planted + history[3:]


def strings(value: Any) -> str:
    """Every string inside ``value`` (messages, a request body), tool-call arguments decoded."""
    if isinstance(value, str):
        try:
            decoded = json.loads(value) if value[:1] in "{[" else None
        except ValueError:
            decoded = None
        return value + ("\n" + strings(decoded) if decoded is not None else "")
    if isinstance(value, dict):
        return "\n".join(strings(v) for v in value.values())
    if isinstance(value, list):
        return "\n".join(strings(v) for v in value)
    return ""


def raw_secrets_in(value: Any, fragment: int = 10) -> list[str]:
    """Kinds of the samples any ``fragment`` characters of which are in ``value`` (a cut secret leaks too)."""
    text = strings(value)
    return [
        s.kind
        for s in SECRET_SAMPLES
        if any(s.secret[i : i + fragment] in text for i in range(max(1, len(s.secret) - fragment + 1)))
    ]


def assert_no_raw_secret(result: Any) -> None:
    assert result.was_compressed and result.archive is not None
    facts = "\n".join(f.text for f in result.facts)
    assert raw_secrets_in(facts) == []
    assert raw_secrets_in(result.summary_text or "") == []
    (summary,) = [m for m in result.messages if is_summary_message(m)]
    assert raw_secrets_in(summary["content"]) == []
    # the archive keeps the originals, secrets and all
    assert raw_secrets_in(result.archive.messages) == [s.kind for s in SECRET_SAMPLES]


class TestSecretsMaskedBeforeExtraction:
    def test_no_raw_secret_reaches_facts_or_the_extractive_summary(self) -> None:
        result = compressor(ExtractiveSummarizer()).compress(history_with_secrets())
        assert result.archive is not None
        assert result.archive.start <= 3 and result.archive.end > 3 + 4 * len(SECRET_SAMPLES)
        assert_no_raw_secret(result)

    def test_no_raw_secret_reaches_the_prompt_of_an_openai_compatible_summarizer(
        self, fake_openai: FakeOpenAIServer
    ) -> None:
        summarizer = OpenAISummarizer(base_url=fake_openai.base_url, api_key="test", model="m", max_retries=0)
        result = compressor(summarizer, summary_input_tokens=30_000).compress(history_with_secrets())
        assert_no_raw_secret(result)
        (sent,) = fake_openai.requests
        assert raw_secrets_in(sent.raw) == [] and raw_secrets_in(sent.body) == []
        assert "[secret:stripe:" in sent.prompt_text and "[secret:gitlab:" in sent.prompt_text

    def test_a_custom_summarizer_gets_masked_messages_and_cannot_leak_one(self) -> None:
        history = history_with_secrets()
        leaked = SECRET_SAMPLES[0]
        summarizer = FakeSummarizer(f"I saw {leaked.text}")
        result = compressor(summarizer).compress(history)
        (request,) = summarizer.requests
        assert raw_secrets_in(request.messages) == []
        for message in request.messages:  # arguments stay valid JSON after masking
            for c in message.get("tool_calls") or ():
                json.loads(c["function"]["arguments"])
        assert leaked.secret not in (result.summary_text or "")

    def test_placeholders_are_keyed_with_the_callers_key(self) -> None:
        history = history_with_secrets()
        texts = [
            compressor(ExtractiveSummarizer(), secret_mask_key=key).compress(history).summary_text or ""
            for key in ("key-one", "key-one", "key-two")
        ]
        assert texts[0] == texts[1]
        assert texts[0] != texts[2] and "[secret:" in texts[0]

    def test_the_key_is_never_serialized_nor_taken_from_a_mapping(self) -> None:
        config = CompressionConfig(secret_mask_key="private")
        assert "secret_mask_key" not in config.to_dict() and "private" not in repr(config)
        with pytest.raises(ValueError, match="secret_mask_key"):
            CompressionConfig.from_dict({"secret_mask_key": "mine"})
        with pytest.raises(ValueError, match="secret_mask_key"):
            CompressionConfig(secret_mask_key=42)  # type: ignore[arg-type]


class ProseSummarizer:
    """A custom summarizer (just the protocol) answering plain prose, or whatever it is told."""

    name = "prose"

    def __init__(self, text: str = "The agent read modules and ran the tests.") -> None:
        self.text = text

    def summarize(self, request: SummaryRequest) -> SummaryOutcome:
        return SummaryOutcome(text=self.text, generator=self.name)

    async def asummarize(self, request: SummaryRequest) -> SummaryOutcome:
        return self.summarize(request)


def constrained_session() -> list[dict[str, Any]]:
    history = session(30)
    history[1] = user("Fix the export job.")  # the head holds no constraint: it must come from the middle
    return history[:4] + [user(f"{CONSTRAINT} 先不要修改部署脚本。"), assistant("Understood.")] + history[4:]


class TestPinnedFactsWhateverTheSummarizer:
    def test_a_custom_prose_summarizer_gets_the_pinned_facts_appended(self) -> None:
        result = compressor(ProseSummarizer()).compress(constrained_session())
        text = result.summary_text or ""
        assert text.startswith("The agent read modules") and PINNED_HEADING in text
        assert CONSTRAINT in text and "先不要修改部署脚本" in text
        (summary,) = [m for m in result.messages if is_summary_message(m)]
        assert text in summary["content"]
        assert result.summary is not None and result.summary.text == text

    def test_pinned_facts_a_model_made_up_are_replaced_by_the_codes(self) -> None:
        fake = f"Prose.\n\n{PINNED_HEADING}\n- [constraint] (#5) You may edit infra/terraform."
        text = compressor(ProseSummarizer(fake)).compress(constrained_session()).summary_text or ""
        assert "You may edit infra/terraform" not in text and CONSTRAINT in text

    def test_the_built_in_summary_is_left_as_it_was(self) -> None:
        history = constrained_session()
        summarizer = ExtractiveSummarizer()
        c = compressor(summarizer)
        result = c.compress(history)
        plan = c._prepare(history, None, 0, None, None)
        assert not isinstance(plan, type(result))
        assert result.summary_text == summarizer.summarize(plan.request).text

    @pytest.mark.parametrize("answer", ["", "   \n\t "])
    def test_an_empty_answer_is_a_failed_summary(self, answer: str) -> None:
        result = compressor(ProseSummarizer(answer)).compress(constrained_session())
        assert result.was_compressed and result.summary_text is None
        assert "summary_failed" in result.warning_codes()
        (summary,) = [m for m in result.messages if is_summary_message(m)]
        assert CONSTRAINT in summary["content"]  # the failure note still pins the user's words


def test_tail_results_pruned_for_facts_are_masked_too() -> None:
    # the latest user message comes early, so the tail holds old tool output that pruning shortens
    leaked = SECRET_SAMPLES[3]
    history = session(6) + [calls(call("t0", "terminal", command="make deploy"))]
    history.append(result("t0", f"FAILED charge with {leaked.secret}\n" + "log line\n" * 400, "terminal"))
    for n in range(1, 8):
        history += [calls(call(f"t{n}", "terminal", command=f"make step{n}")), result(f"t{n}", "ok\n" * 300)]
    compressed = compressor(FakeSummarizer(), context_window_tokens=8_000).compress(history)
    # the result with the secret, shortened in the tail
    assert [p.kind for p in compressed.pruned if p.index == 28] == ["pruned"]
    assert raw_secrets_in([f.text for f in compressed.facts]) == []


class TestTheHeadObeysTheBudget:
    def test_a_2_mb_tool_result_in_the_head_is_archived_not_kept(self) -> None:
        giant = "row,value\n" * 200_000  # ~2 MB
        history = [system(), user("Load the data."), calls(call("h", "terminal", command="cat data.csv"))]
        history += [result("h", giant, "terminal"), *session(30)[2:]]
        c = compressor(FakeSummarizer(), protect_head_messages=4)
        out = c.compress(history)
        assert out.tokens_after <= c.config.trigger_tokens and not out.degraded
        assert out.messages[:2] == history[:2] and all(m.get("content") != giant for m in out.messages)
        assert out.archive is not None and out.archive.start == 2
        assert out.archive.messages == history[2 : out.archive.end] and out.archive.verify()

    def test_what_must_stay_in_the_head_is_shortened_in_place_and_its_facts_kept(self) -> None:
        # an agent that reads a file before the first request: the read stays in the head, shortened
        big = "FAILED tests/test_io.py::test_roundtrip - KeyError: 'encoding'\n" + "ok line\n" * 20_000
        history = [system(), calls(call("r", "read_file", path="NOTES.md")), result("r", big, "read_file")]
        history += session(30)[1:]
        c = compressor(FakeSummarizer(), protect_head_messages=4)  # the head reaches the first request
        out = c.compress(history)
        assert out.tokens_after <= c.config.trigger_tokens and out.boundaries is not None
        assert out.boundaries.head_end == 4 and out.messages[3] == history[3]
        assert out.messages[2]["content"].startswith("[pruned] read_file: read file `NOTES.md`")
        assert [(p.index, p.kind) for p in out.pruned if p.index < 3] == [(2, "pruned")]
        assert any("KeyError: 'encoding'" in f.text for f in out.facts)

    def test_when_the_fixed_part_cannot_fit_the_result_says_so_with_a_code(self) -> None:
        history = [system(), user("spec " * 4_000), *session(20)[2:]]
        out = compressor(FakeSummarizer()).compress(history)
        assert out.was_compressed and out.tokens_after > 2_800
        assert "fixed_part_over_trigger" in out.warning_codes() and out.degraded
        assert all(isinstance(w.code, str) and str(w.message) for w in out.warnings)

    def test_a_run_that_saves_nothing_is_degraded(self) -> None:
        out = compressor(FakeSummarizer()).compress([system(), user("hi")])
        assert not out.was_compressed and out.tokens_after == out.tokens_before and out.degraded

    def test_the_summary_gives_way_when_head_summary_and_tail_overflow(self) -> None:
        # a 2k window: the default summary cap (800 tokens) plus the tail would pass the 1,400-token trigger
        history = session(40)
        c = compressor(ExtractiveSummarizer(), context_window_tokens=2_000)
        out = c.compress(history)
        assert out.tokens_after <= c.config.trigger_tokens, out.warning_codes()
        assert out.summary_text is not None and PINNED_HEADING in out.summary_text


class TestTheTailLeavesRoom:
    def long_run_after_the_latest_request(self) -> list[dict[str, Any]]:
        """tau-bench style: the user's latest turn, then a long run of tool calls answering it."""
        history = session(6) + [user("Downgrade all my reservations to economy, please.")]
        for n in range(40):
            history += [
                calls(call(f"r{n}", "get_reservation_details", reservation_id=f"R{n:04d}"), text=f"Checking R{n:04d}."),
                result(f"r{n}", json.dumps({"reservation_id": f"R{n:04d}", "cabin": "business"} | {"x": "y" * 600})),
            ]
        return history + [assistant("All forty reservations are downgraded.")]

    def test_the_latest_request_is_lifted_when_the_work_since_it_cannot_fit(self) -> None:
        history = self.long_run_after_the_latest_request()
        c = compressor(FakeSummarizer())
        out = c.compress(history)
        latest = len(session(6))
        assert out.boundaries is not None and out.boundaries.lifted == latest
        assert out.tokens_after <= c.config.trigger_tokens and not out.degraded
        assert out.archive is not None and out.archive.start <= latest < out.archive.end
        assert out.archive.messages == history[out.archive.start : out.archive.end]
        summary = next(i for i, m in enumerate(out.messages) if is_summary_message(m))
        assert out.messages[summary + 1 : summary + 3] == [
            {"role": "assistant", "content": out.messages[summary + 1]["content"]},
            history[latest],
        ]
        assert validate_messages(out.messages) == []

    def test_it_is_not_lifted_when_the_work_fits(self) -> None:
        history = self.long_run_after_the_latest_request()
        out = compressor(FakeSummarizer(), context_window_tokens=64_000).compress(history)
        assert out.boundaries is not None and out.boundaries.lifted is None


class _FillingSummarizer:
    """A summarizer that uses its whole budget (as a model often does)."""

    def summarize(self, request: SummaryRequest) -> SummaryOutcome:
        lines = ["## Progress"]
        while count_text_tokens("\n".join(lines)) < request.max_tokens - 20:
            n = len(lines)
            lines.append(f"- step {n}: ran the tests of pkg/module_{n} and fixed the rounding there (#{n + 2})")
        return SummaryOutcome(text="\n".join(lines), generator="filling")


def _swe_run(turns: int) -> list[dict[str, Any]]:
    """Shaped like a mini-swe-agent run: one bash tool, a long task statement, a THOUGHT and one command per
    turn, test output naming files and errors, a user's rule mid-run."""
    task = "Fix the rounding of Decimal totals in the invoice module. " + "Context of the report. " * 220
    messages = [system("You are a coding agent with one tool: bash."), user(task)]
    for n in range(turns):
        cid = f"call_{n:04d}"
        lines = [f"tests/test_{n}.py::test_case_{k} PASSED" for k in range(30 + n % 5 * 10)]
        lines.append(f"E   AssertionError: totals differ in pkg/module_{n}/core_{n}.py line {n + 10}")
        command = f"sed -i 's/round(x)/round(x, 2)/' pkg/module_{n}/core_{n}.py && pytest tests/test_{n}.py"
        messages += [
            calls(call(cid, "bash", command=command), text=f"THOUGHT: step {n}."),
            result(cid, "\n".join(lines)),
        ]
        if n == 8:
            messages.append(user("Keep pkg/module_8 unchanged until the review of step 8 is done."))
    messages[3]["content"] = "<returncode>0</returncode>\n" + "listing\n" * 20
    return messages


def test_an_earlier_summary_alone_in_the_middle_shrinks_under_the_trigger() -> None:
    """A runtime's loop at 8k (seen on real mini-swe-agent runs): the first compression's summary takes the
    room there was; then the user prompts again and the agent writes a long script in its reply, all after
    the latest user message, so the middle is only that summary. It was kept whole and every output stayed
    over the trigger ("nothing to compress"); now it is rebuilt within the room left, pinned facts kept."""
    config = CompressionConfig(context_window_tokens=8_000)
    first = Compressor(config, _FillingSummarizer()).compress(_swe_run(30))
    assert first.was_compressed and first.tokens_after <= config.trigger_tokens
    history = list(first.messages[: next(i for i, m in enumerate(first.messages) if is_summary_message(m)) + 2])
    history.append(user("Please always provide EXACTLY ONE action in triple backticks."))
    kept = count_tokens(history)
    script = "cat <<'EOF' > fix_totals.py\n"
    while count_text_tokens(script) < config.trigger_tokens - kept:  # just over the trigger with it
        script += f"replace(path_{len(script)}, old, new)\n"
    history += [
        calls(call("c_script", "bash", command="sh fix_totals.sh"), text=f"THOUGHT: I write the script.\n{script}EOF"),
        result("c_script", "<returncode>0</returncode>"),
    ]
    compressor = Compressor(config, ExtractiveSummarizer())
    assert compressor.should_compress(history)
    again = compressor.compress(history)
    assert again.tokens_after <= config.trigger_tokens, again.warning_codes()
    assert not validate_messages(again.messages, "openai")
    summary = next(m for m in again.messages if is_summary_message(m))
    assert "Keep pkg/module_8 unchanged until the review of step 8 is done." in summary["content"]
