"""OpenAISummarizer against a real HTTP server on loopback (tests/fakes/openai_server.py)."""

from __future__ import annotations

from agent_compression.facts import extract_facts
from agent_compression.prompt import PROMPT_HASH, PROMPT_VERSION
from agent_compression.summarize import InMemoryCooldown, OpenAISummarizer
from agent_compression.types import SummaryOutcome, SummaryRequest
from tests.fakes.openai_server import FakeOpenAIServer, closed_port_url

from .builders import assistant, run_async, user

KEY = "sk-proj-AbCdEfGhIjKlMnOpQrStUvWxYz0123456789"


class FakeClock:
    def __init__(self) -> None:
        self.now = 1_000.0

    def __call__(self) -> float:
        return self.now


def request() -> SummaryRequest:
    messages = [
        user(f"先不要修改部署脚本。My token is {KEY}."),
        assistant("Checking the logs of the export job."),
        user("Look at jobs/export_nightly.py please."),
    ]
    return SummaryRequest(messages=messages, start_index=5, facts=extract_facts(messages, 5), max_tokens=600)


def summarizer(server_url: str, **kwargs: object) -> OpenAISummarizer:
    options: dict = {"api_key": "test-key", "model": "fake-model", "timeout": 2.0, "max_retries": 0}
    options.update(kwargs)
    return OpenAISummarizer(base_url=server_url, **options)


def assert_failed(outcome: SummaryOutcome, fragment: str) -> None:
    assert outcome.text is None and not outcome.ok
    assert outcome.error is not None and fragment in outcome.error, outcome.error


class TestNormalAnswer:
    def test_it_returns_the_answer_with_pinned_facts_and_provenance(self, fake_openai: FakeOpenAIServer) -> None:
        outcome = summarizer(fake_openai.base_url).summarize(request())
        assert outcome.ok and outcome.error is None
        text = outcome.text or ""
        assert text.startswith("## Decisions") and "## Pinned facts\n- [constraint] (#5) 先不要修改部署脚本。" in text
        assert outcome.generator == "openai" and outcome.model == "fake-model"
        assert outcome.endpoint_host == "127.0.0.1"
        assert outcome.prompt_version == PROMPT_VERSION and outcome.prompt_hash == PROMPT_HASH
        assert outcome.input_tokens > 0 and outcome.output_tokens > 0

    def test_it_sends_a_masked_compact_prompt(self, fake_openai: FakeOpenAIServer) -> None:
        summarizer(fake_openai.base_url).summarize(request())
        (sent,) = fake_openai.requests
        assert sent.path == "/v1/chat/completions" and sent.body["model"] == "fake-model"
        assert sent.headers.get("authorization") == "Bearer test-key"
        assert KEY not in sent.raw and "[secret:api_key:" in sent.prompt_text
        assert "#5 USER (turn 1)" in sent.prompt_text and "#7 USER (turn 2)" in sent.prompt_text
        assert sent.body["temperature"] == 0.2

    def test_it_retries_once_when_asked_to(self, fake_openai: FakeOpenAIServer) -> None:
        fake_openai.script("500")
        outcome = summarizer(fake_openai.base_url, max_retries=1).summarize(request())
        assert outcome.ok and len(fake_openai.requests) == 2


class TestFailures:
    def test_it_fails_cleanly_on_a_500(self, fake_openai: FakeOpenAIServer) -> None:
        fake_openai.script("500")
        assert_failed(summarizer(fake_openai.base_url).summarize(request()), "HTTP 500")

    def test_it_fails_on_a_429_and_cools_down_for_retry_after(self, fake_openai: FakeOpenAIServer) -> None:
        clock = FakeClock()
        s = summarizer(fake_openai.base_url, clock=clock, cooldown_seconds=120)
        fake_openai.script("429", retry_after=7)
        assert_failed(s.summarize(request()), "429")
        assert s.cooldown.get(s.cooldown_key) == clock.now + 7

    def test_it_does_not_wait_for_retry_after_inside_the_call(self, fake_openai: FakeOpenAIServer) -> None:
        fake_openai.script("429", retry_after=30)
        outcome = summarizer(fake_openai.base_url, max_retries=2).summarize(request())
        assert_failed(outcome, "retry after 30s")
        assert len(fake_openai.requests) == 1 and outcome.latency_ms < 5_000

    def test_it_times_out_on_a_hanging_endpoint(self, fake_openai: FakeOpenAIServer) -> None:
        fake_openai.script("slow", delay=3.0)
        outcome = summarizer(fake_openai.base_url, timeout=0.5).summarize(request())
        assert_failed(outcome, "timeout")
        assert outcome.latency_ms < 2_500

    def test_it_fails_on_an_empty_answer(self, fake_openai: FakeOpenAIServer) -> None:
        fake_openai.script("empty")
        assert_failed(summarizer(fake_openai.base_url).summarize(request()), "empty")

    def test_it_fails_on_a_garbage_answer(self, fake_openai: FakeOpenAIServer) -> None:
        fake_openai.script("garbage")
        assert_failed(summarizer(fake_openai.base_url).summarize(request()), "not valid JSON")

    def test_it_fails_on_a_refusal_or_a_far_too_short_answer(self, fake_openai: FakeOpenAIServer) -> None:
        fake_openai.script("ok", text="I'm sorry, but I can't help with that request.")
        assert_failed(summarizer(fake_openai.base_url).summarize(request()), "refusal")
        fake_openai.script("ok", text="ok")
        s = summarizer(fake_openai.base_url, cooldown_seconds=0)
        assert_failed(s.summarize(request()), "too short")

    def test_it_fails_on_a_plain_text_answer(self, fake_openai: FakeOpenAIServer) -> None:
        fake_openai.script("text")
        outcome = summarizer(fake_openai.base_url).summarize(request())
        assert outcome.text is None and outcome.error

    def test_it_fails_when_the_server_hangs_up(self, fake_openai: FakeOpenAIServer) -> None:
        fake_openai.script("disconnect")
        assert_failed(summarizer(fake_openai.base_url).summarize(request()), "connection to the endpoint failed")

    def test_it_fails_on_a_refused_connection(self) -> None:
        assert_failed(summarizer(closed_port_url()).summarize(request()), "connection to the endpoint failed")

    def test_it_fails_on_a_bad_base_url_without_raising(self) -> None:
        assert_failed(summarizer("not a url at all").summarize(request()), "")


class TestCooldown:
    def test_it_skips_the_call_while_cooling_down(self, fake_openai: FakeOpenAIServer) -> None:
        clock = FakeClock()
        s = summarizer(fake_openai.base_url, clock=clock, cooldown_seconds=60)
        fake_openai.script("500")
        assert_failed(s.summarize(request()), "HTTP 500")
        outcome = s.summarize(request())
        assert_failed(outcome, "cooling down")
        assert outcome.extra == {"skipped": True} and len(fake_openai.requests) == 1

    def test_it_calls_again_after_the_cooldown_and_clears_it(self, fake_openai: FakeOpenAIServer) -> None:
        clock = FakeClock()
        s = summarizer(fake_openai.base_url, clock=clock, cooldown_seconds=60)
        fake_openai.script("500")
        s.summarize(request())
        clock.now += 61
        assert s.summarize(request()).ok
        assert s.cooldown.get(s.cooldown_key) is None

    def test_it_shares_an_injected_cooldown_state(self, fake_openai: FakeOpenAIServer) -> None:
        shared = InMemoryCooldown()
        clock = FakeClock()
        fake_openai.script("500")
        summarizer(fake_openai.base_url, cooldown=shared, clock=clock).summarize(request())
        other = summarizer(fake_openai.base_url, cooldown=shared, clock=clock)
        assert_failed(other.summarize(request()), "cooling down")
        assert len(fake_openai.requests) == 1


class TestAsync:
    def test_it_summarizes_asynchronously(self, fake_openai: FakeOpenAIServer) -> None:
        outcome = run_async(summarizer(fake_openai.base_url).asummarize(request()))
        assert outcome.ok and "## Pinned facts" in (outcome.text or "")

    def test_it_fails_asynchronously_without_raising(self, fake_openai: FakeOpenAIServer) -> None:
        fake_openai.script("500", "429", "garbage", "empty", "slow", delay=3.0)
        errors = []
        for _ in range(5):
            s = summarizer(fake_openai.base_url, timeout=0.5, cooldown_seconds=0)
            outcome = run_async(s.asummarize(request()))
            assert outcome.text is None
            errors.append(outcome.error or "")
        assert ["500" in errors[0], "429" in errors[1], "JSON" in errors[2], "empty" in errors[3]] == [True] * 4
        assert "timeout" in errors[4]

    def test_it_fails_asynchronously_on_a_refused_connection(self) -> None:
        outcome = run_async(summarizer(closed_port_url()).asummarize(request()))
        assert_failed(outcome, "connection to the endpoint failed")

    def test_it_skips_the_async_call_while_cooling_down(self, fake_openai: FakeOpenAIServer) -> None:
        clock = FakeClock()
        s = summarizer(fake_openai.base_url, clock=clock)
        fake_openai.script("500")
        run_async(s.asummarize(request()))
        assert_failed(run_async(s.asummarize(request())), "cooling down")
        assert len(fake_openai.requests) == 1


class TestFakeServer:
    def test_it_serves_the_path_without_v1_and_records_requests(self, fake_openai: FakeOpenAIServer) -> None:
        s = OpenAISummarizer(base_url=fake_openai.base_url.removesuffix("/v1"), api_key="k", max_retries=0)
        assert s.summarize(request()).ok
        assert fake_openai.requests[0].path == "/chat/completions"

    def test_it_can_answer_with_a_drifting_summary(self, fake_openai: FakeOpenAIServer) -> None:
        fake_openai.script("drift")
        text = summarizer(fake_openai.base_url).summarize(request()).text or ""
        assert "用户要求修改部署脚本" in text
