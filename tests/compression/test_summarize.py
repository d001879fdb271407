from __future__ import annotations

from agent_compression.facts import extract_facts, find_previous_summary, pinned_facts_of
from agent_compression.prompt import PROMPT_HASH, PROMPT_VERSION, SYSTEM_TEMPLATE, build_prompt
from agent_compression.serialize import head_tail, serialize_segment
from agent_compression.summarize import ExtractiveSummarizer
from agent_compression.summary_body import HEADINGS_ZH, SECTION_HEADINGS, finalize_summary, session_language
from agent_compression.summary_message import SummaryHeader, render_summary_message
from agent_compression.tokens import count_text_tokens
from agent_compression.types import Fact, SummaryRequest
from tests.samples import CODING, WECHAT, sample_messages

from .builders import assistant, call, calls, run_async, user

KEY = "sk-proj-AbCdEfGhIjKlMnOpQrStUvWxYz0123456789"


def tool(call_id: str, content: str, name: str = "terminal") -> dict:
    return {"role": "tool", "tool_call_id": call_id, "name": name, "content": content}


def coding_sample() -> list[dict]:
    return sample_messages(CODING)


def wechat_sample() -> list[dict]:
    return sample_messages(WECHAT)


def request_for(messages: list[dict], start: int = 0, **kwargs: object) -> SummaryRequest:
    return SummaryRequest(messages=messages, start_index=start, facts=extract_facts(messages, start), **kwargs)  # type: ignore[arg-type]


class TestSerializeSegment:
    def test_it_numbers_user_turns_and_names_tool_calls(self) -> None:
        text = serialize_segment(
            [user("first"), calls(call("c1", "terminal", cmd="ls -la")), tool("c1", "a\nb"), user("second")], 10
        )
        assert "#10 USER (turn 1): first" in text
        assert "#11 ASSISTANT: -> calls terminal(cmd=ls -la)" in text
        assert "#12 TOOL RESULT terminal" in text
        assert "#13 USER (turn 2): second" in text

    def test_it_abbreviates_long_content_with_an_omitted_marker(self) -> None:
        text = serialize_segment([tool("c1", "HEAD " + "x" * 50_000 + " TAIL")], 0, 5_000)
        assert "chars omitted ..." in text and text.count("x") < 2_000
        assert "HEAD" in text and "TAIL" in text

    def test_it_respects_the_token_budget_and_keeps_user_turns(self) -> None:
        messages = []
        for i in range(200):
            messages += [user(f"request number {i}"), assistant("long answer " * 200), tool("c", "output " * 500)]
        text = serialize_segment(messages, 0, 2_000)
        assert count_text_tokens(text) <= 2_000
        assert "request number 199" in text and "request number 150" in text
        assert "messages omitted" in text

    def test_it_masks_secrets(self) -> None:
        text = serialize_segment(
            [user(f"my key is {KEY}"), calls(call("c", "terminal", cmd=f"curl -H 'Bearer {KEY}'"))]
        )
        assert KEY not in text and "[secret:api_key:" in text

    def test_it_cuts_long_text_on_whitespace(self) -> None:
        cut = head_tail("word " * 1000, 100)
        assert "[... " in cut and all(part in ("word", "") or "omitted" in cut for part in cut.split(" ")[:5])


class TestPrompt:
    def test_it_is_versioned_and_hashed(self) -> None:
        assert PROMPT_VERSION.startswith("2026-") and len(PROMPT_HASH) == 64
        for heading in SECTION_HEADINGS:
            assert heading in SYSTEM_TEMPLATE.format(headings="\n".join(SECTION_HEADINGS), max_tokens=100)

    def test_it_includes_focus_previous_summary_and_pinned_facts(self) -> None:
        messages = build_prompt(
            "#1 USER (turn 1): hi",
            facts=[Fact("constraint", "先不要修改部署脚本", 4)],
            focus_topic="部署",
            previous_summary=f"## Decisions\n- old {KEY}",
            max_tokens=500,
            first_index=1,
            last_index=9,
        )
        prompt = messages[1]["content"]
        assert "Focus topic: 部署" in prompt and "- [constraint] (#4) 先不要修改部署脚本" in prompt
        assert "## Decisions" in prompt and KEY not in prompt
        assert "never turn a" in messages[0]["content"].lower() or "Never turn a" in messages[0]["content"]


class TestFinalizeSummary:
    def test_it_replaces_a_model_written_pinned_section(self) -> None:
        body = finalize_summary(
            "## Decisions\n- x\n\n## Pinned facts\n- [constraint] invented", [Fact("path", "a/b.py", 3)], 500
        )
        assert "invented" not in body and body.endswith("## Pinned facts\n- [path] (#3) a/b.py")

    def test_it_caps_the_body_giving_pinned_facts_priority(self) -> None:
        prose = "## Progress and next steps\n" + "\n".join(f"- step {i} " + "blah " * 30 for i in range(100))
        facts = [Fact("constraint", f"Do not touch service {i}.", i) for i in range(10)]
        body = finalize_summary(prose, facts, 400)
        assert count_text_tokens(body) <= 400
        assert all(f"Do not touch service {i}." in body for i in range(10))
        assert "- step 99" in body and "- step 0 " not in body  # oldest lines go first


class TestExtractiveSummarizer:
    def test_it_writes_the_sections_and_pins_constraints_verbatim(self) -> None:
        messages = coding_sample()
        outcome = ExtractiveSummarizer().summarize(request_for(messages[1:-2], 1, max_tokens=1_500))
        assert outcome.ok and outcome.generator == "extractive" and outcome.error is None
        text = outcome.text or ""
        for heading in ("## Errors", "## Constraints and preferences", "## Progress and next steps", "## Pinned facts"):
            assert heading in text
        assert "- [constraint] (#1) Do not change anything under infra/terraform." in text
        assert "QueryCanceled" in text

    def test_it_summarizes_chinese_sessions(self) -> None:
        messages = wechat_sample()
        text = ExtractiveSummarizer().summarize(request_for(messages[1:-2], 1, max_tokens=800)).text or ""
        assert "周三上午的评审会不要动，其他会议可以挪。" in text
        assert "KeyError: 'hangzhou'" in text and "疑似配置缺失" in text

    def test_it_respects_the_cap(self) -> None:
        messages = []
        for i in range(500):
            messages += [user(f"Please look at service_{i} and check its logs thoroughly."), assistant("Because " * 50)]
        outcome = ExtractiveSummarizer().summarize(request_for(messages, 0, max_tokens=300))
        assert outcome.text is not None and count_text_tokens(outcome.text) <= 300

    def test_it_is_deterministic(self) -> None:
        messages = coding_sample()
        first = ExtractiveSummarizer().summarize(request_for(messages[1:-2], 1, focus_topic="batch size")).text
        second = ExtractiveSummarizer().summarize(request_for(messages[1:-2], 1, focus_topic="batch size")).text
        assert first == second

    def test_it_puts_the_focus_topic_first(self) -> None:
        messages = [user("Look at the billing export."), assistant("The export timeout is 30s."), user("ok thanks")]
        text = ExtractiveSummarizer().summarize(request_for(messages, 0, focus_topic="export timeout")).text or ""
        assert text.startswith("## Focus") and "The export timeout is 30s." in text.split("\n\n")[0]

    def test_it_marks_errors_resolved_by_a_later_message(self) -> None:
        messages = [
            calls(call("c1", "terminal", cmd="pytest")),
            tool("c1", "FAILED tests/test_a.py::test_x"),
            assistant("Fixed the import; all tests pass now."),
        ]
        text = ExtractiveSummarizer().summarize(request_for(messages)).text or ""
        assert "(#1) resolved later (#2): FAILED tests/test_a.py::test_x" in text

    def test_it_merges_the_previous_summary_and_carries_its_facts(self) -> None:
        first_segment = [user("先不要修改部署脚本。"), assistant("好的，我们决定先检查日志。")]
        first = ExtractiveSummarizer().summarize(request_for(first_segment, 1, max_tokens=600)).text or ""
        header = SummaryHeader("s1", "extractive", None, "2026-11-30T00:00:00Z", (1, 3), None)
        second_segment = [render_summary_message(first, header), user("检查 /var/log/app.log 里的报错。")]
        request = request_for(second_segment, 1, max_tokens=600, previous_summary=find_previous_summary(second_segment))
        second = ExtractiveSummarizer().summarize(request).text or ""
        assert "好的，我们决定先检查日志。" in second and "/var/log/app.log" in second
        pinned = [(f.kind, f.text) for f in pinned_facts_of(second)]
        assert ("constraint", "先不要修改部署脚本。") in pinned

    def test_it_does_not_grow_over_repeated_compressions(self) -> None:
        body: str | None = None
        sizes = []
        for round_ in range(6):
            segment = [user(f"Round {round_}: do not touch module_{round_}.")]
            segment += [assistant(f"We decided to refactor part {round_}/{i} because it is slow.") for i in range(30)]
            if body:
                header = SummaryHeader(f"s{round_}", "extractive", None, "t", (0, 1), None)
                segment.insert(0, render_summary_message(body, header))
            request = request_for(segment, 0, max_tokens=500, previous_summary=find_previous_summary(segment))
            body = ExtractiveSummarizer().summarize(request).text
            assert body is not None
            sizes.append(count_text_tokens(body))
        assert max(sizes) <= 500
        assert all(f"do not touch module_{r}." in body for r in range(6))

    def test_it_masks_secrets_in_the_summary(self) -> None:
        text = ExtractiveSummarizer().summarize(request_for([user(f"Please use the key {KEY} for staging.")])).text
        assert text is not None and KEY not in text

    def test_it_works_from_async_code(self) -> None:

        outcome = run_async(ExtractiveSummarizer().asummarize(request_for([user("Never push to main.")])))
        assert outcome.ok and "Never push to main." in (outcome.text or "")


class TestPinnedBudget:
    def test_it_trims_paths_decisions_and_errors_evenly_after_identifiers(self) -> None:
        facts = [Fact("constraint", "Never push to main.", 0)]
        facts += [Fact("error", f"ValueError: bad value number {i} in the parser", i) for i in range(1, 11)]
        facts += [Fact("path", f"src/package_{i}/module_{i}.py", i) for i in range(11, 31)]
        facts += [Fact("decision", f"We decided to refactor part {i} of the exporter.", i) for i in range(31, 41)]
        facts += [Fact("identifier", f"OPS-{i}", i) for i in range(41, 61)]
        body = finalize_summary("", facts, 300)
        pinned = pinned_facts_of(body)
        by_kind = {k: [f for f in pinned if f.kind == k] for k in ("constraint", "error", "path", "decision")}
        assert len(by_kind["constraint"]) == 1 and not [f for f in pinned if f.kind == "identifier"]
        assert min(len(v) for k, v in by_kind.items() if k != "constraint") >= 2
        assert count_text_tokens(body) <= 300
        assert "src/package_30/module_30.py" in body  # the newest survive


class TestThroughThePipeline:
    def test_it_keeps_pinned_facts_across_repeated_compressions(self) -> None:
        from agent_compression import CompressionConfig, Compressor

        config = CompressionConfig(context_window_tokens=2_000)
        history: list[dict] = [{"role": "system", "content": "agent"}, user("Start the export investigation.")]
        history += [user("先不要修改部署脚本 deploy/prod.sh，等我确认。")]
        sizes = []
        for round_ in range(4):
            for i in range(12):
                history += [
                    calls(call(f"c{round_}_{i}", "terminal", cmd=f"tail -n 50 /var/log/app{i}.log")),
                    tool(f"c{round_}_{i}", f"line {round_}/{i}\n" * 80),
                    user(f"Round {round_} step {i}: keep looking."),
                ]
            result = Compressor(config, ExtractiveSummarizer()).compress(history)
            assert result.was_compressed and result.summary_text is not None
            sizes.append(count_text_tokens(result.summary_text))
            text = "\n".join(str(m.get("content") or "") for m in result.messages)
            assert "先不要修改部署脚本 deploy/prod.sh，等我确认。" in text
            history = result.messages
        assert max(sizes) <= config.effective_summary_max_tokens


class TestSessionLanguage:
    """The extractive summary is written in the session's language; either language parses back."""

    def test_a_chinese_session_gets_chinese_headings_and_labels(self) -> None:
        text = ExtractiveSummarizer().summarize(request_for(wechat_sample()[1:-2], 1, max_tokens=2000)).text or ""
        headings = [line for line in text.splitlines() if line.startswith("## ")]
        assert headings and all(h in HEADINGS_ZH.values() or h == "## Pinned facts" for h in headings), headings
        for english in ("User request", "Finding", "Last assistant state", "not resolved", "lines)"):
            assert english not in text
        assert "- 用户 (#1):" in text

    def test_an_english_session_keeps_english_headings(self) -> None:
        text = ExtractiveSummarizer().summarize(request_for(coding_sample()[1:-2], 1, max_tokens=2000)).text or ""
        assert "## Progress and next steps" in text and not set(HEADINGS_ZH.values()) & set(text.splitlines())

    def test_a_chinese_sentence_full_of_code_is_still_chinese(self) -> None:
        assert session_language(["先别改 deploy.sh，跑一下 pytest -q tests/test_export.py 看看"]) == "zh"
        assert session_language(["Please don't touch deploy.sh, 谢谢"]) == "en"
        assert session_language([]) == "en"

    def test_a_chinese_summary_merges_into_the_next_one(self) -> None:
        from agent_compression import CompressionConfig, Compressor

        history = [{"role": "system", "content": "助手"}, user("帮我排查导出任务，先别改部署脚本 deploy/prod.sh。")]
        texts = []
        for round_ in range(3):
            for i in range(12):
                history += [
                    calls(call(f"c{round_}_{i}", "terminal", cmd=f"tail -n 50 /var/log/app{i}.log")),
                    tool(f"c{round_}_{i}", f"第 {round_}/{i} 行日志\n" * 80),
                    user(f"第 {round_} 轮第 {i} 步：继续查看日志，注意内存。"),
                ]
            result = Compressor(CompressionConfig(context_window_tokens=2_000), ExtractiveSummarizer()).compress(
                history
            )
            assert result.summary_text is not None
            texts.append(result.summary_text)
            history = result.messages
            assert "先别改部署脚本 deploy/prod.sh" in "\n".join(str(m.get("content")) for m in history)
        for text in texts:
            assert text.count("## 进展") == 1 and "## Progress" not in text, text
        assert "第 0 轮" in texts[1] or "第 0 轮" in texts[2]  # lines carried from the first summary


def test_the_extractive_summarizer_reports_the_tokens_it_read() -> None:
    """Provenance said "Tokens 0 → 459" for every extractive summary: it reads the whole segment."""
    from agent_compression import CompressionConfig, Compressor

    history: list[dict] = [{"role": "system", "content": "agent"}, user("Start the export investigation.")]
    for i in range(30):
        history += [calls(call(f"c{i}", "terminal", cmd=f"cat f{i}.log")), tool(f"c{i}", f"line {i}\n" * 60)]
    history.append(user("Go on."))
    result = Compressor(CompressionConfig(context_window_tokens=2_000), ExtractiveSummarizer()).compress(history)
    assert result.was_compressed and result.summary is not None
    assert result.summary.input_tokens > result.summary.output_tokens > 0
