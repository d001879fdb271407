"""The drift regression set: export_cases / export_drift_cases, and replay_cases / replay_drift_cases."""

from __future__ import annotations

import copy
import json
import logging
from io import StringIO
from pathlib import Path
from typing import Any

import pytest
from django.core.management import CommandError, call_command

from agent_compression import check_drift
from console.importers import read_session_file
from console.models import Archive, AuditEvent, DriftCase, Message, Summary
from console.services.drift import check_summary_drift
from console.services.regression import (
    FIXED,
    STILL_DRIFTS,
    MalformedRecord,
    corrected_summary,
    export_cases,
    exportable_cases,
    read_records,
    replay_cases,
)
from console.services.sessions import ImportedSession, create_session
from tests.console.factories import SECRET, compress_now
from tests.samples import CODING, sample_path

#: the constraint in the archived segment of the coding sample, and what a drifted summary makes of it
CONSTRAINT = "but don't deploy; just run the job locally"
INVERTED = "deploy it now"
VERDICT = "The summary tells the agent to deploy; the user said not to. 用户说不要部署。"


def run(*args: Any) -> tuple[str, str]:
    out, err = StringIO(), StringIO()
    call_command(*args, stdout=out, stderr=err)
    return out.getvalue(), err.getvalue()


def summary_of(archive: Archive, text: str, status: str = Summary.Status.DRAFT, **fields: Any) -> Summary:
    """A summary row of ``archive`` written directly (texts are immutable, so they are set at creation)."""
    fields.setdefault("provenance", {"generator": "extractive", "trigger": "resummarize"})
    return Summary.objects.create(
        archive=archive, text=text, status=status, summary_id=f"sum_test{Summary.objects.count():08d}", **fields
    )


def drifted(archive: Archive, active: Summary) -> Summary:
    """A version of the archive's summary that turns "don't deploy" into "deploy it now"."""
    assert CONSTRAINT in active.text
    return summary_of(archive, active.text.replace(CONSTRAINT, INVERTED))


def confirmed_case(bad: Summary, **fields: Any) -> DriftCase:
    """A drift case of ``bad`` with the detector's own high findings, confirmed by a reviewer."""
    findings = [f.to_dict() for f in check_drift(bad.archive.verified_messages(), bad.text) if f.severity == "high"]
    assert findings, "the drifted summary should have high findings"
    fields.setdefault("status", DriftCase.Status.CONFIRMED)
    return DriftCase.objects.create(
        summary=bad, session=bad.archive.session, findings=findings, severity="high", verdict=VERDICT, **fields
    )


@pytest.fixture
def case(archive: Archive, active: Summary) -> DriftCase:
    return confirmed_case(drifted(archive, active))


@pytest.fixture
def secret_archive(db) -> Archive:
    """The coding sample with an API key in an archived message, compressed once."""
    messages = copy.deepcopy(read_session_file(sample_path(CODING)).messages)
    messages[6]["content"] += f" The staging key is {SECRET}."
    session = create_session(ImportedSession(key="job:secret", messages=messages, metadata={}))
    archive = Archive.objects.get(run=compress_now(session))
    assert any(SECRET in str(m.get("content")) for m in archive.verified_messages()), (archive.start, archive.end)
    return archive


def exported(tmp_path: Path, *options: str) -> tuple[list[dict[str, Any]], str, Path]:
    path = tmp_path / "cases.jsonl"
    _, err = run("export_drift_cases", "--output", str(path), *options)
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()], err, path


def jsonl(tmp_path: Path, lines: list[str], name: str = "set.jsonl") -> Path:
    path = tmp_path / name
    path.write_text("".join(line + "\n" for line in lines), encoding="utf-8")
    return path


# --------------------------------------------------------------------------- export


def test_it_exports_a_confirmed_case_with_its_originals_and_both_summaries(case, archive, active):
    [record] = export_cases(exportable_cases())

    assert json.loads(json.dumps(record)) == record
    assert record["case"] == case.pk and record["session"] == archive.session.key
    assert record["status"] == "confirmed" and record["severity"] == "high" and record["verdict"] == VERDICT
    assert record["kinds"] == case.kind_list and record["kinds"]
    assert record["archive"] == {"id": archive.pk, "start": archive.start, "end": archive.end, "sha256": archive.sha256}
    assert record["original_segment"] == archive.verified_messages()
    assert record["bad_summary"] == {
        "summary_id": case.summary.summary_id,
        "text": case.summary.text,
        "provenance": case.summary.provenance,
    }
    assert INVERTED in record["bad_summary"]["text"]
    assert record["findings"] == case.findings
    history = Message.load(archive.run.input_keys)
    assert record["context_messages"] == history[: archive.start] + history[archive.end :]
    assert record["context_messages"][1]["content"].endswith("Do not change anything under infra/terraform.")


def test_it_exports_only_confirmed_and_resolved_cases(archive, active):
    bad = drifted(archive, active)
    confirmed = confirmed_case(bad)
    resolved = confirmed_case(bad, status=DriftCase.Status.RESOLVED)
    confirmed_case(bad, status=DriftCase.Status.OPEN)
    confirmed_case(bad, status=DriftCase.Status.DISMISSED)

    assert [r["case"] for r in export_cases(exportable_cases())] == [confirmed.pk, resolved.pk]


def test_it_takes_the_corrected_summary_from_fixed_by_first(case, archive, active):
    fix = summary_of(archive, active.text + "\n", status=Summary.Status.SUPERSEDED)
    case.status, case.fixed_by = DriftCase.Status.RESOLVED, fix
    case.save()

    [record] = export_cases(exportable_cases())

    assert record["status"] == "resolved"
    assert record["corrected_summary"] == {"summary_id": fix.summary_id, "text": fix.text, "provenance": fix.provenance}


def test_it_takes_the_active_summary_when_its_drift_check_is_clean(case, active):
    assert case.fixed_by is None
    assert active.drift_checked_at is not None  # checked when the session was compressed
    assert not [f for f in active.drift_findings if f["severity"] == "high"]

    [record] = export_cases(exportable_cases())

    assert record["corrected_summary"] == {
        "summary_id": active.summary_id,
        "text": active.text,
        "provenance": active.provenance,
    }


def test_it_has_no_corrected_summary_when_the_active_one_was_not_checked(case, active):
    Summary.objects.filter(pk=active.pk).update(drift_checked_at=None)

    [record] = export_cases(exportable_cases())

    assert record["corrected_summary"] is None


def test_it_has_no_corrected_summary_when_the_active_one_drifts_too(case, archive, active):
    Summary.objects.filter(pk=active.pk).update(status=Summary.Status.SUPERSEDED)
    also_bad = drifted(archive, active)
    Summary.objects.filter(pk=also_bad.pk).update(status=Summary.Status.ACTIVE)
    check_summary_drift(also_bad.pk)

    assert corrected_summary(DriftCase.objects.get(pk=case.pk)) is None


def test_it_has_no_corrected_summary_when_the_bad_summary_is_the_active_one(archive, active):
    check_summary_drift(active.pk)
    case = DriftCase.objects.create(
        summary=active, session=archive.session, findings=[{"kind": "hedge_lost", "severity": "high"}], severity="high"
    )
    assert corrected_summary(case) is None


def test_it_masks_secrets_in_the_export_unless_revealed(secret_archive, tmp_path):
    active = secret_archive.summaries.get(status=Summary.Status.ACTIVE)
    bad = summary_of(secret_archive, active.text.replace(CONSTRAINT, INVERTED) + f"\nKey: {SECRET}")
    confirmed_case(bad)

    [masked], err, path = exported(tmp_path)

    text = path.read_text(encoding="utf-8")
    assert SECRET not in text
    assert "[secret:api_key:" in json.dumps(masked["original_segment"])
    assert "[secret:api_key:" in masked["bad_summary"]["text"]
    assert "exported 1 drift case(s)" in err and "secrets masked" in err
    assert not AuditEvent.objects.filter(action="secrets.reveal").exists()

    [revealed], err, _ = exported(tmp_path, "--reveal")

    assert revealed["original_segment"] == secret_archive.verified_messages()
    assert SECRET in json.dumps(revealed["original_segment"]) and SECRET in revealed["bad_summary"]["text"]
    assert "unmasked" in err
    event = AuditEvent.objects.get(action="secrets.reveal")
    assert event.object_type == "driftcase" and event.actor_label == "manage.py export_drift_cases"


def test_it_writes_jsonl_to_standard_output_with_readable_text(case):
    out, err = run("export_drift_cases")
    lines = out.splitlines()
    assert len(lines) == 1 and json.loads(lines[0])["case"] == case.pk
    assert "用户说不要部署" in lines[0]  # not \u-escaped
    assert err.strip() == "exported 1 drift case(s) (secrets masked)"


def test_it_skips_a_case_whose_archive_was_altered_and_says_so(case, archive, active, secret_archive, caplog):
    other_active = secret_archive.summaries.get(status=Summary.Status.ACTIVE)
    intact = confirmed_case(summary_of(secret_archive, other_active.text.replace(CONSTRAINT, INVERTED)))
    [only_here] = set(archive.message_keys) - set(secret_archive.message_keys)  # messages are stored once
    Message.objects.filter(sha256=only_here).update(data={"role": "assistant", "content": "altered"})

    out, err = run("export_drift_cases")

    assert [json.loads(line)["case"] for line in out.splitlines()] == [intact.pk]
    assert f"warning: drift case {case.pk} skipped: archive {archive.pk} does not match its sha256" in err
    assert "exported 1 drift case(s)" in err
    with caplog.at_level(logging.WARNING, logger="console.services.regression"):
        assert [r["case"] for r in export_cases(exportable_cases())] == [intact.pk]
    assert f"drift case {case.pk} skipped" in caplog.text


# --------------------------------------------------------------------------- replay


def test_it_reports_a_faithful_resummary_as_fixed(case):
    [result] = replay_cases(export_cases(exportable_cases()), summarizer_name="extractive")

    assert result.case == case.pk and result.outcome == FIXED, result
    assert CONSTRAINT.split(";")[1].strip() in result.text  # the constraint is kept this time


def test_it_reports_a_drifting_model_as_still_drifting_and_exits_1(case, model, tmp_path):
    model.script(default="drift")
    path = jsonl(tmp_path, [json.dumps(r) for r in export_cases(exportable_cases())])
    out = StringIO()

    with pytest.raises(CommandError) as failure:
        call_command("replay_drift_cases", str(path), stdout=out)  # the default summarizer: the configured model

    assert failure.value.returncode == 1
    lines = out.getvalue().splitlines()
    assert lines[0].startswith(f"case {case.pk}: still drifts: constraint_")
    assert "(high)" in lines[0] and "again: constraint_" in lines[0]
    assert lines[-1] == "1 cases: 1 still drift, 0 fixed, 0 failed"
    assert len(model.requests) == 1 and model.requests[0].body["model"]


def test_it_counts_only_findings_at_or_above_the_case_threshold(case, model, settings):
    """An invented file name is a medium finding: not drift at the default threshold (high), drift at medium."""
    model.script(default="ok", text="## Decisions\n- Lower the batch size in jobs/invented_module.py next.")
    records = list(export_cases(exportable_cases()))

    [at_high] = replay_cases(records, summarizer_name="openai")
    settings.DRIFT_CASE_MIN_SEVERITY = "medium"
    [at_medium] = replay_cases(records, summarizer_name="openai")

    assert at_high.outcome == FIXED
    assert at_medium.outcome == STILL_DRIFTS
    assert [(f["kind"], f["severity"]) for f in at_medium.findings] == [("identifier_fabricated", "medium")]
    assert at_medium.line().endswith("none of the case's kinds")


def test_it_reports_a_summarizer_error_as_failed(case, model):
    model.script(default="500")
    [result] = replay_cases(export_cases(exportable_cases()), summarizer_name="openai", model="gpt-test")

    assert result.outcome == "failed" and result.error
    assert result.line().startswith(f"case {case.pk}: failed: ")
    assert model.requests[0].body["model"] == "gpt-test"


def test_it_round_trips_an_export_into_a_passing_replay(case, secret_archive, tmp_path):
    other_active = secret_archive.summaries.get(status=Summary.Status.ACTIVE)
    second = confirmed_case(summary_of(secret_archive, other_active.text.replace(CONSTRAINT, INVERTED)))
    _, _, path = exported(tmp_path)

    out, _ = run("replay_drift_cases", str(path), "--summarizer", "extractive")

    assert out.splitlines() == [
        f"case {case.pk}: fixed",
        f"case {second.pk}: fixed",
        "2 cases: 0 still drift, 2 fixed, 0 failed",
    ]


def test_it_replays_every_case_when_one_fails_and_counts_each_outcome(case, model, tmp_path):
    [record] = export_cases(exportable_cases())
    second = record | {"case": record["case"] + 1}
    model.script("500", "drift")
    path = jsonl(tmp_path, [json.dumps(record), json.dumps(second)])
    out = StringIO()

    with pytest.raises(CommandError, match="2 of 2 drift case"):
        call_command("replay_drift_cases", str(path), "--summarizer", "openai", stdout=out)

    lines = out.getvalue().splitlines()
    assert lines[0].startswith(f"case {case.pk}: failed: ")
    assert lines[1].startswith(f"case {case.pk + 1}: still drifts: ")
    assert lines[2] == "2 cases: 1 still drift, 0 fixed, 1 failed"


def test_it_names_the_line_of_a_malformed_record_and_replays_nothing(case, model, tmp_path):
    good = json.dumps(next(export_cases(exportable_cases())))
    path = jsonl(tmp_path, [good, "", '{"case": 3, "original_segment": [], "archive": {"start": 0}}', good])

    with pytest.raises(CommandError, match=r"set\.jsonl, line 3: \"original_segment\" must be a non-empty list"):
        run("replay_drift_cases", str(path))
    assert model.requests == []

    path.write_text(good + "\n{not json\n", encoding="utf-8")
    with pytest.raises(CommandError, match=r"line 2: not JSON"):
        run("replay_drift_cases", str(path))
    assert model.requests == []


@pytest.mark.parametrize(
    ("line", "problem"),
    [
        ("[1, 2]", "expected a JSON object, got list"),
        ('{"original_segment": [{"role": "user", "content": "x"}], "archive": {"start": 0}}', 'no "case" id'),
        ('{"case": 1, "original_segment": [{"role": "user", "content": "x"}]}', '"archive" must be an object'),
        ('{"case": 1, "original_segment": ["x"], "archive": {"start": 0}}', '"original_segment" must be'),
    ],
)
def test_it_checks_each_record_has_what_replay_needs(line, problem):
    with pytest.raises(MalformedRecord, match=problem) as failure:
        read_records(["", line])
    assert failure.value.line == 2


def test_it_says_so_when_the_file_is_empty(tmp_path, db):
    path = jsonl(tmp_path, ["", "  "])
    out, _ = run("replay_drift_cases", str(path))
    assert out.strip() == f"{path} holds no drift cases; nothing to replay"


def test_it_refuses_an_unknown_summarizer_or_a_missing_file(case, tmp_path):
    path = jsonl(tmp_path, [json.dumps(r) for r in export_cases(exportable_cases())])
    with pytest.raises(CommandError, match="unknown summarizer 'gpt'"):
        run("replay_drift_cases", str(path), "--summarizer", "gpt")
    with pytest.raises(CommandError, match="cannot read"):
        run("replay_drift_cases", str(tmp_path / "missing.jsonl"))
