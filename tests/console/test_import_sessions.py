import json
from io import StringIO

import pytest
from django.core.management import CommandError, call_command

from console.models import Message, Session
from tests.samples import SAMPLES, WECHAT, sample_messages

#: the session files in the samples directory (its README.md is not one)
SESSION_FILES = sorted(SAMPLES.glob("*.json*"))


def run_import(*paths, **options):
    out, err = StringIO(), StringIO()
    try:
        call_command("import_sessions", *map(str, paths), stdout=out, stderr=err, **options)
    except CommandError as exc:
        return out.getvalue(), err.getvalue(), exc
    return out.getvalue(), err.getvalue(), None


@pytest.mark.django_db
def test_it_imports_the_samples_directory():
    out, err, error = run_import(SAMPLES)
    assert error is None, err
    assert "imported wechat_wxid_demo01.jsonl: wechat:wxid_demo01" in out
    assert "ignored  README.md" in out
    session = Session.objects.get(key="wechat:wxid_demo01")
    assert session.channel == "wechat"
    assert session.message_count == 64
    assert session.token_count > 1000
    assert session.messages() == sample_messages(WECHAT)
    assert Session.objects.count() == len(SESSION_FILES) >= 5


@pytest.mark.django_db
def test_it_stores_identical_messages_once(tmp_path):
    same = {"role": "user", "content": "same"}
    (tmp_path / "a.json").write_text(json.dumps([same, same]))
    (tmp_path / "b.json").write_text(json.dumps([same]))
    run_import(tmp_path)
    assert Message.objects.count() == 1
    assert Session.objects.get(key="import:a").message_count == 2


@pytest.mark.django_db
def test_it_reports_a_broken_line_and_writes_nothing_for_that_file(tmp_path):
    lines = ['{"_type": "metadata", "key": "t:bad"}', '{"role": "user", "content": "ok"}', "{oops"]
    (tmp_path / "bad.jsonl").write_text("\n".join(lines) + "\n")
    (tmp_path / "good.json").write_text(json.dumps([{"role": "user", "content": "fine"}]))
    out, err, error = run_import(tmp_path)
    assert "failed   bad.jsonl: line 3 is not valid JSON" in err
    assert "imported good.json" in out
    assert error is not None and "1 of 2" in str(error)
    assert not Session.objects.filter(key="t:bad").exists()


@pytest.mark.django_db
@pytest.mark.parametrize(
    ("messages", "problem"),
    [
        ([{"role": "wizard", "content": "x"}], "unknown role 'wizard'"),
        ([{"role": "tool", "content": "x"}], "without tool_call_id"),
        (["just a string"], "is not a JSON object"),
    ],
)
def test_it_rejects_broken_messages_by_name(tmp_path, messages, problem):
    (tmp_path / "x.json").write_text(json.dumps(messages))
    _, err, error = run_import(tmp_path / "x.json")
    assert problem in err
    assert error is not None
    assert Session.objects.count() == 0
    assert Message.objects.count() == 0


@pytest.mark.django_db
def test_it_skips_existing_sessions_when_asked():
    run_import(SAMPLES)
    out, _, error = run_import(SAMPLES, skip_existing=True)
    assert error is None
    assert "skipped  wechat_wxid_demo01.jsonl" in out


@pytest.mark.django_db
def test_it_reports_an_existing_session_as_failed_without_skip_existing():
    run_import(SAMPLES)
    out, err, error = run_import(SAMPLES)
    assert "failed   wechat_wxid_demo01.jsonl: session 'wechat:wxid_demo01' already exists" in err
    assert "--skip-existing" in err
    n = len(SESSION_FILES)
    assert error is not None and f"{n} of {n}" in str(error)
    assert Session.objects.count() == n


@pytest.mark.django_db
def test_it_reports_every_file_and_a_total(tmp_path):
    (tmp_path / "ok.json").write_text(json.dumps([{"role": "user", "content": "fine"}]))
    (tmp_path / "bad.json").write_text("[")
    (tmp_path / "notes.txt").write_text("hello")
    (tmp_path / "nested").mkdir()
    (tmp_path / "nested" / "deep.json").write_text(json.dumps([{"role": "user", "content": "deep"}]))
    out, err, error = run_import(tmp_path, tmp_path / "ok.json")
    assert "imported ok.json" in out
    assert "failed   bad.json: invalid JSON" in err
    assert "ignored  notes.txt: not a .jsonl or .json file" in out
    assert "ignored  nested/: a directory (directories are not searched)" in out
    assert "ignored  ok.json: named twice" in out
    assert "done: imported 1, skipped 0, failed 1, ignored 3" in out
    assert error is not None and "1 of 2" in str(error)


@pytest.mark.django_db
def test_it_says_when_a_directory_is_empty(tmp_path):
    out, _, error = run_import(tmp_path)
    assert error is None
    assert f"ignored  {tmp_path}: the directory is empty" in out


@pytest.mark.django_db
def test_it_refuses_a_missing_path_before_importing_anything(tmp_path):
    (tmp_path / "ok.json").write_text(json.dumps([{"role": "user", "content": "fine"}]))
    _, _, error = run_import(tmp_path / "ok.json", tmp_path / "missing.json")
    assert error is not None and "missing.json does not exist" in str(error)
    assert Session.objects.count() == 0


@pytest.mark.django_db
@pytest.mark.parametrize("value", [32000, "32000", 32000.0])
def test_it_takes_the_context_window_from_the_header(tmp_path, value):
    header = {"_type": "metadata", "key": "t:window", "context_window_tokens": value, "last_consolidated": 1}
    lines = [header, {"role": "user", "content": "一"}, {"role": "assistant", "content": "二"}]
    (tmp_path / "w.jsonl").write_text("\n".join(json.dumps(line, ensure_ascii=False) for line in lines))
    _, err, error = run_import(tmp_path / "w.jsonl")
    assert error is None, err
    session = Session.objects.get(key="t:window")
    assert session.context_window_tokens == 32000
    assert session.last_consolidated == 1


@pytest.mark.django_db
def test_it_takes_the_context_window_from_a_session_object(tmp_path):
    data = {"key": "t:obj", "context_window_tokens": 8000, "messages": [{"role": "user", "content": "x"}]}
    (tmp_path / "o.json").write_text(json.dumps(data))
    run_import(tmp_path / "o.json")
    assert Session.objects.get(key="t:obj").context_window_tokens == 8000


@pytest.mark.django_db
def test_it_keeps_the_default_context_window_without_one(tmp_path):
    (tmp_path / "d.json").write_text(json.dumps([{"role": "user", "content": "x"}]))
    run_import(tmp_path / "d.json")
    assert Session.objects.get(key="import:d").context_window_tokens == 128_000


@pytest.mark.django_db
@pytest.mark.parametrize(
    ("header", "problem"),
    [
        ({"context_window_tokens": "32k"}, "context_window_tokens is not a whole number: '32k'"),
        ({"context_window_tokens": True}, "context_window_tokens is not a whole number: True"),
        ({"context_window_tokens": 1.5}, "context_window_tokens is not a whole number: 1.5"),
        ({"context_window_tokens": 100}, "context_window_tokens must be between 256 and 10000000"),
        ({"context_window_tokens": 2**40}, "context_window_tokens must be between 0 and 2147483647"),
        ({"last_consolidated": 2.5}, "last_consolidated is not a whole number: 2.5"),
        ({"last_consolidated": -1}, "last_consolidated must be between 0"),
        ({"last_consolidated": 9}, "last_consolidated must be between 0 and the number of messages"),
        ({"metadata": ["not", "an", "object"]}, "metadata must be a JSON object"),
    ],
)
def test_it_refuses_a_bad_header_by_name(tmp_path, header, problem):
    lines = [{"_type": "metadata", "key": "t:bad", **header}, {"role": "user", "content": "x"}]
    (tmp_path / "h.jsonl").write_text("\n".join(json.dumps(line) for line in lines))
    _, err, error = run_import(tmp_path / "h.jsonl")
    assert problem in err
    assert error is not None
    assert Session.objects.count() == 0


@pytest.mark.django_db
def test_it_reports_what_the_database_refuses_and_goes_on(tmp_path, monkeypatch):
    from django.db import DataError

    import console.management.commands.import_sessions as command

    real = command.create_session

    def refuse_nul(data, user=None):
        if any("\x00" in str(m.get("content")) for m in data.messages):
            raise DataError("PostgreSQL text fields cannot contain NUL (0x00) bytes")
        return real(data, user)

    monkeypatch.setattr(command, "create_session", refuse_nul)
    (tmp_path / "a.json").write_text(json.dumps([{"role": "tool", "tool_call_id": "c", "content": "bin\u0000ary"}]))
    (tmp_path / "b.json").write_text(json.dumps([{"role": "user", "content": "fine"}]))
    out, err, error = run_import(tmp_path)
    assert "failed   a.json: the database refused it: PostgreSQL text fields cannot contain NUL" in err
    assert "imported b.json" in out
    assert error is not None and "1 of 2" in str(error)
