from __future__ import annotations

import json

import pytest

from agent_compression.drift import DriftFinding, check_drift
from agent_compression.facts import extract_facts
from agent_compression.summarize import ExtractiveSummarizer
from agent_compression.types import SummaryRequest
from tests.samples import CODING, WECHAT, sample_messages

from .builders import assistant, user

ZH = [
    user("帮我看看部署流程。先不要修改部署脚本 deploy/prod.sh，等我确认。"),
    assistant("构建失败，怀疑缺少依赖 libfoo。"),
    user("我批准执行数据库迁移。"),
]
EN = [
    user("The nightly export job crashes. Find out why. Do not change anything under infra/terraform."),
    assistant("The build fails; I suspect a missing dependency in requirements.txt."),
    user("Approved: go ahead and run the migration on staging."),
]


def kinds(findings: list[DriftFinding]) -> list[str]:
    return [f.kind for f in findings]


def serious(findings: list[DriftFinding]) -> list[DriftFinding]:
    """Without the notes (low): a claim of progress these short histories do not show is one."""
    return [f for f in findings if f.severity != "low"]


class TestTrueDrift:
    def test_it_catches_an_inverted_chinese_constraint(self) -> None:
        findings = check_drift(
            ZH, "## Constraints and preferences\n- 用户要求修改部署脚本 deploy/prod.sh。\n- 用户已批准执行数据库迁移。"
        )
        assert kinds(findings) == ["constraint_inverted"]
        assert findings[0].severity == "high" and findings[0].source_index == 0
        assert findings[0].evidence == {
            "original": "先不要修改部署脚本 deploy/prod.sh，等我确认。",
            "summary": "用户要求修改部署脚本 deploy/prod.sh。",
        }

    def test_it_catches_an_inverted_english_constraint(self) -> None:
        findings = check_drift(
            EN, ("- The user asked to change infra/terraform.\n- Approved: run the migration on staging.")
        )
        assert kinds(findings) == ["constraint_inverted"]

    def test_it_judges_the_prose_even_when_pinned_facts_keep_the_constraint(self) -> None:
        summary = (
            "## Progress and next steps\n- 用户要求修改部署脚本 deploy/prod.sh。\n- 用户已批准执行数据库迁移。\n\n"
            "## Pinned facts\n- [constraint] (#0) 先不要修改部署脚本 deploy/prod.sh，等我确认。"
        )
        assert "constraint_inverted" in kinds(check_drift(ZH, summary))

    def test_it_catches_a_dropped_constraint(self) -> None:
        findings = check_drift(ZH, "## Progress\n- 用户已批准执行数据库迁移。查看了部署流程。")
        assert findings[0].kind == "constraint_dropped" and findings[0].severity == "high"
        assert "identifier_missing" in kinds(findings)

    def test_it_catches_a_lost_hedge(self) -> None:
        zh = check_drift(
            ZH, "- 构建失败：缺少依赖 libfoo。\n- 先不要修改部署脚本 deploy/prod.sh。\n- 我批准执行数据库迁移。"
        )
        en = check_drift(
            EN,
            "- The build fails because of a missing dependency in requirements.txt.\n"
            "- Do not change anything under infra/terraform.\n"
            "- Approved: go ahead and run the migration on staging.",
        )
        assert kinds(zh) == ["hedge_lost"] and kinds(en) == ["hedge_lost"]

    def test_it_catches_fabricated_constraints_and_identifiers(self) -> None:
        findings = check_drift(
            EN,
            "- Do not change anything under infra/terraform.\n"
            "- The user said never to restart the payment service.\n"
            "- Approved: go ahead and run the migration on staging.\n"
            "- Ticket OPS-991 touches src/payments/api.py",
        )
        assert kinds(findings) == ["constraint_fabricated", "identifier_fabricated", "identifier_fabricated"]
        zh = check_drift(
            ZH, "- 先不要修改部署脚本 deploy/prod.sh。\n- 用户禁止重启数据库服务器。\n- 我批准执行数据库迁移。"
        )
        assert kinds(zh) == ["constraint_fabricated"]

    def test_it_catches_a_fabricated_pinned_fact(self) -> None:
        summary = (
            "- 先不要修改部署脚本 deploy/prod.sh。\n- 我批准执行数据库迁移。\n\n"
            "## Pinned facts\n- [approval] (#9) 我批准删除生产数据。"
        )
        assert kinds(check_drift(ZH, summary)) == ["constraint_fabricated"]

    def test_it_catches_an_approval_turned_into_a_refusal(self) -> None:
        findings = check_drift(ZH, "- 先不要修改部署脚本 deploy/prod.sh。\n- 用户没有批准执行数据库迁移。")
        assert kinds(findings) == ["constraint_inverted"]

    def test_it_serializes_findings(self) -> None:
        (finding,) = check_drift(
            EN, ("- The user asked to change infra/terraform.\n- Approved: run the migration on staging.")
        )
        data = finding.to_dict()
        assert data["kind"] == "constraint_inverted" and data["evidence"]["summary"].startswith("The user asked")
        json.dumps(data)


class TestFaithfulSummaries:
    @pytest.mark.parametrize(
        "summary",
        [
            "## Constraints and preferences\n- 用户要求先不要修改部署脚本 deploy/prod.sh，等确认。\n"
            "- 用户已批准执行数据库迁移。\n## Errors\n- 构建失败，怀疑缺少依赖 libfoo。",
            "- 部署脚本 deploy/prod.sh 暂不修改，需等用户确认。\n- 数据库迁移已获用户批准。\n"
            "- 构建失败，可能缺少依赖 libfoo。",
            "- 先不要修改部署脚本 deploy/prod.sh，等我确认。\n- 我批准执行数据库迁移。",
        ],
    )
    def test_it_raises_no_alarm_on_faithful_chinese_summaries(self, summary: str) -> None:
        assert check_drift(ZH, summary) == []

    @pytest.mark.parametrize(
        "summary",
        [
            "- The user forbade changes under infra/terraform.\n"
            "- The user approved running the migration on staging.\n"
            "- Build fails; suspected missing dependency in requirements.txt.",
            "## Constraints\n- Do not change anything under infra/terraform.\n## Progress\n"
            "- Investigating why the nightly export job crashes; migration on staging approved.",
            "- infra/terraform must stay untouched.\n"
            "- Migration on staging: approved by the user.\n"
            "- Possibly a missing dependency in requirements.txt.",
        ],
    )
    def test_it_raises_no_alarm_on_faithful_english_summaries(self, summary: str) -> None:
        assert check_drift(EN, summary) == []

    def test_a_rendered_tool_call_restates_no_hedge(self) -> None:
        messages = [
            assistant(
                "It seems my `apply_fix.py` replaced lines but maybe messed up indentation or the original file had "
                "tabs/spaces mix?"
            ),
            call("c1", "bash", {"command": "rm reproduce_issue.py apply_fix.py\necho done"}),
            result("c1", "diff --git a/django/db/backends/mysql/operations.py\n+        except Exception:\n" * 40),
        ]
        line = (
            '- (#1) bash({"command": "rm reproduce_issue.py apply_fix.py\\necho done"}): + except Exception: (80 lines)'
        )
        assert [f for f in check_drift(messages, line) if f.kind == "hedge_lost"] == []
        settled = "- My apply_fix.py replaced lines and messed up indentation: the original file had a tabs/spaces mix."
        assert [f.code for f in check_drift(messages, settled) if f.kind == "hedge_lost"] == ["hedge_dropped"]

    def test_it_accepts_a_hedge_confirmed_later(self) -> None:
        messages = EN + [assistant("Confirmed: a missing dependency in requirements.txt breaks the build.")]
        summary = (
            "- Do not change anything under infra/terraform.\n"
            "- Approved: go ahead and run the migration on staging.\n"
            "- The build fails because of a missing dependency in requirements.txt."
        )
        assert check_drift(messages, summary) == []

    def test_a_line_quoted_whole_from_the_originals_loses_no_hedge(self) -> None:
        messages = [
            assistant("So maybe I didn't need to fix `dmp_sqf_part` if I fix `dmp_ext_factor`?"),
            assistant("Checked: AND fixing `dmp_sqf_part` was necessary because `dmp_ext_factor` calls it."),
            call("c1", "bash", {"command": "python3 reproduce_failure.py"}),
            result("c1", "Error: user-defined function raised exception"),
            assistant("The `user-defined function raised exception` is likely masking the real error."),
        ]
        quoted = (
            "- Finding (#1): AND fixing `dmp_sqf_part` was necessary because `dmp_ext_factor` calls it.\n"
            '- (#3) bash({"command": "python3 reproduce_failure.py"}): Error: user-defined function raised exception'
            " (41 lines)"
        )
        assert [f for f in check_drift(messages, quoted) if f.kind == "hedge_lost"] == []
        settled = "- The user-defined function raised exception is masking the real error."
        assert "hedge_lost" in [f.kind for f in check_drift(messages, settled)]

    def test_it_finds_nothing_in_extractive_summaries_of_the_samples(self) -> None:
        for messages in (sample_messages(CODING), sample_messages(WECHAT)):
            for start, end in ((1, len(messages) - 1), (3, len(messages) - 2), (2, 12)):
                segment = messages[start:end]
                request = SummaryRequest(segment, start, extract_facts(segment, start), max_tokens=600)
                text = ExtractiveSummarizer().summarize(request).text or ""
                # a line that quotes a message of the segment word for word is no drift (drift.py still notes
                # the assistant's last words, "最后状态 (#62): 第 12 项已处理", as unsupported progress: its
                # replacement checks claims against the messages)
                said = {m.get("content") for m in segment}
                findings = [f for f in check_drift(segment, text) if _quoted(f.evidence.get("summary", "")) not in said]
                assert findings == [], (start, end)

    def test_it_returns_nothing_for_an_empty_summary(self) -> None:
        assert check_drift(ZH, "") == []


def _quoted(line: str) -> str:
    """What a summary line ``最后状态 (#62): text`` quotes: the text after its ``(#N):`` label."""
    return line.split("): ", 1)[-1]


def test_an_object_said_intact_keeps_the_prohibition_on_changing_it() -> None:
    """A real 0.5B answer kept "don't cancel my return flight" as "the return HAT211 on May 22 is unchanged"."""
    messages = [
        user("NO6JO3, the Denver to Boston one. Don't cancel my return flight, I still need it."),
        assistant("I will only change the outbound flight of NO6JO3."),
    ]
    for kept in (
        "- NO6JO3 now departs May 17 on HAT136; the return HAT211 on May 22 is unchanged.",
        "- NO6JO3 now departs May 17 on HAT136; the return flight was not cancelled.",
    ):
        assert [f for f in check_drift(messages, kept) if f.code == "not_restated"] == [], kept
    dropped = check_drift(messages, "- NO6JO3 now departs May 17 on HAT136.")
    assert [(f.code, f.severity) for f in dropped] == [("not_restated", "high")]


class TestSummaryMessages:
    def test_it_reads_a_whole_summary_message(self) -> None:
        from agent_compression.summary_message import SummaryHeader, render_summary_message

        header = SummaryHeader("s1", "openai", "m", "t", (0, 3), None)
        message = render_summary_message(
            "## Constraints\n- 用户要求修改部署脚本 deploy/prod.sh。\n- 我批准执行数据库迁移。", header
        )
        assert kinds(check_drift(ZH, message["content"])) == ["constraint_inverted"]

    def test_it_uses_constraints_pinned_in_an_earlier_summary(self) -> None:
        from agent_compression.summary_message import SummaryHeader, render_summary_message

        header = SummaryHeader("s0", "extractive", None, "t", (0, 9), None)
        earlier = render_summary_message("## Pinned facts\n- [constraint] 先不要修改部署脚本。", header)
        messages = [earlier, user("继续检查日志。")]
        assert kinds(check_drift(messages, "- 用户要求修改部署脚本。")) == ["constraint_inverted"]
        assert check_drift(messages, "## Pinned facts\n- [constraint] 先不要修改部署脚本。") == []


class TestRequirements:
    MESSAGES = [user("Only use the staging cluster for load tests."), user("必须先备份数据库再迁移。")]

    def test_it_accepts_a_restated_requirement(self) -> None:
        summary = "- Load tests run only on the staging cluster.\n- 迁移前先备份数据库。"
        assert check_drift(self.MESSAGES, summary) == []

    def test_naming_the_scope_without_its_restriction_drops_it(self) -> None:
        summary = "- Load tests run on the staging cluster.\n- 迁移前先备份数据库。"
        found = check_drift(self.MESSAGES, summary)
        assert [(f.kind, f.code, f.severity) for f in found] == [
            ("constraint_dropped", "restriction_dropped", "medium")
        ]

    def test_it_catches_a_negated_requirement(self) -> None:
        summary = "- Load tests do not use the staging cluster.\n- 迁移前先备份数据库。"
        assert kinds(check_drift(self.MESSAGES, summary)) == ["constraint_inverted"]
        summary = "- Only use the staging cluster for load tests.\n- 不用备份数据库，直接迁移。"
        assert kinds(check_drift(self.MESSAGES, summary)) == ["constraint_inverted"]

    def test_it_catches_a_dropped_requirement(self) -> None:
        assert kinds(check_drift(self.MESSAGES, "- 迁移前先备份数据库。")) == ["constraint_dropped"]

    @pytest.mark.parametrize(
        "line",
        ["- Do not run the load tests on the staging cluster without permission.", "- 未经批准不要在预发集群跑压测。"],
    )
    def test_a_hold_until_someone_s_leave_negates_no_requirement(self, line: str) -> None:
        """A real 1.5B answer: "Do not run the migration on staging without permission." (the user had put the run on
        hold) is no negation of "staging only"."""
        found = check_drift([user("Only use the staging cluster for load tests.")], line)
        assert [f for f in found if f.kind == "constraint_inverted"] == []
        negated = "- Load tests do not use the staging cluster."
        assert kinds(check_drift([user("Only use the staging cluster for load tests.")], negated)) == [
            "constraint_inverted"
        ]


class TestContext:
    HISTORY = [
        {"role": "system", "content": "You are a coding agent."},
        user("The nightly export job crashes. Do not change anything under infra/terraform."),
        assistant("Looking at the logs."),
        user("Try a smaller batch."),
    ]

    def test_it_catches_an_inverted_constraint_from_the_head(self) -> None:
        segment = self.HISTORY[2:3]
        summary = "- The user asked to change infra/terraform.\n- Looking at the logs."
        assert check_drift(segment, summary) == []  # the segment alone does not hold the constraint
        findings = check_drift(segment, summary, context_messages=self.HISTORY)
        assert kinds(findings) == ["constraint_inverted"] and findings[0].source_index == 1

    def test_it_does_not_ask_the_summary_to_repeat_head_constraints(self) -> None:
        assert check_drift(self.HISTORY[2:3], "- Looking at the logs.", context_messages=self.HISTORY) == []


# A small corpus: faithful paraphrases (no finding expected) and true drifts (the kind expected).
FAITHFUL = [
    (
        [
            user("Please fix the flaky test in tests/test_api.py. Don't touch the CI config."),
            assistant("The test seems to fail because of a race in the fixture."),
        ],
        (
            "## Decisions\n"
            "- Fixing the flaky test in tests/test_api.py.\n"
            "## Constraints and preferences\n"
            "- Don't touch the CI config.\n"
            "## Errors\n"
            "- Flaky failure, possibly a race in the fixture (unconfirmed)."
        ),
    ),
    (
        [user("Never commit directly to main; open a PR instead."), assistant("I'll open PR-style branch feature/x.")],
        (
            "## Constraints and preferences\n"
            "- No direct commits to main; changes go through a PR.\n"
            "## Progress and next steps\n"
            "- Work continues on branch feature/x."
        ),
    ),
    (
        [
            user("You must not restart the database during business hours."),
            assistant("Understood, I'll schedule the restart for 22:00."),
        ],
        (
            "## Constraints and preferences\n"
            "- The database must not be restarted during business hours.\n"
            "## Progress and next steps\n"
            "- Restart scheduled for 22:00 (outside business hours)."
        ),
    ),
    (
        [
            user("Avoid adding new dependencies."),
            assistant("I used the standard library json module instead of orjson."),
        ],
        (
            "## Decisions\n"
            "- Used the standard library json module rather than adding orjson,"
            " since new dependencies are to be avoided.\n"
        ),
    ),
    (
        [user("别动生产环境的配置，先在测试环境验证。"), assistant("好的，我先在测试环境验证。")],
        "## 约束\n- 不要改动生产环境配置，先在测试环境验证。\n## 进展\n- 正在测试环境验证。",
    ),
    (
        [user("禁止删除任何日志文件。"), assistant("日志目录占用 40GB，可能需要清理。")],
        (
            "## Constraints and preferences\n"
            "- 用户禁止删除任何日志文件。\n"
            "## Key tool results\n"
            "- 日志目录占用 40GB，可能需要清理（未执行，受约束限制）。"
        ),
    ),
    (
        [user("先不要发布新版本，等QA确认。"), assistant("构建已完成，版本 v2.3.0 待发布。")],
        "## 约束与偏好\n- 暂不发布新版本，需等待 QA 确认。\n## 进展\n- 构建完成，v2.3.0 待发布，等待 QA。",
    ),
    (
        [user("Don't deploy on Friday."), assistant("Deployment is planned for Monday.")],
        "- Deployment planned for Monday; the user does not want deploys on Friday.",
    ),
    (
        [user("I approve the schema migration for staging."), assistant("Running the migration on staging now.")],
        (
            "## Constraints and preferences\n"
            "- Approval: schema migration on staging approved by the user.\n"
            "## Progress\n"
            "- Migration on staging is running."
        ),
    ),
    (
        [user("只能修改 src/ 目录下的文件。"), assistant("已修改 src/app.py。")],
        "## 约束\n- 只允许修改 src/ 目录下的文件。\n## 进展\n- 已修改 src/app.py。",
    ),
    (
        [
            user("Do not delete the old tables yet."),
            assistant("The old tables are still referenced by the reporting job."),
        ],
        (
            "## Constraints\n"
            "- Keep the old tables for now (do not delete yet).\n"
            "## Key tool results\n"
            "- The old tables are still referenced by the reporting job."
        ),
    ),
    (
        [user("千万不要在周末重启网关。"), assistant("网关重启安排在周一早上。")],
        "- 约束：周末不重启网关。\n- 网关重启安排在周一早上。",
    ),
]

DRIFTED = [
    (
        [user("Please fix the flaky test. Don't touch the CI config.")],
        "- The user asked to touch the CI config.",
        "constraint_inverted",
    ),
    ([user("Never commit directly to main; open a PR instead.")], "- Commit directly to main.", "constraint_inverted"),
    (
        [user("You must not restart the database during business hours.")],
        "- Restart the database during business hours.",
        "constraint_inverted",
    ),
    ([user("Avoid adding new dependencies.")], "- The user wants new dependencies added.", "constraint_inverted"),
    ([user("别动生产环境的配置，先在测试环境验证。")], "- 用户要求修改生产环境的配置。", "constraint_inverted"),
    ([user("禁止删除任何日志文件。")], "- 需要删除日志文件。", "constraint_inverted"),
    ([user("先不要发布新版本，等QA确认。")], "- 用户要求发布新版本。", "constraint_inverted"),
    ([user("Don't deploy on Friday.")], "- Deploy on Friday as requested.", "constraint_inverted"),
    ([user("Don't deploy on Friday.")], "- Work continues on the release notes.", "constraint_dropped"),
    ([user("千万不要在周末重启网关。")], "- 网关将在周末重启。", "constraint_inverted"),
    ([user("Do not delete the old tables yet.")], "- The old tables were deleted.", "constraint_inverted"),
    ([user("不许删除日志。")], "- 日志已删除。", "constraint_inverted"),
    (
        [assistant("The outage was probably caused by the cache.")],
        "- The outage was caused by the cache.",
        "hedge_lost",
    ),
    ([assistant("疑似内存泄漏导致进程崩溃。")], "- 内存泄漏导致进程崩溃。", "hedge_lost"),
    # reworded while the hedge went: "I suspect X caused it" -> "the cause is X"
    ([assistant("我怀疑是缺少依赖导致的 requirements.txt。")], "- 原因是缺少依赖 requirements.txt。", "hedge_lost"),
]


class TestCorpus:
    @pytest.mark.parametrize(("messages", "summary"), FAITHFUL)
    def test_it_stays_quiet_on_faithful_paraphrases(self, messages: list[dict], summary: str) -> None:
        assert check_drift(messages, summary) == []

    @pytest.mark.parametrize(("messages", "summary", "kind"), DRIFTED)
    def test_it_catches_each_drift(self, messages: list[dict], summary: str, kind: str) -> None:
        assert kind in kinds(check_drift(messages, summary))


class TestParaphrasesAndScope:
    """Regressions found with bench/data/drift_pairs.jsonl: each names the general rule that was missing."""

    def test_it_reads_synonyms_as_the_same_action(self) -> None:
        logs = [user("清理一下磁盘。/var/log/audit 下面的文件一个都不许删。")]
        assert "constraint_inverted" in kinds(check_drift(logs, "- 清理了 /var/log/audit 里的旧审计日志。"))
        assert check_drift(logs, "- /var/log/audit 里的文件一律不能删除。") == []
        reply = [user("回复工单，不要承诺具体的退款日期。")]
        assert check_drift(reply, "- 回复中不给出具体退款时间。") == []

    def test_advising_against_an_action_keeps_its_prohibition(self) -> None:
        """A real 1.5B answer: "The user has advised against restarting the report-worker during business hours"
        for "Don't restart report-worker during business hours" (and "against production" is no negation)."""
        rule = [user("Don't restart report-worker during business hours, finance runs their closing reports.")]
        kept = "- The user has advised against restarting the report-worker during business hours."
        assert serious(check_drift(rule, kept)) == []
        inverted = "- The user wants the report-worker restarted during business hours, against the finance reports."
        assert "constraint_inverted" in kinds(check_drift(rule, inverted))

    def test_it_judges_negation_per_clause(self) -> None:
        messages = [user("Only update imports inside src/."), user("Leave notebooks/ alone.")]
        inverted = "- Imports were updated in src/ and in notebooks/ as well, so nothing refers to the old name."
        assert "constraint_inverted" in kinds(check_drift(messages, inverted))
        faithful = "- Imports updated in src/ only; notebooks/ deliberately left as they are."
        assert serious(check_drift(messages, faithful)) == []

    def test_it_reads_a_short_approval_with_the_proposal_it_answers(self) -> None:
        messages = [
            user("Book me a train to Beijing on June 14."),
            assistant("G2 has second-class seats at 662 CNY. Shall I book it?"),
            user("Yes, go ahead."),
        ]
        assert check_drift(messages, "- Booked G2 second class (662 CNY) after the user's OK.") == []
        refused = check_drift(messages, "- G2 second class is 662 CNY; the user has not confirmed the booking yet.")
        assert kinds(refused) == ["constraint_inverted"]
        zh = [assistant("G2 二等座还有票，662 元。要帮你订吗？"), user("订吧。")]
        assert kinds(check_drift(zh, "- G2 二等座 662 元，用户还没确认要不要订。")) == ["constraint_inverted"]

    def test_it_catches_a_number_past_a_limit(self) -> None:
        replicas = [user("可以重启 pod，但副本数任何时候都不能低于 3 个。")]
        assert kinds(check_drift(replicas, "- 可以重启 pod，副本数临时降到了 2 个。")) == ["constraint_inverted"]
        assert check_drift(replicas, "- 允许重启 pod；副本数始终不少于 3 个。") == []
        ttl = [user("Point api.example.com at the new balancer. Keep the TTL at 300.")]
        assert "constraint_inverted" in kinds(check_drift(ttl, "- api.example.com moved; TTL lowered to 60."))

    def test_it_catches_an_action_inside_a_forbidden_window(self) -> None:
        messages = [user("Never run the migration during peak hours (11:00-14:00 UTC).")]
        summary = "- The migration was run at 12:40 UTC."
        assert "constraint_inverted" in kinds(check_drift(messages, summary))
        assert check_drift(messages, "- The migration waits until 14:00 UTC, outside peak hours.") == []

    def test_it_does_not_take_descriptions_or_questions_for_constraints(self) -> None:
        messages = [
            user("The worker crashes with ECONNRESET, always inside upload_chunk() in workers/uploader.py."),
            user("你先在本地加 --legacy-peer-deps 试试，看能不能构建过。"),
            user("把 k8s/search/deployment.yaml 里的内存上限调到 1Gi。"),
        ]
        summary = (
            "- ECONNRESET in upload_chunk() (workers/uploader.py).\n- 本地加 --legacy-peer-deps 后构建通过。\n"
            "- k8s/search/deployment.yaml 的内存上限已改为 1Gi。"
        )
        assert serious(check_drift(messages, summary)) == []

    def test_it_does_not_count_a_status_word_in_a_request_as_a_hedge(self) -> None:
        messages = [
            user("只同步手机号已验证的，未验证的一律跳过。"),
            assistant("同步完成：1,099 条成功，182 条未验证的已跳过。"),
        ]
        assert check_drift(messages, "- 已验证的 1,099 条线索已同步；182 条未验证的按要求跳过，没有同步。") == []
        widened = "- 1,099 条已同步，182 条未验证的线索也一并同步了。"
        assert "constraint_inverted" in kinds(check_drift(messages, widened))

    def test_it_finds_missing_function_names_error_codes_and_numbers(self) -> None:
        messages = [user("Uploads fail with ECONNRESET inside upload_chunk(). Lower the chunk size to 16MB.")]
        findings = check_drift(messages, "- Uploads dropped connections; chunk size lowered.")
        assert {f.evidence["original"] for f in findings if f.kind == "identifier_missing"} == {
            "ECONNRESET",
            "upload_chunk()",
            "16MB",
        }
        assert check_drift(messages, "- ECONNRESET in upload_chunk(); chunk size lowered to 16 MB.") == []

    def test_it_flags_a_number_in_a_limit_that_nobody_gave(self) -> None:
        messages = [user("订西湖边的酒店，每晚不超过 800 元。")]
        findings = check_drift(messages, "- 每晚预算不超过 1000 元。")
        assert ("identifier_fabricated", "medium") in {(f.kind, f.severity) for f in findings}
        assert "identifier_missing" in kinds(findings)


def test_every_warning_code_and_detail_code_is_listed():
    """The console translates warnings and finding details by code: every code the library writes is listed."""
    import re
    from pathlib import Path

    import agent_compression.drift as drift
    import agent_compression.drift.legacy as legacy
    import agent_compression.pipeline as pipeline

    written = set(re.findall(r'CompressionWarning\(\s*"(\w+)"', Path(pipeline.__file__).read_text()))
    assert written == set(pipeline.WARNING_CODES)
    source = Path(legacy.__file__).read_text()
    checks = source[source.index("# ---------------------------------------------------------------- checks") :]
    quoted = set(re.findall(r'"([a-z]+(?:_[a-z]+)+)"', checks))
    codes = quoted - set(drift.DRIFT_KINDS) - {"segment", "context"}
    assert codes <= set(drift.REASONS), codes - set(drift.REASONS)
    assert set(drift.REASONS) <= quoted, set(drift.REASONS) - quoted


# ---------------------------------------------------------------- rules from real model output (issue 17)

OPS_ZH = [
    user("今天要把 order-service 3.2.0 发到预发环境，里面带了迁移 0057_split_orders。变更单 CHG-8812。"),
    user("注意：先不要执行生产环境的迁移，今天只动预发。健康检查失败的话最多重试三次，然后停下来告诉我。"),
    assistant("明白：只动预发，健康检查最多重试三次。"),
    user("redis 的卷别动，存储组在查。不要删 PVC，里面有别的服务的数据。"),
]
CODING_EN = [
    user("Please refactor build_rows in export/invoice_writer.py. Ticket is INV-20931."),
    user("And don't modify deploy.sh yet, I'm still talking to ops about the rollout."),
    assistant("Understood, deploy.sh stays as it is."),
]
OPS_EN_KEPT = (
    "- Deploy order-service 3.2.0 to staging with migration 0057_split_orders (CHG-8812).\n"
    "- Do not run the production migration yet; only touch staging.\n"
    "- If the health check fails, retry at most 3 times, then stop and report.\n"
    "- Don't touch the redis volume; do not delete the PVC."
)


class TestAcrossLanguages:
    def test_a_chinese_constraint_restated_in_english_is_kept(self) -> None:
        assert check_drift(OPS_ZH, OPS_EN_KEPT) == []

    def test_an_english_constraint_restated_in_chinese_is_kept(self) -> None:
        summary = (
            "- 用户要求重构 export/invoice_writer.py 里的 build_rows，工单 INV-20931。\n"
            "- 先不要修改 deploy.sh，用户还在和运维沟通发布。"
        )
        assert check_drift(CODING_EN, summary) == []

    def test_a_chinese_constraint_inverted_in_english_is_caught(self) -> None:
        summary = OPS_EN_KEPT.replace(
            "Do not run the production migration yet; only touch staging.", "Run the production migration next."
        )
        findings = check_drift(OPS_ZH, summary)
        # "only touch staging" went with it: "deploy ... to staging" names the scope, not the restriction
        assert [(f.kind, f.code) for f in findings] == [
            ("constraint_inverted", "negation_missing"),
            ("constraint_dropped", "restriction_dropped"),
        ]
        assert findings[0].evidence["original"].startswith("注意：先不要执行生产环境的迁移")
        assert findings[1].evidence["original"] == "只动预发"

    def test_an_english_constraint_inverted_in_chinese_is_caught(self) -> None:
        summary = "- 重构 export/invoice_writer.py 的 build_rows（INV-20931）。\n- 下一步：修改 deploy.sh。"
        assert kinds(check_drift(CODING_EN, summary)) == ["constraint_inverted"]

    def test_a_chinese_constraint_dropped_from_an_english_summary_is_caught(self) -> None:
        summary = OPS_EN_KEPT.replace("- Don't touch the redis volume; do not delete the PVC.", "")
        found = check_drift(OPS_ZH, summary)
        assert [(f.kind, f.source_index) for f in found] == [("constraint_dropped", 3)] * 2


class TestSoftInversions:
    def test_when_ready_for_not_yet_is_an_inversion(self) -> None:
        summary = (
            "- Refactor build_rows in export/invoice_writer.py (INV-20931).\n- Update the deployment script when ready."
        )
        findings = check_drift(CODING_EN, summary)
        assert kinds(findings) == ["constraint_inverted"] and findings[0].code == "soft_inversion"

    @pytest.mark.parametrize("line", ["- 准备好后修改部署脚本 deploy.sh。", "- 稍后修改 deploy.sh。"])
    def test_in_chinese_too(self, line: str) -> None:
        messages = [user("先不要修改部署脚本 deploy.sh，我还在和运维沟通。")]
        findings = check_drift(messages, line)
        assert kinds(findings) == ["constraint_inverted"] and findings[0].code == "soft_inversion"

    @pytest.mark.parametrize(
        "line",
        [
            "- Do not modify deploy.sh until ops confirms the rollout.",
            "- deploy.sh: leave it alone for now (the user is talking to ops).",
            "- 部署脚本 deploy.sh 暂时不要修改，等用户和运维确认。",
        ],
    )
    def test_a_kept_not_yet_is_no_inversion(self, line: str) -> None:
        assert check_drift(CODING_EN[1:], line) == []


def call(call_id: str, name: str, arguments: dict) -> dict:
    return {
        "role": "assistant",
        "content": None,
        "tool_calls": [
            {"id": call_id, "type": "function", "function": {"name": name, "arguments": json.dumps(arguments)}}
        ],
    }


def result(call_id: str, text: str) -> dict:
    return {"role": "tool", "tool_call_id": call_id, "content": text}


def ran(ask: str, cmd: str, output: str) -> list[dict]:
    """A user's ask, the terminal command the agent ran for it, and what it printed."""
    return [user(ask), call("t1", "terminal", {"cmd": cmd}), result("t1", output)]


MIGRATION_ZH = [
    user("我批准在预发环境执行迁移 0057_split_orders。"),
    call("c1", "terminal", {"cmd": "kubectl -n staging exec deploy/order-service -- ./migrate 0057_split_orders"}),
    result("c1", "redis.exceptions.ConnectionError: Error 111 connecting to 10.0.3.17:6379. Connection refused."),
    assistant("迁移没有执行：迁移脚本要先在 Redis 上拿锁，连接 10.0.3.17:6379 被拒绝。"),
]
TESTS_EN = [
    user("Run `pytest tests/export -q` after every change."),
    call("c1", "write_file", {"path": "export/invoice_writer.py", "content": "def apply_rates(row): ..."}),
    result("c1", "wrote 60 lines to export/invoice_writer.py"),
    call("c2", "terminal", {"cmd": "pytest tests/export -q"}),
    result("c2", "FAILED tests/export/test_money.py::test_eur_separator\n1 failed, 48 passed in 2.10s"),
    assistant("48 of 49 pass; the EUR separator test still fails."),
]


class TestProgressClaims:
    def test_an_approved_migration_claimed_as_executed(self) -> None:
        for line in (
            "- The database migration 0057_split_orders has been executed.",
            "- 迁移 0057_split_orders 已执行。",
        ):
            findings = [f for f in check_drift(MIGRATION_ZH, line) if f.kind != "identifier_missing"]
            assert kinds(findings) == ["progress_fabricated"], line
            assert findings[0].code == "progress_contradicted" and findings[0].severity == "high"
            assert findings[0].source_index == 3

    def test_a_tool_result_copied_after_its_call_claims_nothing(self) -> None:
        """The extractive summary of the Chinese demo session quotes what the tool printed:
        "(#41) send_message({…}): 消息已发送给 小王（微信） (1 行)". An invented result after a real call is still a
        claim nothing shows."""
        messages = [
            user("帮我通知小王，周二的周会改到周五上午。"),
            call("c1", "send_message", {"to": "小王", "text": "周二的周会改到周五上午"}),
            result("c1", "消息已发送给 小王（微信）"),
        ]
        args = '{"to": "小王", "text": "周二的周会改到周五上午"}'
        copied = f"- (#1) send_message({args}): 消息已发送给 小王（微信） (1 行)"
        assert [f for f in check_drift(messages, copied) if f.kind == "progress_fabricated"] == []
        invented = f"- (#1) send_message({args}): 消息已发送给 小李（微信），小李已确认 (1 行)"
        assert [f.code for f in check_drift(messages, invented) if f.kind == "progress_fabricated"] == [
            "progress_unsupported"
        ]

    @pytest.mark.parametrize(
        "line",
        [
            "- The migration was successful and no errors were encountered.",
            "- There were no errors during the migration process, as the script ran without any issues.",
            "- 迁移过程中没有任何报错。",
        ],
    )
    def test_no_errors_claimed_after_a_tool_reported_one(self, line: str) -> None:
        """Real 0.5B answers (bench/data/model_runs, dev): the migration log said LockNotAvailable."""
        findings = [f for f in check_drift(MIGRATION_ZH, line) if f.code == "errors_denied"]
        assert [(f.kind, f.severity, f.source_index) for f in findings] == [("progress_fabricated", "medium", 2)]
        assert findings[0].evidence["original"].startswith("redis.exceptions.ConnectionError")

    @pytest.mark.parametrize(
        "line",
        [
            "- After the fix, the tests now run without errors.",  # a later run: the earlier error may stand
            "- 修复后重新运行，没有报错。",
            "- The migration may have run without errors; not confirmed.",  # hedged
            "- If there are no errors, deploy next.",  # a condition
            "- No error reported for other flights.",  # the rest: the one error stands apart
        ],
    )
    def test_no_errors_narrowed_hedged_or_conditional_is_no_claim(self, line: str) -> None:
        assert [f for f in check_drift(MIGRATION_ZH, line) if f.code == "errors_denied"] == []

    def test_no_errors_with_no_error_in_the_archive_is_no_finding(self) -> None:
        clean = [*MIGRATION_ZH[:2], result("c1", "migration 0057_split_orders applied (12 rows)")]
        assert [f for f in check_drift(clean, "- No errors were encountered.") if f.code == "errors_denied"] == []

    def test_the_next_step_the_agent_announced_claimed_as_done(self) -> None:
        """A real 1.5B answer: "The agent had split the sorting out of `group_by_customer`." when the agent's last
        word on it was "I'll split the sorting out of it next" (after the write that put the function in the file)."""
        messages = [
            call(
                "c1", "write_file", {"path": "export/invoice_writer.py", "content": "def group_by_customer(rows): ..."}
            ),
            result("c1", "wrote 90 lines to export/invoice_writer.py"),
            assistant("group_by_customer is 44 lines, over the 40-line limit. I'll split the sorting out of it next."),
            user("Sounds good. Don't commit yet, I want to look at the diff first."),
        ]
        line = "- The agent had split the sorting out of `group_by_customer`."
        found = [f for f in check_drift(messages, line) if f.kind == "progress_fabricated"]
        assert [(f.code, f.source_index) for f in found] == [("progress_contradicted", 2)]
        # announced with the call that does it, or as an attempt: no evidence against the claim
        doing = {
            **messages[2],
            "tool_calls": [{"id": "c2", "type": "function", "function": {"name": "edit_file", "arguments": "{}"}}],
        }
        for said in (doing, assistant("group_by_customer is 44 lines. I'll try to split the sorting out of it.")):
            found = [
                f for f in check_drift([*messages[:2], said, messages[3]], line) if f.code == "progress_contradicted"
            ]
            assert found == [], said

    def test_a_failure_that_kept_it_from_being_done_claims_nothing(self) -> None:
        """A real 1.5B answer: "The migration failed with a lock timeout, preventing it from being applied." """
        line = "- The migration failed with a lock timeout, preventing it from being applied."
        assert [f for f in check_drift(MIGRATION_ZH, line) if f.kind == "progress_fabricated"] == []

    @pytest.mark.parametrize("line", ["- Tests passed, exit code 0.", "- 测试全部通过。"])
    def test_tests_claimed_passed_after_a_failing_run(self, line: str) -> None:
        summary = (
            "- Run `pytest tests/export -q` after every change.\n- apply_rates extracted in export/invoice_writer.py.\n"
        )
        findings = check_drift(TESTS_EN, summary + line)
        assert [(f.kind, f.code) for f in findings] == [("progress_fabricated", "tests_not_passed")]

    @pytest.mark.parametrize("line", ["- No further action is required at this time.", "- 无需进一步操作。"])
    def test_work_claimed_finished_after_a_failure_is_noted(self, line: str) -> None:
        messages = [
            user("Run the migration 0042_add_index on staging."),
            assistant("The migration failed with a lock timeout; nothing was applied."),
        ]
        findings = check_drift(messages, "- The migration 0042_add_index failed on staging.\n" + line)
        assert [(f.kind, f.code) for f in findings] == [("progress_fabricated", "progress_unsupported")]
        assert findings[0].evidence["summary"] == line[2:]
        done = [*messages[:1], assistant("Done: 0042_add_index was applied on staging, the work is complete.")]
        assert check_drift(done, "- 0042_add_index was applied on staging.\n" + line) == []

    def test_a_run_that_exits_0_is_no_failure_of_the_file_it_runs(self) -> None:
        output = (
            "<returncode>0</returncode>\n<output>\nCaught ValidationError: price\nSUCCESS: expected error\n</output>"
        )
        messages = [
            user("Make the validation error code customizable."),
            call("c1", "write_file", {"path": "reproduce_issue.py", "content": "print('x')"}),
            result("c1", "ok"),
            call("c2", "terminal", {"cmd": "python reproduce_issue.py"}),
            result("c2", output),
        ]
        assert serious(check_drift(messages, "- reproduce_issue.py: edited.")) == []
        # a run of a file the agent wrote that raises says nothing against the write
        raised = "<returncode>1</returncode>\n<output>\nTraceback (most recent call last):\nValueError: x\n</output>"
        assert serious(check_drift([*messages[:4], result("c2", raised)], "- reproduce_issue.py: edited.")) == []

    def test_an_error_in_the_output_of_a_call_on_a_file_is_placed_there(self) -> None:
        messages = [
            user("Find where the violation error is raised."),
            call("c1", "bash", {"command": "sed -n '160,180p' django/db/models/constraints.py"}),
            result(
                "c1", "    def validate(self):\n        if not ok:\n            raise ValueError(\n                msg)"
            ),
        ]
        line = "- sed on django/db/models/constraints.py: raise ValueError( (24 lines)"
        assert [f for f in check_drift(messages, line) if f.kind == "wrong_attribution"] == []

    def test_an_error_is_placed_within_its_own_sentence(self) -> None:
        messages = [
            user("The last command <command>pylint .</command> timed out and has been killed."),
            call("c1", "terminal", {"cmd": "pylint reproduce_issue.py"}),
            result("c1", "reproduce_issue.py:15:11: W0703: Catching too general exception Exception"),
        ]
        line = "- The last command pylint timed out and has been killed. The output of the command: reproduce_issue.py"
        assert [f for f in check_drift(messages, line) if f.kind == "wrong_attribution"] == []

    def test_a_run_that_succeeded_after_a_failure_was_run(self) -> None:
        messages = [
            user("Yes, I approve running 0042_add_index on staging."),
            call("c1", "terminal", {"cmd": "./scripts/migrate.sh staging 0042_add_index"}),
            result("c1", "ERROR migrate migration 0042_add_index failed; nothing applied"),
            assistant("The migration 0042_add_index failed with a lock timeout; nothing was applied."),
            call("c2", "terminal", {"cmd": "./scripts/migrate.sh staging 0042_add_index"}),
            result("c2", "INFO migrate applied 0042_add_index in 2.1s"),
        ]
        claims = "- Migration 0042_add_index has been executed on staging.\n- 迁移 0042_add_index 已在预发执行。"
        assert [f for f in check_drift(messages, claims) if f.kind == "progress_fabricated"] == []
        # before the second run the failure stands; reading the file runs nothing
        assert "progress_contradicted" in [f.code for f in check_drift(messages[:4], claims)]
        read = [messages[0], call("c3", "terminal", {"cmd": "cat migrations/0042_add_index.sql"}), result("c3", "ok")]
        assert {f.severity for f in check_drift(read, claims) if f.kind == "progress_fabricated"} == {"low"}

    def test_an_edit_done_wrongly_was_still_done(self) -> None:
        messages = [
            call("c1", "write_file", {"path": "apply_fix.py", "content": "x = 1"}),
            result("c1", "ok"),
            assistant("So the issue was that I failed to update the signature correctly in `apply_fix.py`."),
        ]
        found = check_drift(messages, "- apply_fix.py: edited (#0)")
        assert "progress_contradicted" not in [f.code for f in found]

    def test_a_tool_s_own_line_is_a_quote_not_a_claim(self) -> None:
        messages = [
            user("Run the script and confirm it fails as expected."),
            call("c1", "terminal", {"cmd": "python reproduce.py"}),
            result("c1", "Assertion failed: 1 != 0 : 1 queries executed, 0 expected\nCaptured queries were:"),
        ]
        found = check_drift(messages, "- = 0 : 1 queries executed, 0 expected (23 lines)")
        assert [f for f in found if f.kind == "progress_fabricated"] == []

    def test_what_the_agent_sets_out_to_do_does_not_unwrite_a_file(self) -> None:
        messages = [
            call("c1", "write_file", {"path": "debug_sqlite_file.py", "content": "print(1)"}),
            result("c1", "ok"),
            assistant("I'll try to modify debug_sqlite_file.py to print to the file directly without the trace."),
        ]
        found = check_drift(messages, "- debug_sqlite_file.py: edited (#0)")
        assert "progress_contradicted" not in [f.code for f in found]

    def test_tests_claimed_passed_with_no_run(self) -> None:
        findings = check_drift([user("Split build_rows into smaller functions.")], "- All tests pass.")
        assert [(f.kind, f.code, f.severity) for f in findings] == [
            ("progress_fabricated", "tests_never_run", "medium")
        ]

    def test_a_limit_claimed_met_that_the_assistant_says_is_not(self) -> None:
        messages = [
            user("Keep each function ≤ 40 lines."),
            assistant("group_by_customer is 44 lines, over the 40-line limit. I'll split it next."),
        ]
        findings = check_drift(messages, "- Keep each function ≤ 40 lines.\n- Each function is now ≤ 40 lines.")
        assert [(f.kind, f.code) for f in findings] == [("progress_fabricated", "progress_contradicted")]

    @pytest.mark.parametrize(
        "summary",
        [
            "- 迁移 0057_split_orders 已获批准，但没有执行：连接 Redis 10.0.3.17:6379 被拒绝。",
            "- Migration 0057_split_orders was approved but not executed: Redis 10.0.3.17:6379 refused connections.",
        ],
    )
    def test_a_faithful_status_is_no_claim(self, summary: str) -> None:
        assert serious(check_drift(MIGRATION_ZH, summary)) == []

    @pytest.mark.parametrize(
        "summary",
        [
            "apply_rates extracted in export/invoice_writer.py; 48 passed, the EUR separator test still fails.",
            "export/invoice_writer.py 已修改（拆出 apply_rates）；48 个通过，EUR 分隔符的测试仍然失败。",
        ],
    )
    def test_a_claim_the_tool_results_support_is_quiet(self, summary: str) -> None:
        assert check_drift(TESTS_EN, "- Run `pytest tests/export -q` after every change.\n- " + summary) == []


class TestStandingInstructions:
    def test_a_number_in_the_reason_for_a_hold_is_no_limit(self) -> None:
        """A real 1.5B answer kept "Hold on with the real run, let me ask finance first whether they can pause
        reports for 10 minutes" as "hold on with the real run while waiting for finance's approval"."""
        hold = "Hold on with the real run, let me ask finance first whether they can pause reports for 10 minutes."
        messages = [user(hold)]
        kept = "- The user instructed to hold on with the real run while waiting for finance's approval."
        assert [f.code for f in check_drift(messages, kept) if f.severity != "low"] == []
        assert "not_restated" in [f.code for f in check_drift(messages, "- The dry run looked right.")]
        # a number in the clause that sets the limit is still the limit's
        limit = [user("Run pytest after every change, at most 3 retries.")]
        assert "limit_dropped" in [f.code for f in check_drift(limit, "- Run pytest after every change.")]

    RULES_EN = [user("Run `pytest tests/export -q` after every change. Keep each function ≤ 40 lines.")]
    RULES_ZH = [user("每次改完都跑一下 `pytest tests/billing -q`，把结果贴给我。健康检查失败的话最多重试三次。")]

    def test_a_dropped_test_command_is_caught(self) -> None:
        for messages, summary in (
            (self.RULES_EN, "- Run the tests after each change.\n- Keep each function ≤ 40 lines."),
            (self.RULES_ZH, "- 每次修改后都要跑测试。\n- 健康检查最多重试 3 次。"),
        ):
            found = [(f.kind, f.code) for f in check_drift(messages, summary)]
            assert found == [("constraint_dropped", "command_dropped")], summary

    def test_a_dropped_limit_is_caught_in_both_languages(self) -> None:
        en = check_drift(self.RULES_EN, "- Run `pytest tests/export -q` after every change.\n- Keep functions short.")
        zh = check_drift(self.RULES_ZH, "- 每次改完都跑 `pytest tests/billing -q`。\n- 健康检查失败要重试。")
        assert [(f.kind, f.code) for f in en] == [("constraint_dropped", "limit_dropped")]
        assert [(f.kind, f.code) for f in zh] == [("constraint_dropped", "limit_dropped")]

    @pytest.mark.parametrize(
        ("messages", "summary"),
        [
            (RULES_EN, "- After every change: `pytest tests/export -q`.\n- Functions stay at or under 40 lines."),
            (RULES_ZH, "- After each change run `pytest tests/billing -q`.\n- Retry at most 3 times."),
            (RULES_EN, "- 每次修改后运行 pytest tests/export -q。\n- 每个函数不超过 40 行。"),
        ],
    )
    def test_kept_instructions_are_quiet(self, messages: list[dict], summary: str) -> None:
        assert check_drift(messages, summary) == []

    def test_the_harness_rules_are_no_user_constraint(self) -> None:
        messages = [
            user("Every response MUST include at least one tool call or a message to the user."),
            user("Don't cancel my return flight."),
        ]
        summary = "- The agent replied to the user without a tool call.\n- Do not cancel the return flight."
        assert check_drift(messages, summary) == []

    def test_rules_on_the_format_of_a_response_are_the_harness_s(self) -> None:
        messages = [
            user(
                "- If you include zero or multiple bash blocks, or no command at all, YOUR RESPONSE WILL FAIL\n"
                "- Do NOT try to run multiple independent commands in separate blocks in one response"
            ),
            assistant("The last command timed out and has been killed."),
        ]
        summary = "- Next: I will combine the commands.\n- The last command timed out and has been killed."
        assert check_drift(messages, summary) == []


class TestToolOutputAndShortIds:
    MESSAGES = [
        user("Hi, my user id is sofia_kim_7287. Please change reservation NO6JO3."),
        call("c1", "terminal", {"cmd": "pytest tests/export -q"}),
        result("c1", "E       KeyError: 'currency_code'\nFAILED tests/export/test_currency.py::case_3\n1 failed"),
        assistant("The passenger record of K1NW8N lists Ivan D-0."),
    ]

    def test_a_tool_error_is_kept_by_its_own_exception_and_all_its_ids(self) -> None:
        messages = [
            call("c1", "terminal", {"cmd": "pytest tests/export -q"}),
            result("c1", "E   TypeError: group_by_customer() missing 1 required positional argument: 'ctx'\n1 failed"),
            call("c2", "return_delivered_order_items", {"order_id": "#W5823417", "item_ids": ["8823019934"]}),
            result("c2", "Error: item 8823019934 not found in order #W5823417"),
        ]

        def missing(summary: str) -> list[str]:
            found = check_drift(messages, summary)
            return [f.evidence["original"][:20] for f in found if f.code == "tool_error_missing"]

        # another exception on the same function, and the order without the item, keep neither error
        assert missing("- An AssertionError in `group_by_customer`.\n- Return on #W5823417 failed.") == [
            "E   TypeError: group",
            "Error: item 88230199",
        ]
        kept = "- TypeError in group_by_customer (no ctx).\n- Item 8823019934 not found in order #W5823417."
        assert missing(kept) == []
        assert missing("- group_by_customer was called without ctx.\n- 8823019934 is not in #W5823417.") == []

    def test_an_error_only_in_tool_output_is_checked(self) -> None:
        found = check_drift(self.MESSAGES, "- sofia_kim_7287 wants NO6JO3 changed; K1NW8N lists Ivan D-0.")
        assert [(f.kind, f.code, f.source_index) for f in found] == [("identifier_missing", "tool_error_missing", 2)]

    @pytest.mark.parametrize(
        "summary",
        [
            "- sofia_kim_7287 wants NO6JO3 changed; K1NW8N lists Ivan D-0.\n- KeyError 'currency_code' in the tests.",
            "- 用户 sofia_kim_7287 要改 NO6JO3；K1NW8N 的乘客是 Ivan D-0。\n- 测试报 KeyError（currency_code）。",
        ],
    )
    def test_an_error_kept_by_its_name_is_quiet(self, summary: str) -> None:
        assert check_drift(self.MESSAGES, summary) == []

    def test_short_and_user_ids_are_identifiers(self) -> None:
        found = check_drift(self.MESSAGES, "- The user wants a reservation changed.\n- KeyError: 'currency_code'.")
        missing = {f.evidence["original"] for f in found if f.kind == "identifier_missing"}
        assert missing == {"sofia_kim_7287", "NO6JO3", "K1NW8N", "D-0"}

    def test_a_chinese_restatement_of_a_tool_error_is_kept(self) -> None:
        messages = [
            call("c1", "terminal", {"cmd": "./migrate 0057_split_orders"}),
            result("c1", "redis.exceptions.ConnectionError: Error 111 connecting to 10.0.3.17:6379. Refused"),
        ]
        assert check_drift(messages, "- 迁移失败：连接 Redis 10.0.3.17:6379 被拒绝。") == []
        assert kinds(check_drift(messages, "- 迁移失败了。")) == ["identifier_missing"]


def test_an_approval_needs_more_than_a_mention_of_its_object() -> None:
    messages = [
        assistant("0042_add_index needs approval before it runs on staging."),
        user("Yes, I approve running 0042_add_index on staging."),
    ]
    mentioned = "- The migration 0042_add_index is causing lock timeouts on staging."
    assert [(f.kind, f.code) for f in serious(check_drift(messages, mentioned))] == [
        ("constraint_dropped", "approval_lost")
    ]
    for kept in (
        "- The user approved running 0042_add_index on staging.",
        "- 0042_add_index ran on staging and failed with a lock timeout.",
        "- 用户批准在预发执行 0042_add_index。",
    ):
        assert serious(check_drift(messages, kept)) == [], kept


class TestErrorsInWords:
    MESSAGES = [
        call("c1", "terminal", {"cmd": "./scripts/migrate.sh staging 0057_split_orders"}),
        result(
            "c1",
            "2026-11-30T14:01:17.330Z INFO migrate request_id=req-1 status=200\n"
            "2026-11-30T14:01:17.331Z ERROR migrate could not acquire migration lock; aborting",
        ),
        call("c2", "terminal", {"cmd": "pytest -q"}),
        result("c2", "4 failed, 16 passed in 3.81s"),
    ]

    def test_an_error_without_a_name_is_checked_by_its_words(self) -> None:
        found = check_drift(self.MESSAGES, "- The migration was started on staging.")
        assert [(f.code, f.source_index) for f in found] == [("tool_error_missing", 1)]
        assert "could not acquire migration lock" in found[0].evidence["original"]
        for kept in ("- The migration could not acquire its lock and aborted.", "- 迁移拿不到迁移锁，已中止。"):
            assert check_drift(self.MESSAGES, kept) == [], kept

    def test_a_log_stamp_keeps_no_error(self) -> None:
        messages = [
            call("c1", "terminal", {"cmd": "kubectl logs redis-0"}),
            result("c1", "1:M 30 Nov 2026 14:00:59.001 # Can't open the append-only file: Permission denied"),
        ]
        found = check_drift(messages, "- Request ids: req-30 Nov 2026 14:00:59.001.")
        assert "tool_error_missing" in [f.code for f in found]


def test_the_name_of_what_a_constraint_protects_is_noted() -> None:
    messages = [
        user("redis 的卷别动，存储组在查。不要删 PVC，里面有别的服务的数据。"),
        call("c1", "terminal", {"cmd": "kubectl -n staging describe pvc redis-data-redis-0"}),
        result("c1", "Status: Bound\nVolume: pvc-8f2c"),
        call("c2", "terminal", {"cmd": "kubectl -n staging logs redis-0 --previous"}),
        result("c2", "ok"),
    ]
    kept = "- 不要删 PVC，里面有别的服务的数据；redis 的卷别动。"
    noted = [
        (f.code, f.severity, f.evidence["original"])
        for f in check_drift(messages, kept)
        if f.kind == "identifier_missing"
    ]
    assert noted == [("assistant_identifier_missing", "low", "redis-data-redis-0")]
    named = kept + "\n- PVC redis-data-redis-0 查过了，状态 Bound。"
    assert [f for f in check_drift(messages, named) if f.kind == "identifier_missing"] == []


def test_a_number_given_to_the_wrong_name_of_a_table() -> None:
    messages = [
        user("每个函数不超过 40 行。"),
        call("c1", "terminal", {"cmd": "python scripts/func_lengths.py export/invoice_writer.py"}),
        result("c1", "build_rows 38\nnormalize_row 22\napply_rates 31\ngroup_by_customer 44"),
    ]
    found = [f for f in check_drift(messages, "- **apply_rates**: 22 lines.") if f.kind == "wrong_attribution"]
    assert [(f.code, f.source_index, f.evidence["original"]) for f in found] == [
        ("value_misplaced", 2, "apply_rates 31; normalize_row 22")
    ]
    for kept in ("- apply_rates: 31 lines; normalize_row 22.", "- group_by_customer 有 44 行，超过 40 行。"):
        assert [f for f in check_drift(messages, kept) if f.kind == "wrong_attribution"] == [], kept


class TestHedgesInAgentRuns:
    """What real mini-swe-agent runs hold that restates no hedge (each one was an alarm on an extractive summary)."""

    @pytest.mark.parametrize(
        ("said", "summary"),
        [
            ("This seems correct for `str` printer.", "- update_str_printer.py: edited (#64)"),
            (
                "Maybe `prefetch_related` implementation on QuerySet clears the cache?",
                "- Identifiers: User object (1), prefetch_related, QuerySet, clears cache, outer_user, __get__",
            ),
            ("And it explains why `setting cache` appears in logs.", "- The setting cache appears in logs."),
            ("```python\nprint('Could not find the loop in printer')\n```", "- Could not find the loop in printer."),
            ("Or maybe the output is too large.", "- The output of the command: too general exception."),
        ],
    )
    def test_it_is_quiet(self, said: str, summary: str) -> None:
        assert [f for f in check_drift([assistant(said)], summary) if f.kind == "hedge_lost"] == []

    def test_a_claim_stated_plainly_is_still_caught(self) -> None:
        said = "The `user-defined function raised exception` is likely masking the real timezone error."
        found = check_drift(
            [assistant(said)], "- The user-defined function raised exception masks the real timezone error."
        )
        assert [f.code for f in found if f.kind == "hedge_lost"] == ["hedge_dropped"]


def test_how_long_and_how_well_something_ran_is_no_rule() -> None:
    messages = [user("Why is the nightly export slow? It took 41 minutes yesterday.")]
    line = "## Constraints and preferences\n- The export has run for over 41 minutes without errors or failures."
    assert [f for f in check_drift(messages, line) if f.kind == "constraint_fabricated"] == []
    invented = "## Constraints and preferences\n- The export must never run for over 30 minutes."
    assert "constraint_fabricated" in kinds(check_drift(messages, invented))


def test_an_agent_s_words_quoted_after_a_label_are_no_invented_rule() -> None:
    said = "Since I don't have migrations, I can use SchemaEditor to create the model tables."
    messages = [user("Fix the unique constraint message."), assistant(said)]
    assert serious(check_drift(messages, f"- Finding (#280): {said}")) == []
    invented = "- Finding (#280): The user said I can't use SchemaEditor to create the model tables."
    assert "constraint_unsourced" in [f.code for f in serious(check_drift(messages, invented))]


class TestAttribution:
    MESSAGES = [
        user("Why is the export slow?"),
        assistant("It's probably the cache: the lru_cache on load_rate_table was removed, but I haven't confirmed it."),
    ]

    @pytest.mark.parametrize(
        "line",
        [
            "- The user suspects the lru_cache on load_rate_table was removed (unconfirmed).",
            "- 用户怀疑 load_rate_table 的 lru_cache 被删除了（未确认）。",
        ],
    )
    def test_the_assistant_s_suspicion_put_on_the_user(self, line: str) -> None:
        findings = check_drift(self.MESSAGES, line)
        assert [(f.kind, f.source_index) for f in findings] == [("wrong_attribution", 1)]

    @pytest.mark.parametrize(
        "line",
        [
            "- The assistant suspects the lru_cache on load_rate_table was removed (unconfirmed).",
            "- 助手怀疑 load_rate_table 的 lru_cache 被删除了（未确认）。",
            "- The user asked why the export is slow.",
        ],
    )
    def test_the_right_speaker_is_quiet(self, line: str) -> None:
        assert check_drift(self.MESSAGES, line) == []


class TestRulesRestatedByTheAgent:
    @pytest.mark.parametrize(
        ("ack", "kept"),
        [
            (
                "Understood: staging only, pods listed after each step, at most 3 health-check retries.",
                "- Staging only; list the pods after each step; at most 3 health-check retries.",
            ),
            (
                "明白：只动预发，每步之后列出 pod，健康检查最多重试三次。",
                "- 只动预发；每步之后列出 pod；健康检查最多重试 3 次。",
            ),
        ],
    )
    def test_an_acknowledged_rule_must_be_kept(self, ack: str, kept: str) -> None:
        messages = [assistant(ack), user("ok")]
        assert check_drift(messages, kept) == []
        dropped = check_drift(messages, "- Checked the pods.")
        assert {f.kind for f in dropped} == {"constraint_dropped"} and len(dropped) >= 2

    @pytest.mark.parametrize(
        ("ack", "scope_named", "kept"),
        [
            (
                "Understood: staging only. Checking the current state first.",
                "- Ran the migration on staging; it failed with a lock timeout.",
                "- Nothing goes to production; the migration ran on staging and failed.",
            ),
            ("明白：只动预发。先看当前状态。", "- 在预发执行了迁移，拿锁失败。", "- 只在预发操作；迁移执行失败。"),
        ],
    )
    def test_a_scope_named_without_its_restriction_is_dropped(self, ack: str, scope_named: str, kept: str) -> None:
        messages = [assistant(ack), user("ok")]
        found = serious(check_drift(messages, scope_named))
        assert [(f.kind, f.code) for f in found] == [("constraint_dropped", "restriction_dropped")]
        assert serious(check_drift(messages, kept)) == []

    def test_a_limit_is_not_kept_by_a_digit_of_an_address_or_a_command(self) -> None:
        messages = [assistant("明白：健康检查最多重试三次。"), user("ok")]
        copied_log = "- 2026-11-30T14:01:17.330Z ERROR migrate: connecting to 10.0.3.17:6379 refused (/v1/health)."
        assert [f.code for f in check_drift(messages, copied_log) if f.kind == "constraint_dropped"] == [
            "limit_dropped"
        ]
        assert check_drift(messages, "- 健康检查最多重试 3 次。") == []

    def test_the_agent_grants_no_approval(self) -> None:
        messages = [assistant("Shall I run 0042_add_index on staging?"), user("Yes, I approve running 0042_add_index.")]
        for line in (
            "- The tool has also approved running 0042_add_index on staging.",
            "- 助手已批准执行 0042_add_index。",
        ):
            assert "wrong_attribution" in kinds(check_drift(messages, line)), line
        assert "wrong_attribution" not in kinds(check_drift(messages, "- The agent has not approved anything itself."))

    def test_the_user_grants_approvals_and_does_not_ask_for_them(self) -> None:
        messages = [assistant("Shall I run 0042_add_index on staging?"), user("Yes, I approve running 0042_add_index.")]
        wrong = check_drift(messages, "- The user requested approval for running 0042_add_index.")
        assert "wrong_attribution" in kinds(wrong)
        assert check_drift(messages, "- The user approved running 0042_add_index.") == []


def test_a_rule_under_the_constraints_heading_needs_no_attribution() -> None:
    messages = [user("Run the migration 0042_add_index on staging.")]
    fabricated = "## Constraints and preferences\n- The tool should not apply the migration if it fails with a lock."
    assert kinds(check_drift(messages, fabricated)) == ["constraint_fabricated"]
    empty = "## Constraints and preferences\n- There were no specific constraints in this segment."
    assert check_drift(messages, empty) == []
    none = "## Constraints and preferences\n- No restrictions or preferences were mentioned."
    assert check_drift(messages, none) == []
    assert check_drift(messages, "## Progress and next steps\n- The migration must not be applied twice.") == []


class TestRequestsMidRun:
    MESSAGES = [
        user("Please change reservation NO6JO3 to May 17."),
        assistant("Done: NO6JO3 now departs May 17 on HAT136."),
        user("Great. Also, can you add one checked bag to that reservation?"),
        user("顺便把日志级别改成 INFO，现在 DEBUG 日志太多了。"),
    ]

    def test_a_dropped_request_is_caught(self) -> None:
        found = check_drift(self.MESSAGES, "- NO6JO3 now departs May 17 on HAT136.\n- 日志级别改成 INFO。")
        assert [(f.kind, f.code, f.source_index) for f in found] == [("constraint_dropped", "request_dropped", 2)]
        found = check_drift(self.MESSAGES, "- NO6JO3 now departs May 17 on HAT136.\n- Add one checked bag to NO6JO3.")
        assert [(f.code, f.source_index) for f in found] == [("request_dropped", 3)]

    def test_a_rename_is_not_kept_by_its_old_name_alone(self) -> None:
        messages = [user("Fix the totals."), user("Can you rename fmt_money to format_money while you're at it?")]
        found = check_drift(messages, "- fmt_money formats the totals; the JPY case fails.")
        assert [(f.code, f.source_index) for f in found] == [("request_dropped", 1)]
        assert (
            serious(check_drift(messages, "- Renamed fmt_money to format_money (an alias keeps the old name).")) == []
        )
        assert check_drift(messages, "- format_money replaces fmt_money.") == []
        # the ask's other words are "can you … while you're at it": sharing them keeps nothing
        found = check_drift(messages, "- While you're at it, the JPY case can fail.")
        assert [(f.code, f.source_index) for f in found] == [("request_dropped", 1)]

    def test_a_segment_cut_mid_run_has_no_task_turn(self) -> None:
        # the segment starts after the agent's work: its first user turn is a request, not the task
        messages = [assistant("Reading export/rates.py."), user("Can you rename fmt_money to format_money?")]
        found = check_drift(messages, "- Read export/rates.py.")
        assert [(f.code, f.source_index) for f in found] == [("request_dropped", 1)]
        # a history's first user turn is its task
        assert "request_dropped" not in [f.code for f in check_drift(messages[1:], "- Read export/rates.py.")]

    def test_a_request_about_one_name_needs_what_was_asked(self) -> None:
        messages = [user("帮我退 #W5823417 的键盘。"), user("另外帮我把订单 #W7730285 的地址改成上海。")]
        found = check_drift(messages, "- #W5823417 的键盘已退货。\n- #W7730285 的键盘已退货。")
        assert [(f.code, f.source_index, f.severity) for f in found] == [("request_dropped", 1, "medium")]
        assert check_drift(messages, "- #W5823417 的键盘已退货。\n- 用户要求把 #W7730285 的地址改成上海。") == []
        lookup = [user("帮我退 #W5823417 的键盘。"), user("顺便帮我查一下 #W7730285 的物流，好像一直没动。")]
        found = check_drift(lookup, "- #W5823417 的键盘已退货。\n- #W7730285 的键盘已退货。")
        assert [(f.code, f.severity) for f in found] == [("request_dropped", "low")]  # answered, not kept: a note

    def test_a_request_after_a_lead_in_is_a_request(self) -> None:
        ask = "Meanwhile, can you prepare the helm values diff for 2.14.0 and check the image digest?"
        messages = [user("Deploy payments-api 2.14.0 to staging."), user(ask)]
        found = check_drift(messages, "- payments-api 2.14.0 goes to staging.")
        assert [(f.code, f.source_index) for f in found] == [("request_dropped", 1)]
        assert check_drift(messages, "- Deploy 2.14.0 to staging; preparing the Helm values diff for 2.14.0.") == []

    def test_a_request_kept_in_either_language_is_quiet(self) -> None:
        summary = "- NO6JO3 departs May 17 on HAT136.\n- 用户要求给该预订加一件托运行李。\n- Set the log level to INFO."
        assert check_drift(self.MESSAGES, summary) == []


def test_what_a_tool_showed_over_a_limit_and_the_files_written_are_noted() -> None:
    messages = [
        user("每个函数不超过 40 行。"),
        call("c1", "write_file", {"path": "config/logging.yaml", "content": "level: INFO"}),
        result("c1", "ok"),
        call("c2", "terminal", {"cmd": "python scripts/func_lengths.py billing/tax.py"}),
        result("c2", "calc_tax 46\nround_cents 12\napply_discount 33"),
    ]
    found = check_drift(messages, "- 每个函数不超过 40 行。\n- 日志级别已改成 INFO。")
    noted = {(f.code, f.evidence["original"], f.severity) for f in found if f.kind == "identifier_missing"}
    assert noted == {
        ("limit_breach_missing", "calc_tax 46", "low"),
        ("assistant_identifier_missing", "config/logging.yaml", "low"),
    }
    kept = "- 每个函数不超过 40 行；calc_tax 还有 46 行，要再拆。\n- config/logging.yaml 的日志级别已改成 INFO。"
    assert [f for f in check_drift(messages, kept) if f.kind == "identifier_missing"] == []


class TestProgressAcrossLanguagesAndDryRuns:
    MESSAGES = [
        user("先准备一下 helm 升级到 3.2.0 的 diff。"),
        call("c1", "terminal", {"cmd": "helm -n staging diff upgrade order-service charts/order-service"}),
        result("c1", "+ image: order-service:3.2.0"),
        assistant("diff 已准备好。迁移还没执行，helm 也没升级。"),
    ]

    def test_a_diff_is_no_upgrade_and_a_chinese_denial_contradicts_an_english_claim(self) -> None:
        found = check_drift(self.MESSAGES, "- Helm upgraded to 3.2.0.")
        assert [(f.code, f.source_index) for f in found] == [("progress_contradicted", 3)]
        assert serious(check_drift(self.MESSAGES, "- The helm diff for 3.2.0 is ready; helm not upgraded yet.")) == []

    def test_a_denial_about_another_identifier_does_not_contradict(self) -> None:
        messages = [
            user("Change NO6JO3 to May 17."),
            call("c1", "update_reservation_flights", {"reservation_id": "NO6JO3", "flight": "HAT136"}),
            result("c1", '{"reservation_id": "NO6JO3", "status": "ok"}'),
            assistant("Done: NO6JO3 now departs May 17 on HAT136; the return HAT211 on May 22 is unchanged."),
        ]
        assert serious(check_drift(messages, "- Reservation NO6JO3 was changed to May 17 on HAT136.")) == []


def test_a_vague_prohibition_dropped_is_a_note() -> None:
    found = check_drift([user("嗯，先别下结论。billing/rates_cache.py 不要动。")], "- billing/rates_cache.py 不要动。")
    assert [(f.kind, f.severity) for f in found] == [("constraint_dropped", "low")]


def test_an_allowance_nobody_gave_under_the_constraints_heading() -> None:
    messages = [user("把 round_cents 改回 ROUND_HALF_UP。")]
    found = check_drift(messages, "## Constraints and preferences\n- 允许在 billing/tax.py 中使用 ROUND_HALF_UP。")
    assert "constraint_fabricated" in kinds(found)


def test_a_known_path_under_the_working_directory_is_no_invention() -> None:
    messages = [
        user("You are working in /srv/app. Fix billing/tax.py."),
        assistant("GET /v1/health returned 200; the migration is migrations/0042_add_index.sql."),
    ]
    assert "identifier_fabricated" not in kinds(check_drift(messages, "- Fixed /srv/app/billing/tax.py."))
    invented = check_drift(messages, "- The migration file is /v1/migrations/0042_add_index.sql.")
    assert "identifier_fabricated" in kinds(invented)


def test_a_prohibition_is_not_kept_by_its_reason_alone() -> None:
    rule = "Don't restart report-worker during business hours, finance runs their closing reports on it until 18:00."
    messages = [user("Deploy payments-api to staging."), assistant("On it."), user(rule)]
    reason_only = "- The tool was tested on business hours and finance runs their closing reports on it until 18:00."
    assert ("constraint_dropped", 2) in [(f.kind, f.source_index) for f in check_drift(messages, reason_only)]
    kept = "- Don't restart report-worker before 18:00: finance runs its closing reports on it."
    assert "constraint_dropped" not in kinds(check_drift(messages, kept))


def test_an_error_is_not_kept_by_naming_its_function_for_something_else() -> None:
    error = "E   TypeError: group_by_customer() missing 1 required positional argument: 'ctx'"
    messages = ran("Run the export tests.", "pytest tests/export", error)
    elsewhere = check_drift(messages, "- group_by_customer is over the 40-line limit; split it next.")
    assert "tool_error_missing" in [f.code for f in elsewhere]
    said = check_drift(messages, "- group_by_customer fails: the ctx argument is missing.")
    assert "tool_error_missing" not in [f.code for f in said]


def test_a_charge_is_supported_only_with_its_amount() -> None:
    messages = [
        user("Change NO6JO3 to HAT136, pay with credit_card_4421."),
        call("c1", "update_reservation_flights", {"reservation_id": "NO6JO3", "payment_id": "credit_card_4421"}),
        result(
            "c1", '{"reservation_id": "NO6JO3", "flights": ["HAT136"], "charged": 15, "payment_id": "credit_card_4421"}'
        ),
    ]
    invented = check_drift(messages, "- A total of $205 has been charged to credit_card_4421 for NO6JO3 (HAT136).")
    assert [(f.kind, f.code) for f in invented] == [("progress_fabricated", "progress_unsupported")]
    assert check_drift(messages, "- $15 has been charged to credit_card_4421 for NO6JO3 (HAT136).") == []


def test_a_state_said_in_another_language_supports_no_change() -> None:
    seen = [user("看一下舍入。"), assistant("看起来 round_cents 用的是 ROUND_HALF_EVEN，原来的代码是 ROUND_HALF_UP。")]
    found = check_drift(seen, "- The round_cents code has been updated to use ROUND_HALF_EVEN.")
    assert ("progress_fabricated", "progress_unsupported") in [(f.kind, f.code) for f in found]
    done = [user("改回 ROUND_HALF_UP。"), assistant("已把 round_cents 改成 ROUND_HALF_UP。")]
    assert check_drift(done, "- round_cents has been changed to ROUND_HALF_UP.") == []


def test_a_server_error_is_kept_by_its_status() -> None:
    output = "GET https://orders.staging.internal/healthz -> 503 (redis: down)\n[exit code 2]"
    messages = ran("看一下预发。", "curl -s staging/healthz", output)
    lost = check_drift(messages, "- 预发的 Redis 在 CrashLoopBackOff。")
    assert "tool_error_missing" in [f.code for f in lost]
    assert "tool_error_missing" not in [f.code for f in check_drift(messages, "- healthz 返回 503（redis 挂了）。")]


def test_a_timeout_warned_in_a_log_is_an_error_to_keep() -> None:
    log = "\n".join(f"2026-11-30T14:01:{i:02d}.000Z INFO payments-api path=/v1/health status=200" for i in range(40))
    log += "\n2026-11-30T14:02:00.001Z WARN payments-api upstream fx-rates timeout after 2000ms (attempt 1/3)"
    messages = ran("Check the logs.", "kubectl logs deploy/payments-api", log)
    assert "tool_error_missing" in [f.code for f in check_drift(messages, "- payments-api logs look healthy.")]
    kept = "- payments-api: upstream fx-rates timeout after 2000ms (attempt 1 of 3)."
    assert "tool_error_missing" not in [f.code for f in check_drift(messages, kept)]


def test_a_failure_put_on_a_test_that_only_ever_passed_is_misplaced() -> None:
    messages = [
        user("Also, add a test for negative amounts (credit notes)."),
        assistant("Adding the credit-note test."),
        assistant(
            "The negative-amount test passes. New failure: I forgot to pass ctx to group_by_customer in write_csv."
        ),
    ]
    wrong = check_drift(messages, "- The negative-amounts test failed because it forgot to pass `ctx`.")
    assert [(f.kind, f.code, f.source_index) for f in wrong if f.code == "error_misplaced"] == [
        ("wrong_attribution", "error_misplaced", 2)
    ]
    # a test that failed before it passed may be reported failing (stale, not misplaced)
    fixed = [*messages, assistant("The currency test fails: KeyError."), assistant("The currency test passes now.")]
    assert "error_misplaced" not in [f.code for f in check_drift(fixed, "- The currency test failed (KeyError).")]


def test_the_agents_calls_put_on_the_user_are_the_wrong_speaker() -> None:
    messages = [
        user("I'm Sofia, user id sofia_kim_7287. Change NO6JO3 to May 17."),
        call("c1", "get_reservation_details", {"reservation_id": "NO6JO3"}),
        result("c1", '{"reservation_id": "NO6JO3", "user_id": "sofia_kim_7287"}'),
    ]
    swapped = (
        "- Sofia: -> calls get_reservation_details(reservation_id=NO6JO3)\n- Sofia: -> calls search_direct_flight()"
    )
    found = [f for f in check_drift(messages, swapped) if f.code == "wrong_speaker"]
    assert len(found) == 1  # one copied transcript, one error
    kept = "- #1 ASSISTANT: -> calls get_reservation_details(reservation_id=NO6JO3)\n- Next: -> calls search()"
    assert "wrong_speaker" not in [f.code for f in check_drift(messages, kept)]


def test_a_path_cut_short_is_no_known_path() -> None:
    output = "FAILED tests/billing/test_discount.py::case_0 - ZeroDivisionError\ntests/billing/test_money.py ......"
    messages = ran("Run the billing tests.", "pytest tests/billing", output)
    cut = check_drift(messages, "- tests/billing/test_money.p:187: ZeroDivisionError")
    assert ("identifier_fabricated", "tests/billing/test_money.p") in [(f.kind, f.evidence["summary"]) for f in cut]
    whole = check_drift(messages, "- tests/billing/test_money.py passed; tests/billing/test_discount.py failed.")
    assert "identifier_fabricated" not in kinds(whole)
    translated = check_drift(messages, "- 测试/billing/test_discount.py 报 ZeroDivisionError。")
    assert ("identifier_fabricated", "测试/billing/test_discount.py") in [
        (f.kind, f.evidence["summary"]) for f in translated
    ]
    assert "identifier_fabricated" not in kinds(check_drift(messages, "- 测试 tests/billing/test_discount.py 失败。"))


class TestRetailRules:
    MESSAGES = [
        user("你好，我想退一个东西。"),
        user("#W5823417 里的那个机械键盘。不要取消我妈妈那张订单 #W1192604，那个她还要用。"),
        assistant("确认退这一件，退款 329 元回到 PayPal 吗？"),
        user("确认，就退这件吧。"),
        assistant("已提交退货：#W5823417 的机械键盘（6117428830），329 元将原路退回 PayPal，5 到 7 个工作日到账。"),
        user("以后退款都用礼品卡 gift_card_2207 就行，不要再退到 PayPal 了。"),
    ]

    def test_a_verb_the_lists_do_not_know_is_inverted_by_its_concept(self) -> None:
        found = check_drift(self.MESSAGES, "- 用户取消了订单 #W1192604。")
        assert ("constraint_inverted", 1) in [(f.kind, f.source_index) for f in found]
        en = check_drift(self.MESSAGES, "- The order #W1192604 was cancelled.")
        assert "constraint_inverted" in kinds(en)

    def test_history_before_the_rule_is_no_inversion(self) -> None:
        summary = (
            "- 不要取消订单 #W1192604。\n"
            "- 已提交退货：#W5823417 的机械键盘（6117428830），329 元将原路退回 PayPal，5 到 7 个工作日到账。\n"
            "- 以后退款都用礼品卡 gift_card_2207，不要再退到 PayPal。"
        )
        assert "constraint_inverted" not in kinds(check_drift(self.MESSAGES, summary))
        later = summary + "\n- 下一笔退款要退到 PayPal。"
        assert "constraint_inverted" in kinds(check_drift(self.MESSAGES, later))

    def test_a_bound_is_no_refusal(self) -> None:
        summary = "- 不要取消订单 #W1192604。\n- 用户要求退款不超过 200 元，并且确认退掉订单中的机械键盘。"
        assert "constraint_inverted" not in kinds(check_drift(self.MESSAGES[:4], summary))


def test_an_error_with_swapped_identifiers_is_misplaced() -> None:
    messages = [
        call("c1", "return_delivered_order_items", {"order_id": "#W5823417", "item_ids": ["8823019934"]}),
        result("c1", "Error: item 8823019934 not found in order #W5823417"),
        assistant("The right item is 6117428830; return submitted."),
    ]
    wrong = check_drift(messages, "- Error: item 6117428830 not found in order #W5823417 (line 14)")
    # misplaced, and (a note) the real error with its item is not kept
    assert [(f.kind, f.code, f.source_index) for f in wrong] == [
        ("wrong_attribution", "error_misplaced", 1),
        ("identifier_missing", "tool_error_missing", 1),
    ]
    right = check_drift(messages, "- Error: item 8823019934 not found in order #W5823417; returned 6117428830.")
    assert "wrong_attribution" not in kinds(right)


def test_a_bare_ok_is_refused_only_by_a_sentence_about_the_permission() -> None:
    messages = [
        assistant("测试全部通过，但 calc_tax 还有 46 行，超过 40 行的限制，需要再拆。"),
        user("行。先不要提交，我要先看一下 diff。"),
    ]
    kept = "\n- 先不要提交，要先看 diff。"
    state = check_drift(messages, "- 最后状态：折扣测试报除零错误：数量为 0 的行没有被跳过。" + kept)
    assert "approval_refused" not in [f.code for f in state]
    refused = check_drift(messages, "- 测试全部通过，calc_tax 还有 46 行；用户没有同意再拆。" + kept)
    assert "approval_refused" in [f.code for f in refused]


def test_a_line_that_tells_to_change_a_protected_file_or_its_function_inverts_it() -> None:
    messages = [
        user("Don't touch rates.py in this PR though, open a separate ticket for the cache."),
        call("c1", "terminal", {"cmd": "sed -n 1,40p export/rates.py"}),
        result("c1", "  21  def load_rate_table(path):\n  44  def lookup_rate(row, table):"),
        call("c2", "terminal", {"cmd": "git log --oneline -3 export/rates.py"}),
        result("c2", "d4b59c0 Drop lru_cache from load_rate_table (memory)"),
    ]
    found = check_drift(messages, "## Decisions\n- Drop lru_cache from load_rate_table (memory).")
    assert [(f.kind, f.code) for f in found if f.code == "protected_changed"] == [
        ("constraint_inverted", "protected_changed")
    ]
    kept = (
        "- Don't touch rates.py in this PR.\n- Commit d4b59c0 'Drop lru_cache from load_rate_table' fits the cache"
        " suspicion.\n- Do not modify load_rate_table; open a ticket."
    )
    assert "protected_changed" not in [f.code for f in check_drift(messages, kept)]


def test_a_change_made_in_another_file_put_on_a_protected_one_is_misplaced() -> None:
    messages = [
        user("嗯，先别下结论。税率表那边 billing/rates_cache.py 不要动，那是另一个组的代码。"),
        assistant("好，我只读不改 rates_cache.py。看起来 round_cents 用的是 ROUND_HALF_EVEN。"),
        {
            "role": "assistant",
            "content": "改回 ROUND_HALF_UP。",
            "tool_calls": [
                {
                    "id": "w1",
                    "type": "function",
                    "function": {"name": "write_file", "arguments": json.dumps({"path": "billing/tax.py"})},
                }
            ],
        },
        result("w1", "ok"),
    ]
    # by the file's name, by what the user called it, and a shorter line about the same change
    summary = (
        "- 改回 rates_cache.py 中的舍入模式为 ROUND_HALF_UP。\n"
        "- 改变税率表缓存的舍入模式，从 ROUND_HALF_EVEN 改为 ROUND_HALF_UP。\n"
        "- 修改税率表缓存的舍入模式。"
    )
    found = [(f.kind, f.code, f.source_index) for f in check_drift(messages, summary) if f.kind == "wrong_attribution"]
    assert found == [("wrong_attribution", "change_misplaced", 2)] * 3
    assert "constraint_inverted" not in kinds(check_drift(messages, summary))  # misplaced, not inverted
    # the file restated by the name the user gave it keeps the prohibition
    kept = check_drift(messages, "## Constraints and preferences\n- 不要动税率表缓存文件。")
    serious = [f for f in kept if f.kind.startswith("constraint_")]
    assert [f.evidence["original"] for f in serious] == ["嗯，先别下结论。"]  # (a note: it names nothing)
    # a change nobody made anywhere is the prohibition inverted
    asked = check_drift(messages, "- 修改税率表缓存的过期时间。")
    assert "protected_changed" in [f.code for f in asked]
    assert "change_misplaced" not in [f.code for f in check_drift(messages, "- 改回 billing/tax.py 的 ROUND_HALF_UP。")]


def test_a_wish_no_user_voiced_is_fabricated() -> None:
    messages = [
        user("订单 #W5823417 里的机械键盘我要退，轴体有问题。"),
        assistant("好的，已提交退货，329 元将原路退回 PayPal，5 到 7 个工作日到账。"),
    ]
    found = check_drift(messages, "- 用户希望在收到退货后立即到账。")
    assert [(f.kind, f.code) for f in found if f.code == "wish_unsourced"] == [
        ("constraint_fabricated", "wish_unsourced")
    ]
    said = check_drift(messages, "- 用户希望退掉 #W5823417 里的机械键盘，因为轴体有问题。")
    assert "wish_unsourced" not in [f.code for f in said]
    # in the other language the words differ: left alone
    english = check_drift(messages, "- The user wants the refund right after the return arrives.")
    assert "wish_unsourced" not in [f.code for f in english]


def test_a_code_name_no_message_or_call_holds_is_fabricated() -> None:
    messages = [
        user("Can you rename fmt_money to format_money while you're at it?"),
        call("c1", "get_user_details", {"user_id": "li_wei_3391"}),
        result("c1", "{}"),
    ]
    found = check_drift(messages, "- Renamed `fmt_money` to `format_money`, keeping a `fmt_money_alias`.")
    assert [(f.kind, f.evidence["summary"]) for f in found if f.code == "identifier_unsourced"] == [
        ("identifier_fabricated", "fmt_money_alias")
    ]
    # a tool's own name is no invention; a plain word in ticks is left alone
    quiet = check_drift(messages, "- Looked the user up with `get_user_details`; the `alias` stays.")
    assert "identifier_unsourced" not in [f.code for f in quiet]


def test_an_item_put_on_another_order_is_mismatched() -> None:
    messages = [
        user("查一下 #W7730285 的物流；另外 #W5823417 里的机械键盘我要退。"),
        call("c1", "get_order_details", {"order_id": "#W7730285"}),
        result("c1", '{"order_id": "#W7730285", "status": "processing", "items": [{"item_id": "2190871011"}]}'),
        call("c2", "return_delivered_order_items", {"order_id": "#W5823417", "item_ids": ["6117428830"]}),
        result("c2", '{"order_id": "#W5823417", "status": "return requested"}'),
    ]
    wrong = check_drift(messages, "- 已提交退货：#W7730285 的机械键盘（6117428830）")
    [found] = [f for f in wrong if f.code == "ids_mismatched"]
    # the evidence is where the originals put the item: on the other order
    assert (found.kind, found.source_index) == ("wrong_attribution", 3)
    assert '"order_id": "#W5823417", "item_ids": ["6117428830"]' in found.evidence["original"]
    right = check_drift(messages, "- 已提交退货：#W5823417 的机械键盘（6117428830）\n- #W7730285 还在处理中。")
    assert "ids_mismatched" not in [f.code for f in right]
    # a list names things side by side, it pairs nothing
    listed = check_drift(messages, "- 订单：#W7730285, #W5823417；商品 6117428830")
    assert "ids_mismatched" not in [f.code for f in listed]


def test_an_error_on_another_function_is_mismatched_unless_its_test_file_is_the_functions() -> None:
    messages = [
        call("c1", "terminal", {"cmd": "pytest tests/export -q"}),
        result(
            "c1",
            "E   TypeError: group_by_customer() missing 1 required positional argument: 'ctx'\n"
            "tests/export/test_group.py:12: TypeError\n\n\n\n\n"
            "E   AssertionError: assert '1,204.50 EUR' == '1.204,50 EUR'\n"
            "tests/export/test_money.py:76: AssertionError\n2 failed, 46 passed",
        ),
    ]
    misplaced = {"ids_mismatched", "error_misplaced"}
    wrong = check_drift(messages, "- An AssertionError in `group_by_customer`.")
    assert misplaced & {f.code for f in wrong}
    right = check_drift(messages, "- An AssertionError in `format_money` (the money tests).")
    assert not misplaced & {f.code for f in right}
    # nor is it an error placed where it did not happen (the function named in the originals)
    named = [*messages, assistant("Extracted format_money and group_by_customer.")]
    said = check_drift(named, "- An AssertionError in the `format_money` function.")
    assert "error_misplaced" not in [f.code for f in said]
    assert "error_misplaced" in [f.code for f in check_drift(named, "- A TypeError in the `format_money` function.")]


def test_a_list_of_errors_pairs_each_with_its_own_details() -> None:
    """A real 1.5B answer listed two errors, each with its message; the KeyError's key is not the AssertionError's."""
    messages = [
        call("c1", "terminal", {"cmd": "pytest tests/export -q"}),
        result(
            "c1",
            "E   KeyError: 'currency_code'\ntests/export/test_currency.py:31: KeyError\n\n\n\n\n"
            "E   AssertionError: assert '0.00 JPY' == '0 JPY'\ntests/export/test_money.py:58: AssertionError\n"
            "2 failed, 46 passed",
        ),
    ]
    listed = (
        "- The tool reported errors such as KeyError: 'currency_code' and AssertionError: assert '0.00 JPY' == '0 JPY'"
    )
    assert "ids_mismatched" not in [f.code for f in check_drift(messages, listed)]
    swapped = "- The tool reported an AssertionError: 'currency_code'."
    assert "ids_mismatched" in [f.code for f in check_drift(messages, swapped)]


@pytest.mark.parametrize(
    "line",
    [
        "- Sofia is checking availability of HAT170 on May 17.",  # a real 0.5B answer
        "- The customer has already searched the May 17 flights.",
        "- 用户查询了 5 月 17 日的航班。",
    ],
)
def test_a_lookup_the_agent_made_put_on_the_customer(line: str) -> None:
    messages = [
        user("I'm sofia_kim_7287. I want to leave on May 17 instead of May 16."),
        call("c1", "search_direct_flight", {"origin": "DEN", "destination": "BOS", "date": "2024-05-17"}),
        result("c1", "Error: flight HAT170 not available on 2024-05-17"),
    ]
    found = [f for f in check_drift(messages, line) if f.code == "user_did_not"]
    assert [(f.kind, f.severity) for f in found] == [("wrong_attribution", "medium")], line
    # the customer said they looked it up themselves
    looked = [user("I already checked the May 17 flights on the app."), *messages]
    assert [f for f in check_drift(looked, line) if f.code == "user_did_not"] == [], line


def test_a_reservation_put_on_another_customer_is_mismatched() -> None:
    messages = [
        call("c1", "get_user_details", {"user_id": "sofia_kim_7287"}),
        result("c1", '{"user_id": "sofia_kim_7287", "name": "Sofia Kim", "reservations": ["NO6JO3", "Q4ZB2R"]}'),
        call("c2", "get_user_details", {"user_id": "ivan_d_1200"}),
        result("c2", '{"user_id": "ivan_d_1200", "name": "Ivan D", "reservations": ["K1NW8N"]}'),
        call("c3", "update_reservation_flights", {"reservation_id": "NO6JO3", "flights": ["HAT136", "HAT211"]}),
        result("c3", '{"reservation_id": "NO6JO3", "status": "updated"}'),
    ]
    wrong = check_drift(messages, "- Sofia Kim has changed her reservation from NO6JO3 to K1NW8N.")
    [found] = [f for f in wrong if f.code == "ids_mismatched"]
    assert '"reservations": [' in found.evidence["original"]  # whose reservations are whose
    # her flight is hers through her reservation (the account holds it through the record)
    right = check_drift(messages, "- Sofia Kim's reservation NO6JO3 now departs on HAT136.")
    assert "ids_mismatched" not in [f.code for f in right]


def test_an_item_put_on_another_customer_is_mismatched_unless_their_order_holds_it() -> None:
    messages = [
        call("c1", "get_user_details", {"user_id": "li_wei_3391"}),
        result("c1", '{"user_id": "li_wei_3391", "orders": ["#W5823417"]}'),
        call("c2", "get_order_details", {"order_id": "#W5823417"}),
        result("c2", '{"order_id": "#W5823417", "items": [{"item_id": "6117428830"}]}'),
        call("c3", "get_user_details", {"user_id": "chen_jing_1180"}),
        result("c3", '{"user_id": "chen_jing_1180", "orders": ["#W7730285"]}'),
        call("c4", "get_order_details", {"order_id": "#W7730285"}),
        result("c4", '{"order_id": "#W7730285", "user_id": "chen_jing_1180", "items": [{"item_id": "2190871011"}]}'),
    ]
    wrong = check_drift(messages, "- li_wei_3391 退了商品 2190871011。")
    assert "ids_mismatched" in [f.code for f in wrong]
    # the item is hers through her order
    assert "ids_mismatched" not in [f.code for f in check_drift(messages, "- li_wei_3391 退了商品 6117428830。")]


class TestIdentifierRoles:
    """An identifier called something it is not (real model output: "`W7730285` 是工单 ID", "销售员 ID:
    li_wei_3391", "The return flight ID is K1NW8N")."""

    RETAIL = [
        user("我是 li_wei_3391，订单 #W7730285 的物流好几天没动了。"),
        call("c1", "get_order_details", {"order_id": "#W7730285"}),
        result("c1", '{"order_id": "#W7730285", "user_id": "li_wei_3391", "status": "processed"}'),
        call("c2", "create_ticket", {"user_id": "li_wei_3391", "topic": "物流滞留"}),
        result("c2", '{"ticket_id": "D-0"}'),
    ]
    AIRLINE = [
        user("My user id is sofia_kim_7287. My friend's reservation K1NW8N had a cancelled flight."),
        call("c1", "get_reservation_details", {"reservation_id": "K1NW8N"}),
        result("c1", '{"reservation_id": "K1NW8N", "flights": [{"flight_number": "HAT277"}]}'),
    ]

    def test_an_order_called_a_ticket_and_a_user_called_staff(self) -> None:
        for summary in ("- `W7730285` 是工单 ID。", "- 销售员 ID: li_wei_3391"):
            found = [(f.kind, f.code) for f in check_drift(self.RETAIL, summary) if f.kind == "wrong_attribution"]
            assert found == [("wrong_attribution", "identifier_mistyped")], summary

    def test_a_reservation_called_a_flight(self) -> None:
        found = check_drift(self.AIRLINE, "- The return flight ID is K1NW8N.")
        assert ("wrong_attribution", "identifier_mistyped") in [(f.kind, f.code) for f in found]

    def test_right_roles_and_shared_names_are_no_finding(self) -> None:
        fine = (
            "- 用户 li_wei_3391 的订单 #W7730285 物流滞留，已开工单 D-0。",
            "- Order W7730285 is stuck; the customer li_wei_3391 asked about it.",
        )
        for summary in fine:
            assert "identifier_mistyped" not in [f.code for f in check_drift(self.RETAIL, summary)], summary
        # an airline booking is a reservation; "the user's reservation" names the owner, not the id
        for summary in ("- Booking K1NW8N: HAT277 was cancelled.", "- The user's reservation K1NW8N."):
            assert "identifier_mistyped" not in [f.code for f in check_drift(self.AIRLINE, summary)], summary


def test_an_approval_is_not_kept_by_a_line_that_only_names_its_object() -> None:
    """Real 0.5B output listed "migrations/0057_split_orders.sql" under files and dropped the approval."""
    messages = [user("我批准在预发环境执行迁移 0057_split_orders。")]
    dropped = check_drift(messages, "## Files and identifiers\n- migrations/0057_split_orders.sql")
    assert ("constraint_dropped", "approval_lost") in [(f.kind, f.code) for f in dropped]
    kept = check_drift(messages, "- The user approved running migration 0057_split_orders on staging.")
    assert "constraint_dropped" not in kinds(kept)


def test_a_digest_a_short_tool_result_returned_is_noted_when_missing() -> None:
    digest = "sha256:4b8e2d7f1c9a0e3b5d6f7a8c9e0b1d2f3a4c5e6f7b8d9e0a1c2b3d4e5f6a7b8c"
    messages = [
        user("先看看镜像 digest。"),
        {"role": "assistant", "content": None, "tool_calls": [_digest_call()]},
        {"role": "tool", "tool_call_id": "d1", "content": digest},
    ]
    missing = [f for f in check_drift(messages, "- 已查看镜像。") if f.code == "tool_identifier_missing"]
    assert [(f.severity, f.source_index) for f in missing] == [("low", 2)]
    assert not [f for f in check_drift(messages, f"- 镜像 digest 是 {digest}。") if f.code == "tool_identifier_missing"]


def _digest_call() -> dict:
    arguments = json.dumps({"command": "crane digest registry/order-service:3.2.0"})
    return {"id": "d1", "type": "function", "function": {"name": "terminal", "arguments": arguments}}


def test_the_summarizers_own_rules_copied_into_a_summary_are_an_invented_rule() -> None:
    """Small models copy the prompt's rules under "Constraints" (real 0.5B output, both languages)."""
    messages = [user("帮我退掉 #W5823417 里的键盘。"), assistant("好的，已提交退货。")]
    summary = (
        "## Constraints and preferences\n"
        '- 用户提出的每条禁止、限制、批准和长期要求（每次修改后要跑的命令、"最多 N 次"之类的限制），按用户的原话写。\n'
        '- Never turn a prohibition into an instruction, never drop a "not", never invent an approval.\n'
        "- No prohibition, limit, approval and standing instruction of the user."
    )
    found = [(f.code, f.evidence["summary"][:8]) for f in check_drift(messages, summary) if f.severity != "low"]
    assert found == [("instruction_copied", "用户提出的每条禁"), ("instruction_copied", "Never tu")]
    # the same words said by the user are the user's rule
    said = [user("每次修改后要跑的命令写下来：pytest -q，最多 3 次重试。")]
    assert "instruction_copied" not in [
        f.code for f in check_drift(said, "- 每次修改后要跑的命令：pytest -q，最多 3 次重试。")
    ]


def test_a_log_line_spliced_from_two_is_an_invented_identifier() -> None:
    """Real 0.5B output quoted one line's timestamp with another line's level and request id."""
    log = (
        "2026-11-30T14:00:00.590Z INFO order-service request_id=req-40463 path=/v1/orders status=200\n"
        "2026-11-30T14:00:01.736Z INFO migrate request_id=req-87676 path=/v1/health status=200\n"
        "2026-11-30T14:01:17.331Z ERROR migrate could not acquire migration lock; aborting"
    )
    messages = [user("看一下迁移日志。"), {"role": "tool", "tool_call_id": "t1", "content": log}]
    spliced = "## Errors\n- 2026-11-30T14:00:00.590Z ERROR migrate request_id=req-87676 path=/v1/health status=200"
    found = [(f.kind, f.code) for f in check_drift(messages, spliced) if f.severity != "low"]
    assert found == [("identifier_fabricated", "log_line_spliced")]
    copied = "## Errors\n- 2026-11-30T14:01:17.331Z ERROR migrate could not acquire migration lock; aborting"
    assert "log_line_spliced" not in [f.code for f in check_drift(messages, copied)]
    said = "## Errors\n- 迁移在 2026-11-30 14:01 拿不到锁，已中止。"
    assert "log_line_spliced" not in [f.code for f in check_drift(messages, said)]


def test_an_error_line_with_another_flight_is_misplaced() -> None:
    messages = [
        call("c1", "search_direct_flight", {"origin": "DEN", "destination": "BOS", "date": "2024-05-17"}),
        result("c1", "Error: flight HAT170 not available on 2024-05-17"),
        assistant("HAT170 is not available on May 17; HAT136 and HAT246 are."),
    ]
    wrong = check_drift(messages, "- Error: flight HAT246 not available on 2024-05-17")
    assert ("wrong_attribution", "error_misplaced") in [(f.kind, f.code) for f in wrong]
    right = check_drift(messages, "- Error: flight HAT170 not available on 2024-05-17; rebooked on HAT136.")
    assert "wrong_attribution" not in kinds(right)


def test_an_approved_action_that_failed_is_no_refusal() -> None:
    """Real 1.5B output: "was not applied because of a lock timeout" reports an outcome, not a refusal."""
    messages = [
        user("Yes, I approve running 0042_add_index on staging."),
        assistant("Running it now."),
        {"role": "tool", "tool_call_id": "m1", "content": "ERROR: canceling statement due to lock timeout"},
    ]
    failed = check_drift(
        messages, "- The migration 0042_add_index was not applied on staging because of a lock timeout."
    )
    assert "constraint_inverted" not in kinds(failed)
    refused = check_drift(messages, "- The user did not approve running 0042_add_index on staging.")
    assert "constraint_inverted" in kinds(refused)


def test_a_cause_no_message_gives_is_noted() -> None:
    messages = [
        *ran(
            "Apply 0042_add_index on staging.",
            "./migrate.sh staging 0042_add_index.sql",
            "ERROR migrate psycopg.errors.LockNotAvailable: canceling statement due to lock timeout",
        ),
        assistant("The lock is held by the nightly report query on orders; it ends at 02:00."),
    ]

    def causes(summary: str) -> list[tuple[str, str]]:
        return [(f.kind, f.severity) for f in check_drift(messages, summary) if f.code == "cause_unsupported"]

    # the migration suffered the timeout; nothing says it caused one
    reversed_cause = "- The migration script 0042_add_index.sql is causing lock timeouts."
    assert causes(reversed_cause) == [("wrong_attribution", "low")]
    assert causes("- The nightly report query holds the lock, causing the migration to time out.") == []
    assert causes("- The migration 0042_add_index failed due to a lock timeout.") == []
    assert causes("- The lock timeouts are likely caused by the migrate script.") == []  # hedged: not a claim


def test_a_users_decision_put_on_the_agent_is_the_wrong_speaker() -> None:
    messages = [
        assistant("The export tests pass; the diff touches export/invoice_writer.py only."),
        user("Don't commit yet, I want to look at the diff first."),
    ]
    moved = check_drift(messages, "- The agent decided not to commit yet, as it wanted to look at the diff first.")
    assert [(f.kind, f.source_index) for f in moved if f.code == "wrong_speaker"] == [("wrong_attribution", 1)]
    kept = check_drift(messages, "- The user decided not to commit yet: they want to look at the diff first.")
    assert "wrong_speaker" not in [f.code for f in kept]


def test_an_error_is_placed_by_its_own_line_and_what_follows_it_before_the_next_error() -> None:
    output = (
        "FAILED tests/export/test_currency.py::test_legacy_rows - KeyError: 'currency_code'\n"
        "FAILED tests/export/test_money.py::case_1 - AssertionError: assert '1,204.50 EUR' == '1.204,50 EUR'\n"
        "FAILED tests/export/test_writer.py::case_2 - TypeError: group_by_customer() missing 1 required positional"
        " argument: 'ctx'\n3 failed, 45 passed"
    )
    messages = ran("Run the export tests.", "pytest tests/export -q", output)

    def misplaced(summary: str) -> bool:
        return "wrong_attribution" in kinds(check_drift(messages, summary))

    # group_by_customer is on the TypeError's line: it places neither the AssertionError nor the KeyError
    assert misplaced("- An AssertionError in `group_by_customer`.")
    assert misplaced("- A KeyError in group_by_customer().")
    assert not misplaced("- A TypeError in `group_by_customer`.")
    both = (
        "- Errors: KeyError: 'currency_code' in the currency tests and TypeError: group_by_customer() missing"
        " 1 required positional argument: 'ctx'."
    )
    assert not misplaced(both)


def test_a_prohibited_action_named_only_in_a_hedged_clause_is_not_inverted() -> None:
    messages = [user("Don't refund it yet, I need to ask Ivan if he wants a rebooking instead.")]
    mentioned = "- Ivan is concerned about a possible refund of K1NW8N, which was cancelled by the airline."
    found = check_drift(messages, mentioned)
    assert "constraint_inverted" not in kinds(found) and "constraint_dropped" in kinds(found)
    done = "- K1NW8N was refunded, since it was cancelled by the airline."
    assert "constraint_inverted" in kinds(check_drift(messages, done))


def test_what_someone_has_no_more_of_is_no_rule() -> None:
    """A real 0.5B answer: "Sofia Kim has no other reservations on HAT136." is a (wrong) state, not a prohibition
    nobody gave; "no" that rules something out still is one."""
    messages = [user("Move my reservation NO6JO3 to HAT136 please.")]
    found = check_drift(messages, "## Constraints\n- Sofia Kim has no other reservations on HAT136.")
    assert "constraint_fabricated" not in kinds(found)
    ruled = "## Constraints\n- No refunds for the other reservations."
    assert "constraint_fabricated" in kinds(check_drift(messages, ruled))


def test_a_prohibited_action_named_only_as_what_someone_qualifies_for_is_not_inverted() -> None:
    """A real 1.5B answer: "K1NW8N was cancelled by the airline, and … Ivan D-0 who qualifies for a full refund"
    says what Ivan may get, not that anyone refunds it."""
    messages = [user("Don't refund it yet, I need to ask Ivan if he wants a rebooking instead.")]
    eligible = (
        "- The reservation for K1NW8N was cancelled by the airline, and the passenger record lists Ivan D-0 who"
        " qualifies for a full refund."
    )
    assert "constraint_inverted" not in kinds(check_drift(messages, eligible))
    done = "- The reservation for K1NW8N was cancelled by the airline, and it was refunded in full to Ivan D-0."
    assert "constraint_inverted" in kinds(check_drift(messages, done))


def test_a_constraint_the_summary_inverts_is_not_also_dropped() -> None:
    messages = [
        *ran("Where is the rate table loaded?", "sed -n 1,20p export/rates.py", "12  def load_rate_table(path):"),
        user("Don't touch rates.py in this PR though, open a separate ticket for the cache."),
    ]
    # the function is in the protected file: changing it is changing the file, not leaving it out
    found = check_drift(messages, "- Drop lru_cache from load_rate_table to fix the slowness.")
    assert "constraint_inverted" in kinds(found) and "constraint_dropped" not in kinds(found)


def test_a_passing_runs_output_copied_whole_is_stale_not_a_claim() -> None:
    messages = [
        *ran("Run the tests first.", "pytest -q", "36 passed in 4.30s\n[exit code 0]"),
        call("c2", "terminal", {"cmd": "pytest -q"}),
        result("c2", "FAILED tests/billing/test_discount.py::case_0 - ZeroDivisionError\n1 failed, 35 passed in 4.60s"),
    ]
    copied = "- #2 TOOL RESULT terminal: 36 passed in 4.30s\n[exit code 0]"
    assert "tests_not_passed" not in [f.code for f in check_drift(messages, copied)]
    assert "tests_not_passed" in [f.code for f in check_drift(messages, "- Tests pass now (exit code 0).")]


def test_a_short_approval_is_kept_by_its_proposals_action_done() -> None:
    messages = [
        assistant(
            "刚才的商品编号不对。订单里的机械键盘编号是 6117428830，价格 329 元。"
            "确认退这一件，退款 329 元回到 PayPal 吗？"
        ),
        user("确认，就退这件吧。"),
    ]
    done = "- 已提交退货：#W7730285 的机械键盘（6117428830），329 元将原路退回 PayPal。"
    assert "approval_lost" not in [f.code for f in check_drift(messages, done)]
    named = "## Files and identifiers\n- 6117428830"  # the item named, nothing said of the approval
    assert "approval_lost" in [f.code for f in check_drift(messages, named)]


def test_a_call_line_with_a_claim_does_not_crash_the_check():
    """Issue 34: ``_CALL_LINE`` was defined twice, and the quote check called ``group(1)`` on the one without
    a group: a summary line quoting a tool call raised IndexError, and the check was sent again forever."""
    from agent_compression.drift.legacy import _verbatim

    corpus = "Error: permission denied while reading config.yaml"
    assert _verbatim('- Finding (#1): bash({"cmd": "ls"}): Error: permission denied while reading config.yaml', corpus)
    messages = [
        {"role": "user", "content": "Find out why the deploy fails."},
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [
                {"id": "c1", "type": "function", "function": {"name": "bash", "arguments": '{"cmd": "ls"}'}}
            ],
        },
        {"role": "tool", "tool_call_id": "c1", "content": "Error: permission denied while reading config.yaml"},
    ]
    summary = '- Finding (#1): bash({"cmd": "ls"}): the config is probably broken by the last deploy'
    assert isinstance(check_drift(messages, summary), list)
