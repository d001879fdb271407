"""Issue 13: salience over recency, a budget that follows the room, one numbering.

Each test is named after what was lost or broken before.
"""

from __future__ import annotations

import re

import pytest

from agent_compression.config import CompressionConfig
from agent_compression.extractive import ExtractiveSummarizer
from agent_compression.facts import (
    FactLimits,
    extract_facts,
    history_indexes,
    render_pinned_facts,
    salient_error_lines,
    shell_written_files,
)
from agent_compression.pipeline import Compressor
from agent_compression.summary_body import finalize_summary
from agent_compression.summary_message import (
    SummaryHeader,
    parse_summary_message,
    render_summary_message,
    summary_history_range,
)
from agent_compression.types import Fact, SummaryRequest

from .builders import assistant, call, calls, result, system, user


def texts(facts: list[Fact], kind: str) -> list[str]:
    return [f.text for f in facts if f.kind == kind]


def pytest_output(error: str, lines: int = 3_000) -> str:
    out = [f"tests/test_m.py::test_{i} PASSED [{i * 100 // lines:3d}%]" for i in range(lines)]
    for n in range(400, lines, 400):
        out[n] = f"=========== {n % 3 + 1} failed, {n} passed in {n / 97:.2f}s ==========="
    out.insert(lines // 2, error)
    out.append(f"=========== 1 failed, {lines} passed in 41.07s ===========")
    return "\n".join(out)


class TestUserInstructions:
    @pytest.mark.parametrize(
        "sentence",
        [
            "After every change, run `pytest -x tests/unit -q` and show me the result.",
            "Please run make lint && make test after each edit.",
            "每次改完都跑一下 `ruff check . && mypy src`。",
            "以后每次修改代码后都要执行 go test ./... -race。",
        ],
    )
    def test_a_command_to_run_after_every_change_is_pinned_whole(self, sentence: str) -> None:
        facts = extract_facts([user("好的。" + sentence if "每" in sentence else "OK. " + sentence)])
        assert sentence in texts(facts, "constraint")

    @pytest.mark.parametrize(
        "sentence",
        [
            "Keep every function under 40 lines.",
            "No function may be longer than 60 lines.",
            "Lines must be at most 100 characters.",
            "每个函数不超过 40 行。",
            "单个文件最多 500 行。",
        ],
    )
    def test_an_english_limit_is_pinned_like_the_chinese_one(self, sentence: str) -> None:
        assert texts(extract_facts([user(sentence)]), "constraint") == [sentence]

    @pytest.mark.parametrize(
        "sentence",
        [
            "From now on, write all commit messages in English.",
            "以后都用中文写注释。",
            "从现在开始，所有新函数都要加类型注解。",
        ],
    )
    def test_a_standing_instruction_is_pinned(self, sentence: str) -> None:
        assert texts(extract_facts([user(sentence)]), "constraint") == [sentence]

    def test_a_command_with_dots_is_not_split_into_sentences(self) -> None:
        sentence = "Please run go test ./... -race after each edit."
        assert texts(extract_facts([user(sentence)]), "constraint") == [sentence]

    def test_a_yes_is_an_approval_and_plain_filler_is_not(self) -> None:
        facts = extract_facts(
            [user("可以，就改订单 ABC123 吧。"), user("OK, next step please."), user("好的，下一步。")]
        )
        assert texts(facts, "approval") == ["可以，就改订单 ABC123 吧。"]

    @pytest.mark.parametrize(
        "sentence", ["Thanks for all your help!", "Whenever you're ready.", "Sure, it's sofia_kim_7287."]
    )
    def test_small_talk_is_no_constraint_or_approval(self, sentence: str) -> None:
        facts = extract_facts([user(sentence)])
        assert texts(facts, "constraint") == [] and texts(facts, "approval") == []

    def test_a_yes_that_grants_something_is_an_approval(self) -> None:
        assert texts(extract_facts([user("Yes, please cancel the reservation S61CZX.")]), "approval") == [
            "Yes, please cancel the reservation S61CZX."
        ]

    def test_pasted_output_in_a_user_turn_is_not_mined_for_constraints(self) -> None:
        lint = "\n".join(f"pkg/m{i}.py:1:0: W0703: Catching too general exception Exception" for i in range(60))
        facts = extract_facts([user("The last command timed out.\n" + lint + "\nPlease try again.")])
        assert len(texts(facts, "constraint")) <= 1
        assert len(texts(facts, "error")) <= 3

    def test_a_long_spec_from_a_person_keeps_every_requirement(self) -> None:
        rules = [f"- Do not rename the column field_{n}." for n in range(35)]
        facts = extract_facts([user("Requirements for the migration:\n" + "\n".join(rules) + "\nThanks.")])
        assert texts(facts, "constraint") == rules


class TestErrors:
    def test_an_exception_in_the_middle_of_long_test_output_is_found(self) -> None:
        error = "sqlite3.OperationalError: no such table: invoices_line"
        output = pytest_output(error)
        facts = extract_facts([calls(call("c1", "terminal", command="pytest -q")), result("c1", output)])
        assert error in texts(facts, "error")

    @pytest.mark.parametrize(
        "error",
        [
            "django.core.exceptions.ImproperlyConfigured: Requested setting DATABASES, but settings are not set.",
            'psycopg.errors.UniqueViolation: duplicate key value violates unique constraint "users_email_key"',
            "invoices.models.Invoice.DoesNotExist: Invoice matching query does not exist.",
        ],
    )
    def test_an_exception_class_named_neither_error_nor_exception_is_found(self, error: str) -> None:
        # was: the literal pre-filter knew only *Error / *Exception, so these were never seen (held-out finding)
        lines = salient_error_lines(pytest_output(error), 3)
        assert lines[0] == error

    def test_counters_that_differ_only_in_numbers_count_once_and_rank_below_exceptions(self) -> None:
        lines = salient_error_lines(pytest_output("E       AssertionError: assert 120 == 100"), 3)
        assert lines[0] == "E       AssertionError: assert 120 == 100"
        assert sum("failed," in line for line in lines) == 1

    def test_a_prefixed_traceback_gives_its_exception_line(self) -> None:
        text = 'STDERR: Traceback (most recent call last):\n  File "x.py", line 3\nIndentationError: unexpected indent'
        assert salient_error_lines(text) == ["IndentationError: unexpected indent"]

    def test_a_later_success_resolves_an_error(self) -> None:
        messages = [
            calls(call("c1", "terminal", command="pytest")),
            result("c1", "FAILED tests/t.py::test_a - KeyError: 'x'"),
            calls(call("c2", "terminal", command="pytest")),
            result("c2", "3 passed in 0.1s"),
        ]
        body = summarize(messages)
        assert re.search(r"\(#1\) resolved later \(#3\): FAILED tests/t.py::test_a", body)


class TestFiles:
    @pytest.mark.parametrize(
        ("command", "written"),
        [
            ("cat > export_utils.py <<'EOF'\nx = 1 > 0\nEOF", ["export_utils.py"]),
            ("cat <<'EOF' > src/rounding.py\nEOF", ["src/rounding.py"]),
            ("sed -i 's/a/b/' refund_service.py", ["refund_service.py"]),
            ("echo 'T = 30' | tee -a settings_local.py", ["settings_local.py"]),
            ("printf 'V = 1\\n' > pkg/version.py 2>&1", ["pkg/version.py"]),
            ("python run.py > /dev/null && grep -rn x .", []),
        ],
    )
    def test_files_written_by_shell_commands_are_seen(self, command: str, written: list[str]) -> None:
        assert shell_written_files(command) == written

    def test_listings_never_evict_edits(self) -> None:
        messages = [calls(call("c0", "bash", command="sed -i 's/a/b/' export_utils.py")), result("c0", "")]
        for n in range(1, 40):
            listing = "\n".join(f"pkg/mod_{n}/f_{i}.py:3: x" for i in range(3))
            messages += [calls(call(f"c{n}", "bash", command="grep -rn x pkg")), result(f"c{n}", listing)]
        paths = texts(extract_facts(messages, limits=FactLimits(path=5)), "path")
        assert "export_utils.py" in paths

    def test_an_early_read_outranks_later_listings(self) -> None:
        messages = [calls(call("c0", "read_file", path="src/billing/invoice.py")), result("c0", "code")]
        for n in range(1, 40):
            messages += [calls(call(f"c{n}", "search", query="x")), result(f"c{n}", f"pkg/a_{n}/b.py:1: x")]
        assert "src/billing/invoice.py" in texts(extract_facts(messages, limits=FactLimits(path=5)), "path")

    def test_ids_in_tool_arguments_are_pinned(self) -> None:
        messages = [calls(call("c0", "get_reservation_details", reservation_id="OBUT9V")), result("c0", "{}")]
        assert "OBUT9V" in texts(extract_facts(messages), "identifier")


def summarize(messages: list[dict], **request: object) -> str:
    facts = extract_facts(messages)
    options: dict = {"max_tokens": 2_000, **request}
    outcome = ExtractiveSummarizer().summarize(SummaryRequest(messages=messages, start_index=0, facts=facts, **options))
    assert outcome.text is not None
    return outcome.text


class TestSummaryProse:
    def test_every_user_turn_in_the_middle_is_kept(self) -> None:
        turns = [f"Please also check the worker number {n} and tell me what it printed." for n in range(12)]
        messages = []
        for n, turn in enumerate(turns):
            messages += [user(turn), calls(call(f"c{n}", "terminal", cmd="ls")), result(f"c{n}", "x" * 400)]
        body = summarize(messages)
        assert all(turn in body for turn in turns)

    def test_long_templated_turns_differing_only_in_numbers_count_once(self) -> None:
        prompt = "Please always provide EXACTLY ONE action in triple backticks, found {n} actions. " + "Format. " * 30
        messages = []
        for n in range(2, 6):
            messages += [user(prompt.format(n=n)), assistant(f"Sorry, attempt {n}.")]
        body = summarize(messages)
        prose = body[: body.index("## Pinned facts")]
        assert prose.count("Please always provide EXACTLY ONE action") == 1
        assert "found 5 actions. Format." in prose

    def test_distinct_user_turns_outlive_tool_results_in_the_trim(self) -> None:
        messages = []
        for n in range(30):
            messages += [
                user(f"Look at service {chr(65 + n % 26)}{n} next, carefully please."),
                calls(call(f"c{n}", "terminal", cmd=f"cat log_{n}")),
                result(f"c{n}", f"log line for {n} " * 20),
            ]
        for budget in (500, 700, 900):
            body = summarize(messages, max_tokens=budget)
            assert "Look at service D29 next, carefully please." in body
            kept = sum(f"Look at service {chr(65 + n % 26)}{n} next" in body for n in range(30))
            if kept < 30:  # a user turn went: every tool-derived line went before it
                assert "## Key tool results" not in body and "## Files and identifiers" not in body

    def test_a_long_user_turn_keeps_its_head_and_tail(self) -> None:
        turn = "Start here. " + "filler words " * 200 + "Finish with the report."
        body = summarize([user(turn), assistant("ok")])
        assert "Start here." in body and "Finish with the report." in body and " … " in body


class TestTrim:
    def test_the_trim_never_cuts_a_line_or_leaves_a_fragment(self) -> None:
        # what a real model wrote: nested bullets; the old trim left "- **Tool" fragments
        prose = "## Key tool results\n" + "\n".join(
            f"- **Tool result {n}**: the run printed a long line of output number {n}\n"
            f"  - detail {n}: more words about it here"
            for n in range(40)
        )
        prose += "\n\n## Progress and next steps\n- User request (#3): keep the export job running."
        body = finalize_summary(prose, [Fact("constraint", "Do not deploy.", 2)], 300)
        for line in body.splitlines():
            if line.startswith("  - detail"):
                n = line.split()[2].rstrip(":")
                assert f"- **Tool result {n}**:" in body  # a continuation never loses its bullet
        assert "- User request (#3): keep the export job running." in body
        assert "- [constraint] (#2) Do not deploy." in body

    def test_pinned_facts_have_their_own_share(self) -> None:
        prose = "## Decisions\n" + "\n".join(
            f"- Finding (#{n}): a long finding sentence number {n} here" for n in range(60)
        )
        facts = [Fact("path", f"src/file_{n}.py", n, "assistant") for n in range(80)]
        body = finalize_summary(prose, facts, 600)
        pinned = body[body.index("## Pinned facts") :]
        assert len(pinned.splitlines()) > 10 and "## Decisions" in body


class TestBudget:
    def test_the_budget_follows_the_middle_and_the_room(self) -> None:
        config = CompressionConfig(context_window_tokens=16_000)
        assert config.summary_budget(middle_tokens=4_000) == 2_000  # the floor, but at most half the middle
        assert config.summary_budget(middle_tokens=1_000) == 500
        assert config.summary_budget(middle_tokens=100_000) == 3_200  # the ceiling: 20% of the window
        assert config.summary_budget(middle_tokens=20_000, pinned_tokens=400) == 2_900  # pinned get their share
        assert config.summary_budget(middle_tokens=100_000, free_tokens=1_200) == 1_200  # never past the room

    def test_summary_max_tokens_stays_an_override(self) -> None:
        config = CompressionConfig(context_window_tokens=16_000, summary_max_tokens=900)
        assert config.summary_budget(middle_tokens=100_000, free_tokens=5_000) == 900

    def test_the_pipeline_uses_the_room_under_the_trigger(self) -> None:
        history = [system(), user("Fix the export job.")]
        for n in range(80):
            history += [
                user(f"Check worker {n}; do not restart worker {n}."),
                calls(call(f"c{n}", "terminal", cmd=f"tail worker-{n}.log")),
                result(f"c{n}", f"worker {n} processed rows\n" * 40),
                assistant(f"Worker {n} looks fine."),
            ]
        history.append(user("What next?"))
        out = Compressor(CompressionConfig(context_window_tokens=16_000)).compress(history)
        assert out.was_compressed and out.summary is not None
        summary_tokens = out.summary.output_tokens
        assert summary_tokens > 800  # the old cap at 16k
        assert out.tokens_after < CompressionConfig(context_window_tokens=16_000).trigger_tokens


def summary_fields(messages: list[dict]) -> dict[str, str]:
    parsed = next(p for m in messages if (p := parse_summary_message(m)) is not None)
    return parsed[0]


class TestNumbering:
    def header(self, start: int, end: int, history: tuple[int, int] | None) -> SummaryHeader:
        return SummaryHeader("sum_1", "extractive", None, "2026-12-01T00:00:00+00:00", (start, end), None, history)

    def test_history_indexes_continue_after_an_earlier_summary(self) -> None:
        summary = render_summary_message("## Pinned facts\n- (none)", self.header(2, 50, (2, 49)))
        messages = [system(), user("task"), summary, assistant("Understood."), user("next"), assistant("done")]
        messages[3] = {
            "role": "assistant",
            "content": "Understood. I will treat the summary above as background only and continue from the most "
            "recent messages.",
        }
        assert history_indexes(messages) == [0, 1, None, None, 50, 51]

    def test_an_old_summary_without_the_field_uses_its_archived_range(self) -> None:
        summary = render_summary_message("body", self.header(3, 40, None))
        assert summary_history_range(summary) == (3, 39)
        assert "history=" not in summary["content"].splitlines()[0]

    def test_carried_facts_and_lines_keep_their_history_index_after_a_second_compression(self) -> None:
        config = CompressionConfig(context_window_tokens=6_000)
        history = [system(), user("Fix the export job.")]
        for n in range(60):
            history += [
                user(f"Look at module {n}." if n != 5 else "Never run migrations against production."),
                calls(call(f"c{n}", "terminal", cmd=f"cat module_{n}.txt")),
                result(f"c{n}", f"module {n} content line\n" * 30),
                assistant(f"Module {n} read."),
            ]
        constraint_index = 2 + 5 * 4
        assert history[constraint_index]["content"] == "Never run migrations against production."
        first = Compressor(config).compress(history)
        assert first.was_compressed and first.archive is not None
        assert summary_fields(first.messages)["history"].startswith(f"{first.archive.start}-")
        # the session goes on: more turns appended to the compressed history, then a second compression
        grown = list(first.messages)
        appended_from = first.archive.end
        for n in range(60, 120):
            grown += [
                user(f"Look at module {n}." if n != 70 else "Do not delete the backup bucket."),
                calls(call(f"c{n}", "terminal", cmd=f"cat module_{n}.txt")),
                result(f"c{n}", f"module {n} content line\n" * 30),
                assistant(f"Module {n} read."),
            ]
        # where "Do not delete the backup bucket." sits in the never-compressed history
        full_index = len(history) + 10 * 4
        second = Compressor(config).compress(grown)
        assert second.was_compressed and appended_from > 0
        by_text = {f.text: f.source_index for f in second.facts}
        assert by_text["Never run migrations against production."] == constraint_index
        assert by_text["Do not delete the backup bucket."] == full_index
        body = second.summary_text or ""
        assert f"(#{constraint_index}) Never run migrations against production." in body
        assert f"(#{full_index}) Do not delete the backup bucket." in body
        # every #N in the second summary lies inside the history it stands for
        low, high = (int(x) for x in summary_fields(second.messages)["history"].split("-"))
        assert low == first.archive.start
        assert all(low <= int(n) <= high for n in re.findall(r"#(\d+)", body))


def test_render_pinned_facts_round_trips_indexes() -> None:
    from agent_compression.facts import pinned_facts_of

    facts = [Fact("constraint", "先不要修改部署脚本", 12), Fact("path", "a/b.py", 40, "assistant")]
    assert [(f.text, f.source_index) for f in pinned_facts_of(render_pinned_facts(facts))] == [
        ("先不要修改部署脚本", 12),
        ("a/b.py", 40),
    ]


class TestDriftOnKeptUserTurns:
    def test_a_constraint_restated_verbatim_in_a_kept_user_turn_is_not_inverted(self) -> None:
        from agent_compression import check_drift

        original = [user("Continue. Stop editing the generated files in build/.")]
        summary = (
            "## Progress and next steps\n- User request (#0): Continue. Stop editing the generated files in build/."
            "\n\n## Pinned facts\n- [constraint] (#0) Stop editing the generated files in build/."
        )
        assert check_drift(original, summary) == []

    def test_a_kept_user_limit_is_no_evidence_against_another_limit(self) -> None:
        from agent_compression import check_drift

        original = [user("Keep every function under 40 lines."), user("No function may be longer than 40 lines.")]
        summary = (
            "## Progress and next steps\n- User request (#1): No function may be longer than 40 lines.\n\n"
            "## Pinned facts\n- [constraint] (#0) Keep every function under 40 lines.\n"
            "- [constraint] (#1) No function may be longer than 40 lines."
        )
        assert [f.kind for f in check_drift(original, summary)] == []


def test_a_models_segment_is_labelled_with_history_indexes() -> None:
    from agent_compression.serialize import serialize_segment

    header = SummaryHeader("sum_1", "extractive", None, "2026-12-01T00:00:00+00:00", (3, 60), None, (3, 59))
    segment = [render_summary_message("## Decisions\n- (#12) kept", header), user("next step"), assistant("done")]
    text = serialize_segment(segment, 3, 2_000, indexes=history_indexes(segment, 3))
    assert "#3-#59 EARLIER SUMMARY" in text
    assert "#60 USER" in text and "#61 ASSISTANT" in text


def test_history_position_finds_a_message_or_the_summary_standing_for_it() -> None:
    from agent_compression.facts import history_position

    header = SummaryHeader("sum_1", "extractive", None, "2026-12-01T00:00:00+00:00", (3, 60), None, (3, 59))
    archive = [render_summary_message("body", header), user("next step"), assistant("done")]
    assert history_position(archive, 61, start=3) == 2
    assert history_position(archive, 20, start=3) == 0  # inside the earlier summary
    assert history_position(archive, 99, start=3) is None


def test_a_sed_substitution_is_not_a_path() -> None:
    from agent_compression.facts import find_paths

    assert find_paths("perl -pi -e 's/old_name/new_name/g' x.py and sed 's/a/b/' src/a/b.py") == ["src/a/b.py"]


def test_a_models_2900_character_summary_survives_whole_at_8k() -> None:
    # what Qwen2.5-Coder 1.5B wrote: the old 400-token cap at 8k cut it to ~450 characters
    prose = "\n".join(
        [
            "## Decisions",
            *[
                f"- **Decision {n}**: switch the export batch size to {n * 500} rows because of timeouts"
                for n in range(8)
            ],
            "## Key tool results",
            *[f"- **Tool result {n}**: pytest printed 3 failures in tests/test_export_{n}.py" for n in range(12)],
            "## Progress and next steps",
            *[f"- Step {n}: rerun the nightly export for shard {n} and compare the row counts" for n in range(12)],
        ]
    )
    assert 2_400 <= len(prose) <= 3_200
    facts = [Fact("constraint", "Do not deploy on Friday.", 4)]
    config = CompressionConfig(context_window_tokens=8_000)
    budget = config.summary_budget(middle_tokens=40_000, free_tokens=3_000, pinned_tokens=20)
    body = finalize_summary(prose, facts, budget)
    assert all(line in body for line in prose.splitlines())
    assert "- [constraint] (#4) Do not deploy on Friday." in body
