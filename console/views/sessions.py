"""(being written)"""

from __future__ import annotations

from typing import Any



def session_list(request: Any, pk: int = 0) -> Any:
    raise NotImplementedError


def session_detail(request: Any, pk: int = 0) -> Any:
    raise NotImplementedError


def compress(request: Any, pk: int = 0) -> Any:
    raise NotImplementedError


def run_progress(request: Any, pk: int = 0) -> Any:
    raise NotImplementedError
