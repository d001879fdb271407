"""Search reads masked text: ``Session.masked_key`` for keys holding a secret; channels and ``Message.text``
stored masked."""

from typing import Any

from django.db import migrations, models

BATCH = 500


def mask_search_text(apps: Any, schema_editor: Any) -> None:
    from ..masking import mask_text, masked_key

    Session = apps.get_model("console", "Session")
    rows = Session.objects.values_list("pk", "key", "channel").iterator(chunk_size=BATCH)
    for pk, key, channel in rows:
        masked, shown_channel = masked_key(key), mask_text(channel)[:64]
        if masked is not None or shown_channel != channel:
            Session.objects.filter(pk=pk).update(masked_key=masked, channel=shown_channel)
    Message = apps.get_model("console", "Message")
    # keyset pagination: the text of each batch is read once, and only changed rows are written
    last = ""
    while True:
        rows = list(Message.objects.filter(sha256__gt=last).order_by("sha256").values_list("sha256", "text")[:BATCH])
        if not rows:
            break
        for sha256, text in rows:
            masked = mask_text(text)
            if masked != text:
                Message.objects.filter(sha256=sha256).update(text=masked)
        last = rows[-1][0]


class Migration(migrations.Migration):
    dependencies = [("console", "0005_recovery_sweep")]

    operations = [
        migrations.AddField(
            model_name="session",
            name="masked_key",
            field=models.TextField(blank=True, editable=False, null=True),
        ),
        migrations.RunPython(mask_search_text, migrations.RunPython.noop, elidable=True),
    ]
