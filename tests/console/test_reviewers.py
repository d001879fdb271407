"""Who may review drift cases is decided once (console.roles.reviewers): the list and the assign check agree."""

from __future__ import annotations

import pytest
from django.contrib.auth.models import Group, Permission, User

from console.errors import InvalidInput
from console.models import DriftCase, Session, Summary
from console.roles import REVIEW, REVIEWER, VIEWER, reviewers
from console.services.drift import update_drift_case

pytestmark = pytest.mark.django_db


@pytest.fixture
def people() -> dict[str, User]:
    by_group = User.objects.create_user("rita")
    by_group.groups.add(Group.objects.get(name=REVIEWER))
    direct = User.objects.create_user("dora")
    direct.user_permissions.add(Permission.objects.get(codename="review_drift", content_type__app_label="console"))
    viewer = User.objects.create_user("vic")
    viewer.groups.add(Group.objects.get(name=VIEWER))
    gone = User.objects.create_user("gina", is_active=False)
    gone.groups.add(Group.objects.get(name=REVIEWER))
    root = User.objects.create_superuser("root")
    return {"rita": by_group, "dora": direct, "vic": viewer, "gina": gone, "root": root}


def test_the_list_is_exactly_the_users_has_perm_lets_review(people):
    assert list(reviewers().values_list("username", flat=True)) == ["dora", "rita", "root"]
    for name, user in people.items():
        fresh = User.objects.get(pk=user.pk)  # has_perm caches per instance
        assert fresh.has_perm(REVIEW) == reviewers().filter(pk=user.pk).exists(), name


def test_a_case_can_be_assigned_to_whoever_is_listed_and_no_one_else(people):
    archive_session = Session.objects.create(key="test:reviewers")
    run = archive_session.runs.create(trigger="manual")
    archive = archive_session.archives.create(run=run, start=0, end=1, message_keys=[], sha256="0" * 64)
    summary = Summary.objects.create(archive=archive, summary_id="sum_reviewers", status="draft", text="x")
    case = DriftCase.objects.create(summary=summary, session=archive_session, findings=[], severity="low")
    for name in ("dora", "rita", "root"):
        assert update_drift_case(case.pk, {"assignee": name}, people["root"]).assignee.username == name
    with pytest.raises(InvalidInput, match="cannot review drift cases"):
        update_drift_case(case.pk, {"assignee": "vic"}, people["root"])
    with pytest.raises(InvalidInput, match="no active user 'gina'"):
        update_drift_case(case.pk, {"assignee": "gina"}, people["root"])
