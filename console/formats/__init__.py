"""The console's locale formats (``FORMAT_MODULE_PATH``): one timestamp format per language, and digit grouping.

Django's own Chinese formats group no digits (``THOUSAND_SEPARATOR = ""``), so counts of tokens read
``128000`` there and ``128,000`` in English; the console groups by thousands with a comma in both.
Only what differs from Django's defaults is set here; Django falls back to its own module for the rest.
"""
