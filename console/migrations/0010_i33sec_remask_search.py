"""Masking by context (issue 33) masks more (values under secret names in text, credentials near a secret name):
the stored masked copies that search and sorting read (``Session.masked_key``, ``Session.channel``,
``Message.text``) are masked again with the new rules, so no search or sort finds what a page now hides."""

from importlib import import_module
from typing import Any

from django.db import migrations


def remask_search_text(apps: Any, schema_editor: Any) -> None:
    # the same walk as when the masked copies were made; masking is idempotent, so masked text only masks more
    import_module("console.migrations.0006_masked_search").mask_search_text(apps, schema_editor)


class Migration(migrations.Migration):
    dependencies = [("console", "0009_pairwise_review")]

    operations = [migrations.RunPython(remask_search_text, migrations.RunPython.noop, elidable=True)]
