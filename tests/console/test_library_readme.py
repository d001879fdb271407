"""Every snippet of compression/README.md runs: the Python blocks in order as one script, the reporter
against a live console; the shell lines as commands (``manage.py`` ones in this process's database).

``pip install`` is the one kind of line not run here: installing the folder alone is the shadow test's
(tests/compression/test_stdlib_shadow.py).
"""

from __future__ import annotations

import os
import re
import shlex
import shutil
import subprocess
import sys
from io import StringIO
from pathlib import Path

import pytest
from django.core.management import call_command

from console.apikeys import create_api_key
from console.models import CompressionRun, Session
from tests import samples

README = Path(__file__).resolve().parents[2] / "compression" / "README.md"
FENCE = re.compile(r"^```(\w+)\n(.*?)^```", re.MULTILINE | re.DOTALL)


def blocks(language: str) -> list[str]:
    return [body for lang, body in FENCE.findall(README.read_text(encoding="utf-8")) if lang == language]


def shell_lines() -> list[str]:
    lines = []
    for block in blocks("sh"):
        for line in block.splitlines():
            command = line.split("#", 1)[0].strip()
            if command:
                lines.append(command)
    return lines


@pytest.fixture
def workdir(tmp_path, monkeypatch) -> Path:
    """A runtime host's folder: an echo-agent session file, and a folder of them."""
    sessions = tmp_path / "sessions"
    sessions.mkdir()
    shutil.copy(samples.sample_path(samples.WECHAT), tmp_path / "session.jsonl")
    shutil.copy(samples.sample_path(samples.WECHAT), sessions / "wechat.jsonl")
    monkeypatch.chdir(tmp_path)
    return tmp_path


def test_the_readme_has_the_snippets_this_test_runs():
    assert len(blocks("python")) >= 3
    assert any("ConsoleReporter" in block for block in blocks("python"))
    assert any("import_sessions" in line for line in shell_lines())
    languages = {lang for lang, _ in FENCE.findall(README.read_text(encoding="utf-8"))}
    assert languages == {"sh", "python"}, "a block in another language would not be run"
    assert README.read_text(encoding="utf-8").count("```") == 2 * len(FENCE.findall(README.read_text(encoding="utf-8")))


def test_the_python_snippets_run_in_order_and_report_to_a_live_console(live_server, transactional_db, tmp_path):
    """As a runtime runs them: one script, in a process of its own, reaching the console over HTTP."""
    script = tmp_path / "runtime.py"
    script.write_text("\n\n".join(blocks("python")), encoding="utf-8")
    env = {**os.environ, "CONSOLE_URL": live_server.url}
    env["CONSOLE_API_KEY"] = create_api_key("readme-runtime", "operator")[1]
    done = subprocess.run(
        [sys.executable, str(script)], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr
    assert "sent=1" in done.stdout and "failed=0" in done.stdout, done.stdout  # print(reporter.stats)
    run = CompressionRun.objects.get(trigger="reported")
    assert run.session.key == "coding:job-43" and run.applied and run.idempotency_key


def test_the_shell_lines_run(workdir, transactional_db):
    ran = []
    for line in shell_lines():
        args = shlex.split(line)
        if args[:2] == ["pip", "install"]:
            continue
        if args[:2] == ["python", "manage.py"]:
            out = StringIO()
            call_command(*args[2:], stdout=out)
            ran.append((args[2], out.getvalue()))
            continue
        assert args[:3] == ["python", "-m", "agent_compression"], f"a README line this test cannot run: {line}"
        done = subprocess.run(
            line.replace("python", shlex.quote(sys.executable), 1),
            shell=True,
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert done.returncode == 0, done.stderr
        ran.append(("cli", done.stderr))
    assert [name for name, _ in ran] == ["cli", "import_sessions", "create_api_key"]
    assert "done: imported 1" in ran[1][1]
    assert Session.objects.get(key="wechat:wxid_demo01").message_count > 0
    assert (workdir / "out.json").stat().st_size > 0
