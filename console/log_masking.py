"""The log filter: every record a handler emits is masked (``LOGGING`` in ``console.settings``)."""

from __future__ import annotations

import logging
from typing import Any

from .masking import mask_text, mask_value


def _structures_masked(args: Any) -> Any:
    """The record's arguments with dicts and lists masked as structures (a value under a secret-named key)."""
    if type(args) is dict:  # not a mapping with defaults of its own (gunicorn's access atoms): that one is
        return mask_value(args)  # formatted first, then masked as text below
    if isinstance(args, tuple):
        return tuple(mask_value(a) if isinstance(a, dict | list) else a for a in args)
    return args


class MaskSecretsFilter(logging.Filter):
    """Masks the formatted message and the traceback of every record a handler emits; dict and list arguments
    are masked as structures before they are formatted."""

    def filter(self, record: logging.LogRecord) -> bool:
        record.args = _structures_masked(record.args)
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
