"""Masking by context (issue 33) masks more: values under secret-named keys (also inside tool-call arguments) and
credentials near a secret name. The stored masked copies that search and sorting read are made again with the
new rules (``Session.masked_key`` and ``channel``, and ``Message.text`` from each message's data),
so no search or sort finds what a page now hides."""

from typing import Any

from django.db import migrations

BATCH = 500


def remask_search_text(apps: Any, schema_editor: Any) -> None:
    from ..masking import mask_text, masked_key
    from ..models import masked_search_text

    Session = apps.get_model("console", "Session")
    for pk, key, channel, was in Session.objects.values_list("pk", "key", "channel", "masked_key").iterator(BATCH):
        masked, shown_channel = masked_key(key), mask_text(channel)[:64]
        if masked != was or shown_channel != channel:
            Session.objects.filter(pk=pk).update(masked_key=masked, channel=shown_channel)
    Message = apps.get_model("console", "Message")
    last = ""  # keyset pagination; only changed rows are written
    while True:
        rows = list(
            Message.objects.filter(sha256__gt=last).order_by("sha256").values_list("sha256", "data", "text")[:BATCH]
        )
        if not rows:
            break
        for sha256, data, text in rows:
            masked = masked_search_text(data) if isinstance(data, dict) else text
            if masked != text:
                Message.objects.filter(sha256=sha256).update(text=masked)
        last = rows[-1][0]


class Migration(migrations.Migration):
    dependencies = [("console", "0010_i32rep_report_idempotency")]

    operations = [migrations.RunPython(remask_search_text, migrations.RunPython.noop, elidable=True)]
