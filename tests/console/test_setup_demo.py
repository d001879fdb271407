from io import StringIO

import pytest
from django.contrib.auth import authenticate
from django.core.management import call_command

from console.management.commands.setup_demo import users_line
from console.models import CompressionRun, DriftCase, Session, Summary
from tests.samples import SAMPLES, load_sample

DEMO_KEYS = {
    "wechat:wxid_demo01",
    "import:coding_export_job",
    "slack:oncall-platform",
    "import:secrets_and_html",
    "discord:design-review",
}


def setup_demo() -> str:
    out = StringIO()
    call_command("setup_demo", stdout=out)
    return out.getvalue()


@pytest.mark.django_db
def test_it_builds_the_demo_once_from_the_repository_alone(tmp_path, monkeypatch):
    """setup_demo needs no setting: a DEMO_SAMPLES_DIR that is not a folder is reported and the built-in demo
    loads; run again with one that holds a file, it adds that session and redoes nothing else."""
    monkeypatch.setenv("DEMO_SAMPLES_DIR", str(tmp_path / "nowhere"))
    out = setup_demo()
    assert f"no sample sessions at {tmp_path / 'nowhere'} (DEMO_SAMPLES_DIR)" in out
    (tmp_path / "mine.json").write_text('[{"role": "user", "content": "hello"}]')
    monkeypatch.setenv("DEMO_SAMPLES_DIR", str(tmp_path))
    again = setup_demo()
    assert "imported mine.json: import:mine" in again
    assert Session.objects.get(key="import:mine").metadata["demo"] is True
    assert "compressed import:mine" in again and "opened drift case" not in again
    assert "compressed" not in again.replace("compressed import:mine", "")
    Session.objects.filter(key="import:mine").delete()

    check_users(out)
    check_sessions(out)
    check_long_session()
    check_versions_and_drift_cases(out)


def test_the_demo_users_line_names_admin_once():
    assert users_line().count("admin") == 2  # the user, and its role
    assert users_line().endswith("admin (superuser, admin role), viewer, operator, reviewer")


def check_users(out: str) -> None:
    assert "Demo users (password 'demo-console'): admin (superuser, admin role), viewer, operator, reviewer" in out
    admin = authenticate(username="admin", password="demo-console")
    assert admin is not None and admin.is_staff and admin.is_superuser
    for role in ("viewer", "operator", "reviewer"):  # (the admin role's group goes to the superuser admin)
        user = authenticate(username=role, password="demo-console")
        assert user is not None
        assert list(user.groups.values_list("name", flat=True)) == [role]
        assert not user.is_staff


def check_sessions(out: str) -> None:
    assert set(Session.objects.values_list("key", flat=True)) == DEMO_KEYS
    assert {load_sample(p.name)[1].get("key") or f"import:{p.stem}" for p in SAMPLES.glob("*.json*")} == DEMO_KEYS
    for session in Session.objects.all():
        assert session.metadata["demo"] is True, session.key
        assert session.runs.exists() and not session.runs.exclude(status="succeeded").exists(), session.key
        assert session.runs.filter(applied=True).exists()
    # each session but the long one was compressed once, with a summary to read (and not again on the second call)
    for key in DEMO_KEYS - {"slack:oncall-platform"}:
        [run] = CompressionRun.objects.filter(session__key=key)
        assert f"compressed {key}: run {run.pk} succeeded" in out


def check_long_session() -> None:
    """Compressed as it grew, each summary updating the previous one."""
    session = Session.objects.get(key="slack:oncall-platform")
    messages, _ = load_sample("slack_oncall_platform.jsonl")
    assert len(messages) >= 2_000
    runs = list(session.runs.order_by("pk"))
    assert len(runs) >= 3
    assert [r.trigger for r in runs[1:]] == ["auto"] * (len(runs) - 1)  # the appends crossed the trigger
    summarize = [next(s for s in r.stages if s["name"] == "summarize")["counts"] for r in runs]
    assert [c["previous_summary"] for c in summarize] == [False] + [True] * (len(runs) - 1)
    # the first constraint, given early, is still pinned in the last compression's summary
    last = Summary.objects.get(run=runs[-1])
    assert "Do not restart payments-db during business hours." in last.text


def check_versions_and_drift_cases(out: str) -> None:
    """Two versions of one archive to compare and promote; drift cases open, confirmed and resolved."""
    coding = Summary.objects.filter(archive__session__key="import:coding_export_job")
    assert coding.filter(status="active").count() == 1
    [second] = coding.filter(provenance__trigger="resummarize")
    assert second.status == "draft" and second.text and second.created_by.username == "operator"

    cases = {case.session.key: case for case in DriftCase.objects.all()}
    assert set(cases) == {"import:coding_export_job", "wechat:wxid_demo01", "slack:oncall-platform"}
    for case in cases.values():  # each opened by the check of a draft written by hand, labelled as the demo's
        assert case.summary.provenance["generator"] == "demo" and case.opened_by is None
        assert f"opened drift case {case.pk}" in out

    waiting = cases["import:coding_export_job"]  # open: "don't deploy" turned into "deploy"
    assert waiting.status == "open" and "constraint_inverted" in waiting.kind_list

    confirmed = cases["wechat:wxid_demo01"]
    assert confirmed.status == "confirmed" and confirmed.verdict and confirmed.assignee.username == "reviewer"
    assert [c.author.username for c in confirmed.comments.order_by("pk")] == ["reviewer", "operator"]
    assert list(confirmed.comments.first().mentions.values_list("username", flat=True)) == ["operator"]

    resolved = cases["slack:oncall-platform"]
    assert resolved.status == "resolved" and resolved.verdict
    assert resolved.fixed_by.status == "active" and resolved.fixed_by.provenance["trigger"] == "resummarize"
    assert "Do not restart payments-db during business hours." in resolved.fixed_by.text
    for case in cases.values():  # a draft's pinned facts are those its text lists ("Pinned facts (0)" no more)
        draft = case.summary
        assert draft.facts and len(draft.facts) == draft.text.split("## Pinned facts", 1)[1].count("\n- [")
