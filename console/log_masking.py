"""The log filter: every record a handler emits is masked (``LOGGING`` in ``console.settings``)."""

from __future__ import annotations

import logging

from .masking import mask_text


class MaskSecretsFilter(logging.Filter):
    """Masks the formatted message and the traceback of every record a handler emits."""

    def filter(self, record: logging.LogRecord) -> bool:
        try:
            message = record.getMessage()
        except Exception:  # noqa: BLE001 - a bad format string: let the handler report it as usual
            return True
        record.msg, record.args = mask_text(message), ()
        if record.exc_info and not record.exc_text:
            record.exc_text = logging.Formatter().formatException(record.exc_info)
        if record.exc_text:
            record.exc_text = mask_text(record.exc_text)
        if record.stack_info:
            record.stack_info = mask_text(record.stack_info)
        return True
