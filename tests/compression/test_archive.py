from __future__ import annotations

import pytest

from agent_compression.archive import Archive
from agent_compression.messages import messages_sha256
from tests.compression.builders import assistant, user


def test_it_archives_a_deep_copy_of_the_slice() -> None:
    history = [user("a"), assistant("b"), user("c")]
    archive = Archive.of(history, 1, 3)
    history[1]["content"] = "mutated"
    assert archive.messages == [assistant("b"), user("c")]
    assert archive.sha256 == messages_sha256([assistant("b"), user("c")])
    assert len(archive) == 2 and archive.verify()


def test_it_detects_tampering() -> None:
    archive = Archive.of([user("a")], 0, 1)
    archive.messages[0]["content"] = "b"
    assert not archive.verify()


def test_it_round_trips_through_a_dict() -> None:
    archive = Archive.of([user("a"), user("不要")], 0, 2)
    assert Archive.from_dict(archive.to_dict()) == archive
    with pytest.raises(ValueError):
        Archive.from_dict({**archive.to_dict(), "sha256": "0" * 64})


def test_it_rejects_a_range_outside_the_history() -> None:
    with pytest.raises(ValueError):
        Archive.of([user("a")], 0, 2)
