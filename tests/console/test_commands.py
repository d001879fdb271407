"""create_api_key, export_session, and the admin pages for the console's models."""

import json
from io import StringIO

import pytest
from django.contrib.auth.models import User
from django.core.management import CommandError, call_command
from django.test import Client

from agent_compression.messages import message_sha256
from console.models import ApiKey, Archive, AuditEvent, CompressionRun, DriftCase, Message, Session, Summary
from console.services.runs import execute_run, queue_run
from console.services.sessions import ImportedSession, create_session
from tests.samples import WECHAT, sample_path


def run(*args, **options):
    out, err = StringIO(), StringIO()
    call_command(*args, stdout=out, stderr=err, **options)
    return out.getvalue(), err.getvalue()


# --------------------------------------------------------------------------- create_api_key


@pytest.mark.django_db
def test_it_prints_the_key_alone_on_the_last_line_and_stores_only_its_digest():
    out, _ = run("create_api_key", "--name", "ci-runner", "--role", "operator")
    lines = out.strip().splitlines()
    key = lines[-1]
    assert key.startswith("ccs_") and " " not in key and len(key) > 40
    assert len(lines) > 1 and all(key not in line for line in lines[:-1])
    api_key = ApiKey.objects.get(name="ci-runner")
    assert api_key.key_sha256 == ApiKey.digest(key)
    assert key.startswith(f"ccs_{api_key.lookup}_")
    assert not any(key in str(value) for value in ApiKey.objects.values().get().values())
    assert not AuditEvent.objects.filter(after__icontains=key).exists()
    assert AuditEvent.objects.filter(action="api_key.create", actor_label="manage.py create_api_key").exists()


@pytest.mark.django_db
@pytest.mark.parametrize(
    ("role", "can_compress"),
    [("operator", True), ("viewer", False), ("reviewer", False)],
)
def test_it_gives_the_key_a_dedicated_user_in_the_role_group(role, can_compress):
    run("create_api_key", "--name", f"rt-{role}", "--role", role)
    user = User.objects.get(api_key__name=f"rt-{role}")
    assert user.username == f"api:rt-{role}"
    assert not user.has_usable_password()
    assert not user.is_staff and not user.is_superuser
    assert list(user.groups.values_list("name", flat=True)) == [role]
    assert user.has_perm("console.view_session")
    assert user.has_perm("console.compress_session") is can_compress


@pytest.mark.django_db
def test_it_authenticates_the_api_with_the_printed_key_until_revoked(client):
    out, _ = run("create_api_key", "--name", "bot", "--role", "viewer")
    key = out.strip().splitlines()[-1]
    from django.test import RequestFactory
    from ninja.errors import AuthenticationError

    from console.api import BearerKey

    request = RequestFactory().get("/api/v1/sessions")
    assert BearerKey().authenticate(request, key) is not None
    out, _ = run("create_api_key", "--revoke", "bot")
    assert "Revoked API key 'bot'" in out
    api_key = ApiKey.objects.select_related("user").get(name="bot")
    assert api_key.revoked_at is not None and not api_key.user.is_active
    with pytest.raises(AuthenticationError):  # a 401 naming the key
        BearerKey().authenticate(request, key)
    out, _ = run("create_api_key", "--revoke", "bot")
    assert "already revoked" in out


@pytest.mark.django_db
@pytest.mark.parametrize(
    ("args", "problem"),
    [
        (["--name", "x", "--role", "root"], "unknown role 'root'; valid roles: viewer, operator, reviewer, admin"),
        (["--name", "x"], "--role is required: one of viewer, operator, reviewer"),
        (["--name", "", "--role", "viewer"], "must not be empty"),
        (["--name", "   ", "--role", "viewer"], "must not be empty"),
        (["--role", "viewer"], "must not be empty"),
        (["--name", "has space", "--role", "viewer"], "may only hold letters"),
        (["--name", "x" * 101, "--role", "viewer"], "too long"),
        (["--revoke", "nobody"], "no API key called 'nobody'"),
    ],
)
def test_it_refuses_bad_input_by_name(args, problem):
    with pytest.raises(CommandError) as error:
        run("create_api_key", *args)
    assert problem in str(error.value)
    assert not ApiKey.objects.exists()
    assert not User.objects.filter(username__startswith="api:").exists()


@pytest.mark.django_db
def test_it_refuses_a_name_already_used():
    run("create_api_key", "--name", "dup", "--role", "viewer")
    with pytest.raises(CommandError, match="already used"):
        run("create_api_key", "--name", "dup", "--role", "operator")
    User.objects.create_user("api:taken")
    with pytest.raises(CommandError, match="already used"):
        run("create_api_key", "--name", "taken", "--role", "operator")
    assert ApiKey.objects.count() == 1


@pytest.mark.django_db
def test_it_accepts_chinese_names():
    out, _ = run("create_api_key", "--name", "微信助手", "--role", "viewer")
    assert "微信助手" in out
    assert User.objects.filter(username="api:微信助手").exists()


# --------------------------------------------------------------------------- export_session


@pytest.fixture
def compressed(django_capture_on_commit_callbacks, monkeypatch, settings):
    """The WeChat sample after one real compression: a run, an archive, a summary, a drift case with a comment."""
    settings.OPENAI_BASE_URL, settings.OPENAI_API_KEY = "", ""  # the offline summarizer
    monkeypatch.setattr("console.tasks.check_drift_task.apply_async", lambda *args, **kwargs: None)
    run("import_sessions", str(sample_path(WECHAT)))
    session = Session.objects.get(key="wechat:wxid_demo01")
    Session.objects.filter(pk=session.pk).update(context_window_tokens=2000)
    session.refresh_from_db()
    with django_capture_on_commit_callbacks(execute=False):
        queued = queue_run(session, CompressionRun.Trigger.MANUAL, focus_topic="杭州出差")
    assert execute_run(queued.pk) == CompressionRun.Status.SUCCEEDED
    summary = Summary.objects.get()
    reviewer = User.objects.create_user("reviewer-li")
    case = DriftCase.objects.create(
        summary=summary,
        session=session,
        severity="high",
        findings=[{"kind": "constraint_dropped", "severity": "high", "evidence": "先不要修改部署脚本"}],
        assignee=reviewer,
    )
    case.comments.create(author=reviewer, body="摘要漏掉了禁令", quote="先不要修改部署脚本")
    return Session.objects.get(pk=session.pk)


def export(key, tmp_path=None):
    if tmp_path is None:
        out, err = run("export_session", key)
        return json.loads(out), out, err
    target = tmp_path / "export.json"
    out, err = run("export_session", key, "--output", str(target))
    text = target.read_text(encoding="utf-8")
    return json.loads(text), out, err


@pytest.mark.django_db
def test_it_exports_a_session_with_its_run_archive_summary_and_drift_case(compressed, tmp_path):
    data, out, err = export(compressed.key, tmp_path)
    assert out.startswith(f"wrote {tmp_path / 'export.json'}: session wechat:wxid_demo01, 1 run(s), 1 archive(s)")
    assert err == ""
    assert data["format"] == "compression-console/session-export" and data["format_version"] == 1
    messages = data["messages"]
    # every key refers to its message, and the message still hashes to its key
    assert all(message_sha256(message) == key for key, message in messages.items())
    assert data["integrity"] == {"missing_messages": [], "altered_messages": []}

    exported = data["session"]
    assert exported["key"] == compressed.key
    assert exported["version"] == compressed.version
    assert exported["message_count"] == compressed.message_count == len(exported["message_keys"])
    assert exported["token_count"] == compressed.token_count
    assert exported["context_window_tokens"] == 2000
    assert exported["last_consolidated"] == 0
    assert exported["metadata"]["channel"] == "wechat"
    assert [messages[k] for k in exported["message_keys"]] == compressed.messages()

    [run_data] = data["runs"]
    db_run = CompressionRun.objects.get()
    assert run_data["status"] == "succeeded" and run_data["applied"] is True
    assert run_data["focus_topic"] == "杭州出差"
    assert [messages[k] for k in run_data["input_keys"]] == Message.load(db_run.input_keys)
    assert run_data["output_keys"] == exported["message_keys"]
    assert run_data["tokens_before"] > run_data["tokens_after"] > 0
    assert {s["name"] for s in run_data["stages"]} >= {"prune", "archive", "summarize"}

    [archive] = data["archives"]
    assert archive["run"] == run_data["id"] and archive["verified"] is True and archive["problem"] is None
    assert run_data["input_keys"][archive["start"] : archive["end"]] == archive["message_keys"]

    [summary] = data["summaries"]
    db_summary = Summary.objects.get()
    assert summary["archive"] == archive["id"] and summary["status"] == "active"
    assert summary["text"] == db_summary.text and summary["text"]
    assert summary["provenance"]["generator"] == "extractive"
    assert summary["facts"] == db_summary.facts
    assert summary["parent"] is None

    [case] = data["drift_cases"]
    assert case["summary"] == summary["summary_id"] and case["assignee"] == "reviewer-li"
    assert case["comments"][0]["body"] == "摘要漏掉了禁令"


@pytest.mark.django_db
def test_it_keeps_chinese_readable_and_round_trips_on_stdout(compressed):
    data, text, _ = export(compressed.key)
    assert "帮我整理下周的出差行程" in text and "\\u" not in text.split('"messages"')[0]
    assert json.loads(json.dumps(data, ensure_ascii=False)) == data
    assert data == export(compressed.key)[0] | {"exported_at": data["exported_at"]}


@pytest.mark.django_db
def test_it_exports_a_tampered_archive_as_not_verified(compressed, tmp_path):
    archive = Archive.objects.get()
    altered = archive.message_keys[0]
    Message.objects.filter(sha256=altered).update(data={"role": "user", "content": "改过的原文"})
    data, _, err = export(compressed.key, tmp_path)
    [exported] = data["archives"]
    assert exported["verified"] is False
    assert "does not match its sha256" in exported["problem"]
    assert data["integrity"]["altered_messages"] == [altered]
    assert f"warning: archive {archive.pk} is not verified" in err


@pytest.mark.django_db
def test_it_exports_a_session_without_runs():
    create_session(ImportedSession(key="t:plain", messages=[{"role": "user", "content": "你好"}], metadata={}))
    data, _, _ = export("t:plain")
    assert data["runs"] == data["archives"] == data["summaries"] == data["drift_cases"] == []
    assert list(data["messages"].values()) == [{"role": "user", "content": "你好"}]


@pytest.mark.django_db
def test_it_refuses_an_unknown_key(tmp_path):
    with pytest.raises(CommandError, match="no session 'nope:1'"):
        run("export_session", "nope:1", "--output", str(tmp_path / "x.json"))
    assert not (tmp_path / "x.json").exists()


@pytest.mark.django_db
def test_it_refuses_an_output_in_a_missing_directory(tmp_path):
    create_session(ImportedSession(key="t:plain", messages=[{"role": "user", "content": "x"}], metadata={}))
    with pytest.raises(CommandError, match="does not exist"):
        run("export_session", "t:plain", "--output", str(tmp_path / "missing" / "x.json"))


@pytest.mark.django_db(transaction=True)
def test_it_exports_outside_a_transaction(tmp_path):
    # the command's own snapshot transaction (repeatable read on PostgreSQL) runs only outside one
    create_session(ImportedSession(key="t:tx", messages=[{"role": "user", "content": "x"}], metadata={}))
    data, _, _ = export("t:tx", tmp_path)
    assert data["session"]["message_count"] == 1


# --------------------------------------------------------------------------- admin


@pytest.fixture
def admin_client(compressed):
    User.objects.create_superuser("root", password="pw-root-123")
    client = Client()
    client.force_login(User.objects.get(username="root"))
    run("create_api_key", "--name", "bot", "--role", "viewer")
    return client


@pytest.mark.django_db
@pytest.mark.parametrize(
    ("model", "editable"),
    [
        (CompressionRun, False),
        (Archive, False),
        (Summary, False),
        (AuditEvent, False),
        (DriftCase, True),
        (ApiKey, True),
    ],
)
def test_it_shows_the_models_in_the_admin(admin_client, model, editable):
    name = model._meta.model_name
    changelist = admin_client.get(f"/admin/console/{name}/")
    assert changelist.status_code == 200
    obj = model.objects.first()
    page = admin_client.get(f"/admin/console/{name}/{obj.pk}/change/")
    assert page.status_code == 200
    assert admin_client.get(f"/admin/console/{name}/add/").status_code == 403
    assert admin_client.get(f"/admin/console/{name}/{obj.pk}/delete/").status_code == 403
    assert (b'name="_save"' in page.content) is editable


@pytest.mark.django_db
def test_it_shows_whether_an_archive_is_verified(admin_client):
    archive = Archive.objects.get()
    assert b"yes" in admin_client.get(f"/admin/console/archive/{archive.pk}/change/").content
    Message.objects.filter(sha256=archive.message_keys[0]).update(data={"role": "user", "content": "x"})
    assert b"does not match its sha256" in admin_client.get(f"/admin/console/archive/{archive.pk}/change/").content


@pytest.mark.django_db
def test_it_never_shows_an_api_key_digest(admin_client):
    api_key = ApiKey.objects.get()
    for url in ("/admin/console/apikey/", f"/admin/console/apikey/{api_key.pk}/change/"):
        assert api_key.key_sha256.encode() not in admin_client.get(url).content


@pytest.mark.django_db
def test_it_revokes_api_keys_from_the_admin(admin_client):
    api_key = ApiKey.objects.get()
    response = admin_client.post("/admin/console/apikey/", {"action": "revoke", "_selected_action": [api_key.pk]})
    assert response.status_code == 302
    api_key.refresh_from_db()
    assert api_key.revoked_at is not None
    assert AuditEvent.objects.filter(action="api_key.revoke", actor_label="root").exists()


@pytest.mark.django_db
def test_it_changes_a_drift_case_through_the_review_rules(admin_client):
    case = DriftCase.objects.get()
    url = f"/admin/console/driftcase/{case.pk}/change/"
    form = {"status": "resolved", "assignee": "", "verdict": ""}
    inline = {"comments-TOTAL_FORMS": "1", "comments-INITIAL_FORMS": "1"}
    response = admin_client.post(url, form | inline)
    assert response.status_code == 200
    assert b"cannot become resolved" in response.content
    response = admin_client.post(url, form | inline | {"status": "confirmed"})
    assert b"needs a verdict" in response.content
    response = admin_client.post(url, form | inline | {"status": "confirmed", "verdict": "禁令丢了"})
    assert response.status_code == 302, response.content.decode()[:2000]
    case.refresh_from_db()
    assert (case.status, case.verdict, case.assignee) == ("confirmed", "禁令丢了", None)
    event = AuditEvent.objects.get(action="drift_case.update")
    assert event.actor_label == "root" and event.after["status"] == "confirmed"
