from __future__ import annotations

import copy
import json

from agent_compression.config import CompressionConfig
from agent_compression.prune import DUPLICATE_NOTE, describe_tool_result, prune_tool_outputs, truncate_arguments
from tests.compression.builders import assistant, call, calls, result, user

BIG = "\n".join(f"line {i}: some output text here" for i in range(300))
CONFIG = CompressionConfig(context_window_tokens=4_000, prune_protect_tokens=200)


def history_with(*messages: dict) -> list[dict]:
    # a recent, protected tail of small messages after the messages under test
    return [user("start"), *messages, user("recent question"), assistant("recent answer")]


def test_it_describes_old_terminal_output_with_line_count_and_exit_code() -> None:
    line = describe_tool_result("terminal", json.dumps({"command": "make test"}), "a\nb\nexit code: 1")
    assert line == "[pruned] terminal: ran command `make test` - 3 lines output, exit code 1"


def test_it_describes_reads_searches_and_unknown_tools() -> None:
    assert describe_tool_result("read_file", '{"path": "a.py"}', "x\n" * 299 + "x") == (
        "[pruned] read_file: read file `a.py` (599 chars, 300 lines)"
    )
    assert describe_tool_result("search_files", '{"pattern": "TODO"}', "a:1\nb:2\n\nc:3") == (
        "[pruned] search_files: search `TODO` - 3 matches"
    )
    assert (
        describe_tool_result("calendar_list", "{}", "x" * 50)
        == "[pruned] calendar_list: called - 50 chars, 1 lines output: " + "x" * 50
    )


def test_unknown_tools_keep_the_first_line_of_their_output() -> None:
    output = "\n  status: 409 conflict (seat already taken)\n" + "detail line\n" * 200
    line = describe_tool_result("book_seat", '{"id": "A12"}', output)
    assert line.endswith("lines output: status: 409 conflict (seat already taken)")
    assert describe_tool_result("book_seat", "{}", "{" + '"k": "v", ' * 100 + "}").endswith("...")
    assert describe_tool_result("book_seat", "{}", "   \n\n").endswith("lines output")


def test_it_describes_mcp_tools_by_server_and_tool() -> None:
    line = describe_tool_result("mcp__github__get_issue", '{"id": "42"}', "body")
    assert line == "[pruned] mcp github/get_issue: called with `42` - 4 chars, 1 lines output: body"


def test_it_shortens_long_key_arguments() -> None:
    line = describe_tool_result("terminal", json.dumps({"cmd": "echo " + "x" * 500}), "ok")
    assert len(line) < 160 and "..." in line


def test_it_prunes_old_tool_output_and_takes_the_name_from_the_call() -> None:
    history = history_with(calls(call("c1", "read_file", path="src/app.py")), result("c1", BIG))
    pruned = prune_tool_outputs(history, CONFIG)
    assert pruned.messages[2]["content"].startswith("[pruned] read_file: read file `src/app.py`")
    item = pruned.items[0]
    assert (item.index, item.kind, item.tool) == (2, "pruned", "read_file")
    assert item.tokens_after < item.tokens_before


def test_it_leaves_the_protected_tail_alone() -> None:
    history = history_with(calls(call("c1")), result("c1", BIG))
    pruned = prune_tool_outputs(history, CompressionConfig(context_window_tokens=100_000))
    assert pruned.messages == history and pruned.items == []


def test_it_keeps_short_outputs() -> None:
    history = history_with(calls(call("c1")), result("c1", "short output"))
    assert prune_tool_outputs(history, CONFIG).items == []


def test_it_replaces_earlier_identical_results_with_a_pointer_to_the_latest() -> None:
    history = history_with(
        calls(call("c1", "terminal", cmd="ls")),
        result("c1", BIG),
        calls(call("c2", "terminal", cmd="ls -la")),
        result("c2", BIG),
    )
    pruned = prune_tool_outputs(history, CONFIG)
    assert pruned.messages[2]["content"] == DUPLICATE_NOTE
    assert pruned.messages[4]["content"].startswith("[pruned] terminal")
    assert [i.kind for i in pruned.items] == ["deduplicated", "pruned"]


def test_it_deduplicates_reads_of_the_same_arguments() -> None:
    history = history_with(
        calls(call("c1", "read_file", path="a.py")),
        result("c1", BIG),
        calls(call("c2", "read_file", path="a.py")),
        result("c2", BIG + "\nchanged"),
    )
    pruned = prune_tool_outputs(history, CONFIG)
    assert pruned.messages[2]["content"].startswith(DUPLICATE_NOTE + " read_file: read file `a.py`")


def test_it_shortens_long_arguments_inside_the_json() -> None:
    content = 'say "hi"\n\\ ' + "字" * 5_000
    history = history_with(calls(call("c1", "write_file", path="a.py", content=content)), result("c1", "ok"))
    pruned = prune_tool_outputs(history, CONFIG)
    args = json.loads(pruned.messages[1]["tool_calls"][0]["function"]["arguments"])
    assert args["path"] == "a.py"
    assert len(args["content"]) < 2_100 and "chars omitted" in args["content"]
    assert args["content"].startswith('say "hi"\n\\ ')
    assert [i.kind for i in pruned.items] == ["args_truncated"]


def test_it_leaves_unparseable_arguments_alone() -> None:
    assert truncate_arguments("{not json" + "x" * 5_000, 100) is None
    assert truncate_arguments('{"a": "short"}', 100) is None


def test_it_never_mutates_its_input() -> None:
    history = history_with(
        calls(call("c1", "write_file", content="x" * 5_000)), result("c1", BIG), calls(call("c2")), result("c2", BIG)
    )
    before = copy.deepcopy(history)
    pruned = prune_tool_outputs(history, CONFIG)
    assert history == before
    assert pruned.messages is not history and len(pruned.items) == 3


def test_it_reports_token_counts_of_the_pruned_list() -> None:
    history = history_with(calls(call("c1")), result("c1", BIG))
    pruned = prune_tool_outputs(history, CONFIG)
    assert len(pruned.token_counts) == len(history)
    assert pruned.counts()["tokens_saved"] == pruned.tokens_saved > 0


def test_it_stops_once_the_pruned_messages_behind_exceed_the_budget() -> None:
    old = [m for t in range(20) for m in (calls(call(f"c{t}", "terminal", cmd=f"run {t}")), result(f"c{t}", BIG))]
    history = [user("start"), *old, user("latest"), assistant("ok")]
    full = prune_tool_outputs(history, CONFIG)
    partial = prune_tool_outputs(history, CONFIG, stop_after_tokens=100, keep_from=len(history) - 2)
    assert len(full.items) == 20
    assert 0 < len(partial.items) < 20
    assert partial.start > 0 and history[partial.start]["role"] != "tool"
    assert partial.messages[partial.start :] == full.messages[partial.start :]
    assert partial.messages[: partial.start] == history[: partial.start]


def test_it_prunes_at_least_back_to_the_latest_user_message() -> None:
    old = [m for t in range(20) for m in (calls(call(f"c{t}", "terminal", cmd=f"run {t}")), result(f"c{t}", BIG))]
    history = [user("start"), user("latest"), *old, assistant("ok")]
    partial = prune_tool_outputs(history, CONFIG, stop_after_tokens=10, keep_from=1)
    assert partial.start <= 1
    assert len(partial.items) == 20
