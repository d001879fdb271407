from io import StringIO

import pytest
from django.contrib.auth import authenticate
from django.core.management import call_command

from console.models import DriftCase, Session


@pytest.mark.django_db
def test_it_creates_demo_users_and_loads_samples_once():
    out = StringIO()
    call_command("setup_demo", stdout=out)
    call_command("setup_demo", stdout=StringIO())  # running it again changes nothing
    assert "password 'demo-console'" in out.getvalue()
    admin = authenticate(username="admin", password="demo-console")
    assert admin is not None and admin.is_staff and admin.is_superuser
    for role in ("viewer", "operator", "reviewer"):  # (the admin role's group goes to the superuser admin)
        user = authenticate(username=role, password="demo-console")
        assert user is not None
        assert list(user.groups.values_list("name", flat=True)) == [role]
        assert not user.is_staff
    assert set(Session.objects.values_list("key", flat=True)) == {"wechat:wxid_demo01", "import:coding_export_job"}
    # each demo session was compressed once (not again on the second call), with a summary to read
    for session in Session.objects.all():
        [run] = session.runs.all()
        assert run.status == "succeeded" and run.applied, (run.error, run.warnings, run.was_compressed)
        assert run.archive.summaries.filter(status="active").count() == 1
        assert f"compressed {session.key}: run {run.pk} succeeded" in out.getvalue()
    # and one drift case to review: a draft, labelled as the demo's, that inverts "don't deploy"
    [case] = DriftCase.objects.all()
    assert case.summary.provenance["generator"] == "demo" and case.summary.status == "draft"
    assert "constraint_inverted" in case.kind_list and case.status == "open"
    assert f"opened drift case {case.pk}" in out.getvalue()


@pytest.mark.django_db
def test_it_says_where_samples_would_be(tmp_path, monkeypatch):
    monkeypatch.setenv("DEMO_SAMPLES_DIR", str(tmp_path / "nowhere"))
    out = StringIO()
    call_command("setup_demo", stdout=out)
    assert "no sample sessions at" in out.getvalue()
    assert Session.objects.count() == 0
