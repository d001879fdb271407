from __future__ import annotations

from agent_compression.facts import (
    FactLimits,
    extract_facts,
    find_previous_summary,
    pinned_facts_of,
    render_pinned_facts,
)
from agent_compression.summary_message import SummaryHeader, render_summary_message
from agent_compression.types import Fact
from tests.samples import CODING, WECHAT, sample_messages

from .builders import assistant, call, calls, user


def tool(call_id: str, content: str, name: str = "terminal") -> dict:
    return {"role": "tool", "tool_call_id": call_id, "name": name, "content": content}


def texts(facts: list[Fact], kind: str) -> list[str]:
    return [f.text for f in facts if f.kind == kind]


class TestConstraints:
    def test_it_keeps_english_prohibitions_as_whole_sentences(self) -> None:
        facts = extract_facts([user("The export job crashes. Do not change anything under infra/terraform.")])
        assert texts(facts, "constraint") == ["Do not change anything under infra/terraform."]

    def test_it_finds_each_english_cue(self) -> None:
        sentences = [
            "Don't push to main.",
            "Never delete the backups.",
            "You must not restart the database.",
            "No force pushes.",
            "Avoid touching the billing module.",
            "Only use the staging cluster.",
        ]
        facts = extract_facts([user(" ".join(sentences))])
        assert texts(facts, "constraint") == sentences

    def test_it_finds_each_chinese_cue(self) -> None:
        sentences = [
            "先不要修改部署脚本。",
            "别动生产数据库。",
            "禁止在周末发布。",
            "不许删除日志。",
            "千万不要重启网关。",
            "只能用测试环境。",
            "必须先备份。",
            "酒店预算每晚不超过 600 元。",
        ]
        facts = extract_facts([user("".join(sentences))])
        assert texts(facts, "constraint") == sentences

    def test_it_does_not_mistake_bie_de_for_a_prohibition(self) -> None:
        assert texts(extract_facts([user("还有别的选择吗？")]), "constraint") == []

    def test_it_takes_constraints_from_users_only(self) -> None:
        facts = extract_facts([assistant("I will not change infra/terraform."), user("ok")])
        assert texts(facts, "constraint") == []

    def test_it_records_the_absolute_source_index(self) -> None:
        facts = extract_facts([user("hello"), user("Do not deploy.")], start_index=40)
        assert [f.source_index for f in facts if f.kind == "constraint"] == [41]


class TestOtherKinds:
    def test_it_finds_approvals_in_english_and_chinese(self) -> None:
        facts = extract_facts([user("我批准执行数据库迁移。"), user("Approved, go ahead with the rollout.")])
        assert texts(facts, "approval") == ["我批准执行数据库迁移。", "Approved, go ahead with the rollout."]

    def test_it_treats_a_refusal_as_a_constraint_not_an_approval(self) -> None:
        facts = extract_facts([user("我不同意执行迁移。")])
        assert texts(facts, "constraint") == ["我不同意执行迁移。"] and texts(facts, "approval") == []

    def test_it_finds_paths_commands_and_errors_in_tool_traffic(self) -> None:
        facts = extract_facts(
            [
                calls(call("c1", "terminal", cmd="python scripts/expense.py --budget 600")),
                tool(
                    "c1",
                    'Traceback (most recent call last):\n  File "scripts/expense.py", line 14\n'
                    "KeyError: 'hangzhou'\nexit code 1",
                ),
                calls(call("c2", "read_file", path="jobs/export_nightly.py")),
            ]
        )
        assert "python scripts/expense.py --budget 600" in texts(facts, "command")
        assert {"scripts/expense.py", "jobs/export_nightly.py"} <= set(texts(facts, "path"))
        assert "KeyError: 'hangzhou'" in texts(facts, "error")

    def test_it_finds_chinese_error_lines(self) -> None:
        facts = extract_facts([user("部署的时候报错了：连接被拒绝")])
        assert texts(facts, "error") == ["部署的时候报错了：连接被拒绝"]

    def test_a_server_error_answered_to_a_request_is_an_error_line(self) -> None:
        output = "GET https://orders.staging.internal/healthz -> 503 (redis: down)\n[exit code 2]"
        facts = extract_facts([calls(call("c1", "terminal", cmd="curl -s staging/healthz")), tool("c1", output)])
        assert "GET https://orders.staging.internal/healthz -> 503 (redis: down)" in texts(facts, "error")
        assert texts(extract_facts([user("GET /v1/orders -> 200 in 31 ms")]), "error") == []

    def test_it_finds_identifiers(self) -> None:
        facts = extract_facts(
            [assistant("See OPS-1234, fix in `fetch_batch` at commit 3f2a9bc1, release v2.4.1, G7300 at 06:00, 30s.")]
        )
        found = set(texts(facts, "identifier"))
        assert {"OPS-1234", "fetch_batch", "3f2a9bc1", "v2.4.1", "G7300"} <= found
        assert "30s" not in found  # a duration on its own names nothing

    def test_it_finds_decisions(self) -> None:
        facts = extract_facts([assistant("We decided to switch to BATCH=5000."), user("那就改为每批 5000 行。")])
        assert texts(facts, "decision") == ["We decided to switch to BATCH=5000.", "那就改为每批 5000 行。"]

    def test_it_masks_secrets_in_fact_text(self) -> None:
        facts = extract_facts([calls(call("c1", "terminal", cmd="export OPENAI_API_KEY=sk-abcdefghijklmnopqrstuvwx"))])
        assert all("sk-abcdefghijklmnopqrstuvwx" not in f.text for f in facts)


class TestLimits:
    def test_it_deduplicates_by_kind_and_text_keeping_the_first_index(self) -> None:
        facts = extract_facts([user("Do not deploy."), user("Do not deploy.")])
        assert [(f.text, f.source_index) for f in facts] == [("Do not deploy.", 0)]

    def test_it_caps_low_priority_kinds_but_keeps_every_constraint(self) -> None:
        messages = [user(f"Do not touch module_{i}. See OPS-{i}.") for i in range(60)]
        facts = extract_facts(messages, limits=FactLimits(constraint=100, identifier=5))
        assert len(texts(facts, "constraint")) == 60
        assert texts(facts, "identifier") == [f"OPS-{i}" for i in range(55, 60)]  # the most recent win

    def test_it_orders_facts_by_kind_priority(self) -> None:
        facts = extract_facts([calls(call("c", "read_file", path="a/b.py")), user("Never push.")])
        assert [f.kind for f in facts] == ["constraint", "path"]

    def test_it_scans_only_the_edges_of_huge_tool_output(self) -> None:
        middle = "x" * 5_000_000 + "\nValueError: hidden in the middle\n" + "y" * 5_000_000
        facts = extract_facts([tool("c", "start\n" + middle + "\nRuntimeError: at the end")])
        assert texts(facts, "error") == ["RuntimeError: at the end"]


class TestCarriedFacts:
    def summary_message(self, facts: list[Fact]) -> dict:
        header = SummaryHeader("s1", "extractive", None, "2026-11-30T00:00:00Z", (3, 9), "ab" * 32)
        return render_summary_message("## Decisions\n- something\n\n" + render_pinned_facts(facts), header)

    def test_it_round_trips_the_pinned_section(self) -> None:
        facts = [Fact("constraint", "先不要修改部署脚本", 12), Fact("path", "deploy/prod.sh", None)]
        parsed = pinned_facts_of(render_pinned_facts(facts))
        assert [(f.kind, f.text) for f in parsed] == [("constraint", "先不要修改部署脚本"), ("path", "deploy/prod.sh")]

    def test_it_carries_facts_of_an_earlier_summary(self) -> None:
        earlier = self.summary_message([Fact("constraint", "先不要修改部署脚本", 12)])
        facts = extract_facts([earlier, user("继续检查日志。"), user("先不要修改部署脚本")], start_index=3)
        constraints = [(f.text, f.source_index) for f in facts if f.kind == "constraint"]
        assert constraints == [("先不要修改部署脚本", 12)]  # the history index written there is kept

    def test_it_does_not_extract_facts_from_the_summary_prose(self) -> None:
        earlier = self.summary_message([])
        assert extract_facts([earlier]) == []

    def test_it_finds_the_latest_previous_summary(self) -> None:
        first = self.summary_message([Fact("constraint", "one", 1)])
        second = self.summary_message([Fact("constraint", "two", 2)])
        body = find_previous_summary([first, user("x"), second, user("y")])
        assert body is not None and "[constraint] (#2) two" in body
        assert find_previous_summary([user("x")]) is None


class TestSamples:
    def test_it_pins_the_coding_sample_constraint(self) -> None:
        messages = sample_messages(CODING)
        assert "Do not change anything under infra/terraform." in texts(extract_facts(messages), "constraint")

    def test_it_pins_the_wechat_sample_constraints(self) -> None:
        messages = sample_messages(WECHAT)
        constraints = texts(extract_facts(messages), "constraint")
        assert "周三上午的评审会不要动，其他会议可以挪。" in constraints


class TestErrorLines:
    def test_it_takes_the_exception_line_that_ends_a_traceback(self) -> None:
        output = (
            "INFO starting\nTraceback (most recent call last):\n"
            '  File "worker.py", line 3, in run\n    cur.execute(sql)\n'
            'psycopg.errors.UniqueViolation: duplicate key value violates unique constraint "invoice_pkey"\n'
            "exit code 1\n"
        )
        facts = extract_facts([tool("c", output)])
        assert texts(facts, "error") == [
            'psycopg.errors.UniqueViolation: duplicate key value violates unique constraint "invoice_pkey"'
        ]

    def test_it_keeps_a_bare_exit_code_when_nothing_else_failed(self) -> None:
        assert texts(extract_facts([tool("c", "compiling...\nexit code 2")]), "error") == ["exit code 2"]

    def test_it_ignores_success_lines(self) -> None:
        output = "collected 12 items\n12 passed, 0 failed\nexit code 0\nno errors"
        assert texts(extract_facts([tool("c", output)]), "error") == []

    def test_it_survives_odd_messages(self) -> None:
        messages = [
            "not a dict",
            {"role": "user", "content": [{"type": "text", "text": "Never push to main."}]},
            {"role": "assistant", "content": None, "tool_calls": [{"function": {"name": "terminal"}}, "junk"]},
            {"role": "tool", "content": None},
            {"content": "no role"},
        ]
        facts = extract_facts(messages)  # type: ignore[arg-type]
        assert texts(facts, "constraint") == ["Never push to main."]


class TestPaths:
    def test_a_path_cut_by_the_head_of_a_tool_output_is_not_pinned(self) -> None:
        # only the opening of an output is read for paths: one that straddles its end ("tests/billing/test_money.p")
        # names no file
        listing = "tests/billing/test_rows.py ......  [ 42%]\n"
        output = listing + "." * (300 - len(listing) - len("tests/billing/test_money.p") - 1) + "\n"
        output += "tests/billing/test_money.py ......  [ 84%]\n6 passed"
        assert output[:300].endswith("test_money.p")
        messages = [*calls(("c1", "terminal", {"cmd": "pytest tests/billing -q"})), tool("c1", output)]
        paths = texts(extract_facts(messages), "path")
        assert "tests/billing/test_rows.py" in paths
        assert "tests/billing/test_money.p" not in paths

    def test_it_finds_paths_with_chinese_file_names_inside_chinese_text(self) -> None:
        from agent_compression.facts import find_paths

        assert find_paths("请看一下 src/billing/发票模板.html 这个文件。") == ["src/billing/发票模板.html"]
        assert find_paths("先不要修改deploy/prod.sh脚本") == ["deploy/prod.sh"]

    def test_it_skips_urls_and_fractions(self) -> None:
        from agent_compression.facts import find_paths

        assert find_paths("see https://example.com/a/b.html and 3/4 and and/or") == []


class TestStandingRules:
    """The user's standing rules, in either language, are pinned whole; durations and counts are no identifiers."""

    RULES = (
        "Keep the payments kill switch on until the vendor confirms the fix.",
        "Only touch the canary cluster this week.",
        "Merge nothing unless the nightly run is green.",
        "Everything except the ledger tables may be migrated.",
        "Leave the cron jobs paused while I am away.",
        "Wait for my go before you rotate the keys.",
        "在法务回复之前，保持导出功能关闭。",
        "只改测试环境的配置。",
        "除非回归测试全部通过，否则不要发版。",
        "除了账单服务，其他服务都可以重启。",
        "等运维确认以后再切流量。",
        "只有主管批准了才能删除备份。",
    )
    NOT_RULES = (
        "The import took 4 s on the laptop.",
        "I looked at the dashboard this morning.",
        "这只是一个草稿。",
        "我删除了旧的日志文件。",
        "之前的版本没有这个问题。",
        "不只是前端，后端也慢。",
    )

    def test_rules_in_both_languages_are_pinned_whole(self) -> None:
        for rule in self.RULES:
            assert texts(extract_facts([user(rule)]), "constraint") == [rule], rule

    def test_statements_are_not_rules(self) -> None:
        for sentence in self.NOT_RULES:
            assert texts(extract_facts([user(sentence)]), "constraint") == [], sentence

    def test_durations_and_counts_are_not_identifiers(self) -> None:
        sentence = "Retry 3 times with a 30s pause, 4 s apart, 12 rows, 2 晚, 25 分钟; budget 600 元."
        facts = extract_facts([user(sentence)])
        assert texts(facts, "identifier") == ["600 元"]


def test_a_cue_file_is_one_expression_per_line() -> None:
    from agent_compression.cues import cue_lines, cue_pattern

    lines = cue_lines("constraint_en")
    assert lines and not any(line.startswith("#") for line in lines)
    assert cue_pattern("constraint_zh").search("先不要修改部署脚本") is not None
