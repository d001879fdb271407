"""Diffs the pages show: :mod:`.words` (inline word diffs of two texts) and :mod:`.history`
(the run page's alignment of a run's input and output histories, grouped for display)."""
