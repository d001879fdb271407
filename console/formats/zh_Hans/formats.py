"""Simplified Chinese: ``2026年12月2日 14:05`` on the page, ``2026年12月2日 14:05:09 UTC`` in the tooltip.

Digits are grouped by thousands with a comma, as Chinese software interfaces write token counts.
"""

DATE_FORMAT = "Y年n月j日"
SHORT_DATE_FORMAT = "Y年n月j日"
TIME_FORMAT = "H:i:s"
SHORT_DATETIME_FORMAT = "Y年n月j日 H:i"
DATETIME_FORMAT = "Y年n月j日 H:i:s T"
THOUSAND_SEPARATOR = ","
NUMBER_GROUPING = 3
