"""The prompt and answer cleaning for small models, against a real HTTP server on loopback.

What Qwen2.5-Coder 0.5B/1.5B really did with the 2026-12-01 prompt (bench/model.py): English summaries of
Chinese sessions, the same line repeated until ``max_tokens``, the prompt's rules and the pinned-fact
lines copied into the answer. These tests pin what the summarizer does about each.
"""

from __future__ import annotations

from agent_compression.facts import extract_facts
from agent_compression.openai_summarizer import FREQUENCY_PENALTY, clean_answer
from agent_compression.prompt import LEGACY_VERSIONS, PROMPT_HASHES, PROMPT_VERSION, build_prompt, detect_language
from agent_compression.summarize import OpenAISummarizer
from agent_compression.types import Fact, SummaryRequest
from tests.fakes.openai_server import Behaviour, FakeOpenAIServer

from .builders import assistant, call, calls, result, user

LEGACY = "2026-12-01.1"


def zh_request() -> SummaryRequest:
    messages = [
        user("每次改完都跑一下 `pytest tests/billing -q`。先别改部署脚本 deploy/prod.sh，上线的事还没定。"),
        calls(call("c1", "terminal", cmd="pytest tests/billing -q")),
        result("c1", "E       AssertionError: expected 118.00, got 117.99\n1 failed, 35 passed", name="terminal"),
        assistant("可能是缓存的问题，我还没确认。"),
        user("好，先不要提交。"),
    ]
    return SummaryRequest(messages=messages, start_index=3, facts=extract_facts(messages, 3), max_tokens=900)


def en_request() -> SummaryRequest:
    messages = [
        user("Run `pytest tests/export -q` after every change. Don't modify deploy.sh yet."),
        calls(call("c1", "terminal", cmd="pytest tests/export -q")),
        result("c1", "E       KeyError: 'currency_code'\n1 failed, 47 passed", name="terminal"),
        assistant("It's probably the cache; not confirmed."),
    ]
    return SummaryRequest(messages=messages, start_index=3, facts=extract_facts(messages, 3), max_tokens=900)


def summarizer(url: str, **kwargs: object) -> OpenAISummarizer:
    options: dict = {"model": "qwen2.5-coder-0.5b", "timeout": 5.0, "max_retries": 0, "cooldown_seconds": 0}
    options.update(kwargs)
    return OpenAISummarizer(base_url=url, **options)


LOOPING = (
    "## Decisions\n- 把 round_cents 抽出来 (#6)\n- 把 round_cents 抽出来 (#6)\n- 把 round_cents 抽出来。\n\n"
    "## Constraints and preferences\n- 先别改部署脚本 deploy/prod.sh (#3)\n"
    "- [constraint] (#3) 先别改部署脚本 deploy/prod.sh\n"
    "- 先别改部署脚本 deploy/prod.sh (#3)\n\n"
    "## Errors\n- AssertionError: expected 118.00, got 117.99（未解决）\n"
    "- AssertionError: expected 118.00, got 117.99（未解决）\n"
)


class TestLanguage:
    def test_a_chinese_session_gets_chinese_instructions(self, fake_openai: FakeOpenAIServer) -> None:
        summarizer(fake_openai.base_url).summarize(zh_request())
        (sent,) = fake_openai.requests
        system, prompt = (m["content"] for m in sent.messages)
        assert "请用中文写摘要" in system and "Write in English" not in system
        assert "现在用中文写摘要" in prompt and "## Decisions\n- " in prompt  # the skeleton, headings in English
        assert "不要抄写这些行" in prompt  # pinned facts are marked as not to be copied

    def test_an_english_session_gets_english_instructions(self, fake_openai: FakeOpenAIServer) -> None:
        summarizer(fake_openai.base_url).summarize(en_request())
        system = fake_openai.requests[0].messages[0]["content"]
        assert "Write in English" in system and "请用中文" not in system

    def test_the_language_can_be_forced(self, fake_openai: FakeOpenAIServer) -> None:
        summarizer(fake_openai.base_url, language="zh").summarize(en_request())
        assert "请用中文写摘要" in fake_openai.requests[0].messages[0]["content"]

    def test_it_detects_the_language_of_the_user_turns(self) -> None:
        assert detect_language("先别改部署脚本 deploy/prod.sh，上线的事还没定") == "zh"
        assert detect_language("Don't modify deploy.sh yet, 谢谢") == "en"
        # a Chinese session whose tool output is English: the user turns decide
        zh = build_prompt(
            "#1 USER (turn 1): 先别改部署脚本\n#2 TOOL RESULT terminal (9 lines): " + "error in module foo " * 50,
            facts=[],
            focus_topic=None,
            previous_summary=None,
            max_tokens=500,
            first_index=1,
            last_index=2,
        )
        assert "请用中文写摘要" in zh[0]["content"]

    def test_the_legacy_prompt_is_kept_for_comparison(self, fake_openai: FakeOpenAIServer) -> None:
        outcome = summarizer(fake_openai.base_url, prompt_version=LEGACY).summarize(zh_request())
        system = fake_openai.requests[0].messages[0]["content"]
        assert LEGACY in LEGACY_VERSIONS and "context compressor" in system and "请用中文" not in system
        assert (
            outcome.prompt_version == LEGACY
            and outcome.prompt_hash == PROMPT_HASHES[LEGACY] != PROMPT_HASHES[PROMPT_VERSION]
        )


class TestRepetition:
    def test_it_sends_a_frequency_penalty(self, fake_openai: FakeOpenAIServer) -> None:
        outcome = summarizer(fake_openai.base_url).summarize(zh_request())
        body = fake_openai.requests[0].body
        assert body["frequency_penalty"] == FREQUENCY_PENALTY > 0
        assert outcome.extra["params"]["frequency_penalty"] == FREQUENCY_PENALTY

    def test_the_legacy_prompt_sends_none(self, fake_openai: FakeOpenAIServer) -> None:
        summarizer(fake_openai.base_url, prompt_version=LEGACY).summarize(zh_request())
        assert "frequency_penalty" not in fake_openai.requests[0].body

    def test_repeated_lines_and_copied_pinned_lines_are_cut(self, fake_openai: FakeOpenAIServer) -> None:
        fake_openai.script(Behaviour(text=LOOPING))
        outcome = summarizer(fake_openai.base_url).summarize(zh_request())
        text = outcome.text or ""
        prose = text.split("## Pinned facts")[0]
        assert prose.count("把 round_cents 抽出来") == 1
        assert prose.count("先别改部署脚本 deploy/prod.sh") == 1 and "[constraint]" not in prose
        assert prose.count("expected 118.00, got 117.99") == 1
        assert "## Pinned facts\n- [constraint]" in text  # the code's own section stays
        assert outcome.extra["raw_answer"] == LOOPING and outcome.extra["removed_lines"] == 5

    def test_the_legacy_prompt_keeps_the_answer_as_it_came(self, fake_openai: FakeOpenAIServer) -> None:
        fake_openai.script(Behaviour(text=LOOPING))
        outcome = summarizer(fake_openai.base_url, prompt_version=LEGACY).summarize(zh_request())
        assert (outcome.text or "").split("## Pinned facts")[0].count("把 round_cents 抽出来") == 3

    def test_an_answer_that_only_copies_the_prompt_fails_and_keeps_the_raw_text(
        self, fake_openai: FakeOpenAIServer
    ) -> None:
        copied = (
            "## Constraints and preferences\n"
            '- Keep uncertainty: "probably", "maybe", "suspected" stay hedged unless confirmed later.\n'
            "- Copy identifiers exactly; invent none. Cite messages as (#N).\n"
            "- [constraint] (#3) Run `pytest tests/export -q` after every change.\n"
        )
        fake_openai.script(Behaviour(text=copied))
        outcome = summarizer(fake_openai.base_url).summarize(en_request())
        assert not outcome.ok and "only repeated the prompt" in (outcome.error or "")
        assert outcome.extra["raw_answer"] == copied

    def test_generation_is_capped_by_the_pinned_share_and_max_answer_tokens(
        self, fake_openai: FakeOpenAIServer
    ) -> None:
        summarizer(fake_openai.base_url, max_answer_tokens=300).summarize(en_request())
        summarizer(fake_openai.base_url).summarize(en_request())
        capped, free = (r.body["max_tokens"] for r in fake_openai.requests)
        assert capped == 300 and 300 < free < 900


class TestCleanAnswer:
    def test_chinese_and_bold_headings_become_the_fixed_ones(self) -> None:
        text, _ = clean_answer("**决策**\n- 拆分 calc_tax\n### 错误：\n- ZeroDivisionError\nProgress:\n- 测试通过 (#9)")
        assert text.splitlines() == [
            "## Decisions",
            "- 拆分 calc_tax",
            "## Errors",
            "- ZeroDivisionError",
            "## Progress and next steps",
            "- 测试通过 (#9)",
        ]

    def test_a_loop_inside_a_line_is_cut(self) -> None:
        text, _ = clean_answer("## Decisions\n- run the tests run the tests run the tests run the tests")
        assert text == "## Decisions\n- run the tests"

    def test_a_line_cut_by_max_tokens_goes(self) -> None:
        text, _ = clean_answer("## Decisions\n- keep deploy.sh as is\n- and then the", truncated=True)
        assert text == "## Decisions\n- keep deploy.sh as is"

    def test_lines_differing_only_in_citation_or_punctuation_are_one(self) -> None:
        text, removed = clean_answer(
            "## Errors\n- KeyError: 'currency_code' (#12)\n- KeyError: 'currency_code'.\n- `KeyError: 'currency_code'`"
        )
        assert text == "## Errors\n- KeyError: 'currency_code' (#12)" and removed == 2

    def test_prompt_rules_and_pinned_facts_are_not_copied(self) -> None:
        system = build_prompt(
            "#1 USER (turn 1): hi",
            facts=[],
            focus_topic=None,
            previous_summary=None,
            max_tokens=300,
            first_index=1,
            last_index=1,
        )[0]["content"]
        fact = Fact("constraint", "Don't modify deploy.sh yet.", 3)
        answer = (
            "## Constraints and preferences\n- Copy identifiers exactly; invent none. Cite messages as (#N).\n"
            "- Don't modify deploy.sh yet.\n- The user wants deploy.sh left alone until ops agree (#3)\n"
        )
        text, removed = clean_answer(answer, facts_lines=[fact], prompt=system)
        assert text == "## Constraints and preferences\n- The user wants deploy.sh left alone until ops agree (#3)"
        assert removed == 2
