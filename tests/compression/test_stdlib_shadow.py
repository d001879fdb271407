"""Python 3.14's standard library owns the name ``compression`` (PEP 784); the library must not need it.

Each check runs in a subprocess started outside the repository, with a regular package named
``compression`` (shaped like the standard library's: ``compression/__init__.py``, ``compression/zstd/``)
first on the path, ahead of site-packages as the standard library is.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
DEMO = ROOT / "console" / "demo" / "sessions" / "coding_export_job.json"


@pytest.fixture
def shadowed(tmp_path: Path) -> tuple[Path, dict[str, str]]:
    package = tmp_path / "stdlib" / "compression"
    (package / "zstd").mkdir(parents=True)
    (package / "__init__.py").write_text('"""Stand-in for Python 3.14\'s compression package."""\nSTDLIB = True\n')
    (package / "zstd" / "__init__.py").write_text("")
    workdir = tmp_path / "elsewhere"
    workdir.mkdir()
    env = {k: v for k, v in os.environ.items() if k not in {"PYTHONPATH", "DJANGO_SETTINGS_MODULE"}}
    env["PYTHONPATH"] = str(tmp_path / "stdlib")
    return workdir, env


def run(args: list[str], cwd: Path, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(args, cwd=cwd, env=env, capture_output=True, text=True, timeout=120, check=False)


def test_it_imports_the_library_beside_a_stdlib_compression(shadowed: tuple[Path, dict[str, str]]) -> None:
    workdir, env = shadowed
    code = (
        "import compression, agent_compression\n"
        "from agent_compression import CompressionConfig, Compressor, ExtractiveSummarizer, check_drift\n"
        "assert compression.STDLIB and 'stdlib' in compression.__file__\n"
        "c = Compressor(CompressionConfig(context_window_tokens=4000), summarizer=ExtractiveSummarizer())\n"
        "msgs = [{'role': 'user', 'content': 'hello ' * 400}, {'role': 'assistant', 'content': 'ok ' * 400}] * 6\n"
        "msgs.append({'role': 'user', 'content': 'and now?'})\n"
        "r = c.compress(msgs)\n"
        "print(r.was_compressed, agent_compression.__file__)\n"
    )
    proc = run([sys.executable, "-c", code], workdir, env)
    assert proc.returncode == 0, proc.stderr
    compressed, path = proc.stdout.split()
    assert compressed == "True" and path.endswith("agent_compression/__init__.py")


def test_its_cli_compresses_a_real_session_beside_a_stdlib_compression(
    shadowed: tuple[Path, dict[str, str]],
) -> None:
    workdir, env = shadowed
    proc = run([sys.executable, "-m", "agent_compression", "compress", str(DEMO), "--window", "8000"], workdir, env)
    assert proc.returncode == 0, proc.stderr
    result = json.loads(proc.stdout)
    assert result["was_compressed"] is True and result["tokens_after"] < result["tokens_before"]


def test_the_console_starts_beside_a_stdlib_compression(shadowed: tuple[Path, dict[str, str]]) -> None:
    workdir, env = shadowed
    proc = run([sys.executable, str(ROOT / "manage.py"), "check"], workdir, env)
    assert proc.returncode == 0, proc.stderr
    assert "System check identified no issues" in proc.stdout
