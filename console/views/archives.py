"""(being written)"""

from __future__ import annotations

from typing import Any



def archive_detail(request: Any, pk: int = 0) -> Any:
    raise NotImplementedError


def resummarize(request: Any, pk: int = 0) -> Any:
    raise NotImplementedError


def compare(request: Any, pk: int = 0) -> Any:
    raise NotImplementedError


def summary_detail(request: Any, pk: int = 0) -> Any:
    raise NotImplementedError


def summary_progress(request: Any, pk: int = 0) -> Any:
    raise NotImplementedError


def promote(request: Any, pk: int = 0) -> Any:
    raise NotImplementedError
