import json
from io import StringIO
from pathlib import Path

import pytest
from django.core.management import CommandError, call_command

from console.models import Message, Session

SAMPLES = Path(__file__).resolve().parents[3] / "shared" / "samples"


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
    lines = (SAMPLES / "wechat_wxid_demo01.jsonl").read_text().splitlines()
    assert session.messages() == [json.loads(line) for line in lines[1:]]


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
