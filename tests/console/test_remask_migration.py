"""Migration 0011 masks the stored search copies again with the rules of issue 33."""

from __future__ import annotations

import json
from importlib import import_module

from django.apps import apps

from console.models import Message, Session, searchable_text
from console.services.sessions import ImportedSession, create_session

ARGUMENTS = json.dumps({"credentials": {"value": "PlantMigratedValue"}})
CALL = {"id": "c1", "type": "function", "function": {"name": "login", "arguments": ARGUMENTS}}


def test_rows_masked_by_older_rules_are_masked_again(db):
    session = create_session(
        ImportedSession(
            key="migrate:cookie=PlantCookieInKey1",
            messages=[{"role": "assistant", "content": "", "tool_calls": [CALL]}],
            metadata={},
        )
    )
    # as the rows were before: the search text holds the value, the key had no masked copy
    message = Message.objects.get()
    Message.objects.update(text=searchable_text(message.data))
    Session.objects.update(masked_key=None)
    assert Message.objects.filter(text__contains="PlantMigratedValue").exists()

    import_module("console.migrations.0011_i33sec_remask_search").remask_search_text(apps, None)

    assert not Message.objects.filter(text__contains="PlantMigratedValue").exists()
    assert "login" in Message.objects.get().text
    masked = Session.objects.get(pk=session.pk).masked_key
    assert masked and "PlantCookieInKey1" not in masked
