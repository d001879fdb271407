"""Remember a pure function's results for short texts only (a long text would crowd the cache with megabytes)."""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any, TypeVar

T = TypeVar("T")


def remember_short(max_chars: int, maxsize: int) -> Callable[[Callable[..., T]], Callable[..., T]]:
    """Decorate ``fn(text, *args)``: an LRU cache of ``maxsize`` results for texts up to ``max_chars`` long.

    Longer texts are computed each time and not kept. ``fn`` must be pure and its arguments hashable.
    """

    def wrap(fn: Callable[..., T]) -> Callable[..., T]:
        cached = functools.lru_cache(maxsize=maxsize)(fn)

        @functools.wraps(fn)
        def call(text: str, *args: Any) -> T:
            return cached(text, *args) if len(text) <= max_chars else fn(text, *args)

        return call

    return wrap
