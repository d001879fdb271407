from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from agent_compression.cli import main
from agent_compression.session_file import InputError, load_session
from tests.compression.builders import session
from tests.fakes.openai_server import FakeOpenAIServer


def write(tmp_path: Path, name: str, text: str) -> str:
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    return str(path)


def test_it_compresses_a_json_array(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = write(tmp_path, "in.json", json.dumps(session(30)))
    assert main(["compress", path, "--window", "4000", "--focus", "tests"]) == 0
    out, err = capsys.readouterr()
    result = json.loads(out)
    assert result["was_compressed"] is True
    assert result["messages"][-1] == session(30)[-1]
    assert err.startswith("tokens ") and "summary ok" in err and err.count("\n") == 1


def test_it_reads_an_echo_agent_session_file(tmp_path: Path) -> None:
    lines = [json.dumps({"_type": "metadata", "key": "wechat:x", "last_consolidated": 4})]
    lines += [json.dumps(m, ensure_ascii=False) for m in session(3)]
    messages, metadata = load_session("\n".join(lines) + "\n")
    assert messages == session(3)
    assert metadata["last_consolidated"] == 4


@pytest.mark.parametrize(
    ("text", "problem"),
    [
        ("", "empty"),
        ("[1, 2", "invalid JSON"),
        ('{"role": "user"}\n{oops', "line 2"),
        ("[1]", "message 0 is not a JSON object"),
        ('[{"content": "x"}]', "no string 'role'"),
        ('{"a": 1}', "no string 'role'"),
    ],
)
def test_it_names_the_problem_in_malformed_input(text: str, problem: str) -> None:
    with pytest.raises(InputError, match=problem):
        load_session(text)


def test_it_exits_2_without_a_traceback_on_bad_input(tmp_path: Path) -> None:
    path = write(tmp_path, "bad.json", "[not json")
    proc = subprocess.run(
        [sys.executable, "-m", "agent_compression", "compress", path], capture_output=True, text=True, check=False
    )
    assert proc.returncode == 2
    assert proc.stderr.startswith("error: invalid JSON") and "Traceback" not in proc.stderr
    assert proc.stdout == ""


def test_it_exits_2_for_a_missing_file(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["compress", "/nonexistent/file.json"]) == 2
    assert "error:" in capsys.readouterr().err


def test_it_rejects_a_window_too_small(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = write(tmp_path, "in.json", json.dumps(session(2)))
    assert main(["compress", path, "--window", "10"]) == 2
    assert "context_window_tokens" in capsys.readouterr().err


def test_it_summarizes_through_an_openai_compatible_endpoint(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], fake_openai: FakeOpenAIServer
) -> None:
    path = write(tmp_path, "in.json", json.dumps(session(30)))
    argv = ["compress", path, "--window", "4000", "--openai-base-url", fake_openai.base_url, "--model", "fake-model"]
    assert main(argv) == 0
    out, err = capsys.readouterr()
    result = json.loads(out)
    assert result["summary"]["generator"] == "openai"
    assert result["summary"]["model"] == "fake-model"
    assert len(fake_openai.requests) == 1
    assert "summary ok" in err


def test_it_reports_a_failing_endpoint_as_degraded_not_as_a_crash(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], fake_openai: FakeOpenAIServer
) -> None:
    fake_openai.script(default="500")
    path = write(tmp_path, "in.json", json.dumps(session(30)))
    assert main(["compress", path, "--window", "4000", "--openai-base-url", fake_openai.base_url]) == 0
    out, err = capsys.readouterr()
    result = json.loads(out)
    assert result["was_compressed"] is True
    assert result["summary_text"] is None
    assert "summary_failed" in err
