"""The repository stands alone: nothing tracked points at a machine it was made on."""

from __future__ import annotations

import ast
import re
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
#: paths that exist only on someone's machine (built from parts so this file does not match itself)
MACHINE_PATHS = [p.encode() for p in ("/" + "work/", ".." + "/shared", "/" + "root/", "/" + "home/", "/" + "Users/")]


def tracked_files() -> list[str]:
    result = subprocess.run(["git", "ls-files", "-z"], cwd=ROOT, capture_output=True, check=False)
    if result.returncode != 0:
        pytest.fail(f"git ls-files failed (the suite runs in a git checkout): {result.stderr.decode()}")
    return [name for name in result.stdout.decode().split("\0") if name]


def test_no_tracked_file_names_a_machine_path():
    found = []
    for name in tracked_files():
        path = ROOT / name
        if not path.is_file():  # deleted in the working tree, not yet committed
            continue
        data = path.read_bytes()
        for line_number, line in enumerate(data.splitlines(), start=1):
            for pattern in MACHINE_PATHS:
                if pattern in line:
                    found.append(f"{name}:{line_number}: {pattern.decode()}")
    assert found == []


def test_no_coverage_data_is_tracked():
    assert not [name for name in tracked_files() if Path(name).name.startswith(".coverage")]


def test_the_demo_sessions_are_what_make_demo_writes():
    """The committed files and their generator agree (edit make_demo.py, then run it)."""
    from console.demo.make_demo import render
    from tests.samples import SAMPLES

    written = render()
    assert sorted(written) == sorted(p.name for p in SAMPLES.glob("*.json*"))
    for name, text in written.items():
        assert (SAMPLES / name).read_text(encoding="utf-8") == text, f"{name}: run console/demo/make_demo.py"
    assert sum(len(text.encode()) for text in written.values()) < 2_000_000  # a few MB at most


# --------------------------------------------------------------------------- docs that match the tree

#: folders the README names that are made by running things (not tracked): the venv, the database, screenshots
GENERATED = (".venv/", "var/", "artifacts/")
#: a backticked path: folders and file names with an extension the repository has (a URL, a command or a
#: placeholder like ``path/to/sessions/`` is not one)
PATH_LIKE = re.compile(
    r"^(?:\.?[\w.-]+/)*[\w.-]+(?:/|\.(?:py|md|toml|ya?ml|json|jsonl|cfg|ini|txt|sh|example|html|css|js|po|svg))$"
)
#: where a path in a docstring or comment may start: the repository's top folders
TOP = "console|compression|agent_compression|templates|static|tests|bench|scripts"
CITED = re.compile(rf"(?<![\w-])((?:{TOP})/[\w./-]*\w)")


def resolves(path: str) -> bool:
    """``path`` exists in the repository (the library's modules are also named from inside ``compression/``)."""
    return path.startswith(GENERATED) or (ROOT / path).exists() or (ROOT / "compression" / path).exists()


def backticked_paths(text: str) -> set[str]:
    found = set()
    for m in re.finditer(r"`([^`\n]+)`", text):
        token = m.group(1).strip()
        if " " in token or token.startswith(("/", "http", "-", "~", "$", "path/to")) or not PATH_LIKE.match(token):
            continue
        if "/" in token or token.endswith((".py", ".md", ".toml", ".yml", ".example")):
            found.add(token)
    return found


def layout_paths(text: str) -> set[str]:
    """The files and folders the README's layout tree names, each joined to the folders above it."""
    block = text.split("## Layout", 1)[1].split("```", 2)[1]
    found, stack = set(), []  # stack: (indent, folder)
    for line in block.splitlines():
        m = re.match(r"^(\s*)([\w.-]+(?:/[\w.-]+)*/?),?\s{2,}", line)
        if not m or not (m.group(2).endswith("/") or "." in m.group(2)):
            continue
        indent, name = len(m.group(1)), m.group(2)
        while stack and stack[-1][0] >= indent:
            stack.pop()
        path = "".join(folder for _, folder in stack) + name
        found.add(path)
        if name.endswith("/"):
            stack.append((indent, name))
    return found


def test_every_path_the_readme_names_exists():
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    cited = backticked_paths(text)
    assert {"console/services/queue.py", "console/roles.py", ".env.example"} <= cited  # the check sees them
    assert sorted(p for p in cited if not resolves(p)) == []
    layout = layout_paths(text)
    assert {"console/urls.py", "console/services/queue.py", "console/diff/", "static/"} <= layout
    assert sorted(p for p in layout if not resolves(p)) == []


def test_every_path_settings_models_and_services_cite_exists():
    files = [ROOT / "console/settings.py", ROOT / "console/models.py"]
    files += sorted((ROOT / "console/services").glob("*.py"))
    missing = []
    for path in files:
        for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), start=1):
            missing += [f"{path.relative_to(ROOT)}:{number}: {p}" for p in CITED.findall(line) if not resolves(p)]
    assert missing == []


def test_the_api_routers_do_not_import_their_own_package():
    """``console/api/__init__.py`` builds the API from the routers: a router importing it back is a cycle."""
    found = []
    for path in sorted((ROOT / "console/api/routers").glob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.ImportFrom) and (
                (node.level == 2 and node.module is None) or (node.level == 0 and node.module == "console.api")
            ):
                found.append(f"{path.name}:{node.lineno}")
    assert found == []
