"""(being written)"""

from __future__ import annotations

from typing import Any



def run_detail(request: Any, pk: int = 0) -> Any:
    raise NotImplementedError


def run_diff(request: Any, pk: int = 0) -> Any:
    raise NotImplementedError
