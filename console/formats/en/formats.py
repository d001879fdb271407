"""English: ``2 Dec 2026, 14:05`` on the page, ``2 Dec 2026, 14:05:09 UTC`` in the tooltip."""

DATE_FORMAT = "j M Y"
SHORT_DATE_FORMAT = "j M Y"
TIME_FORMAT = "H:i:s"
SHORT_DATETIME_FORMAT = "j M Y, H:i"
DATETIME_FORMAT = "j M Y, H:i:s T"
THOUSAND_SEPARATOR = ","
NUMBER_GROUPING = 3
