"""The dashboard charts' geometry: numbers turned into bar positions for an inline SVG.

``bar_chart`` and ``hbar_chart`` know nothing about the database or the language (labels come in
already translated); only ``number`` asks Django how the current language groups digits.
"""

from __future__ import annotations

import math
import unicodedata
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from django.utils import formats


@dataclass(frozen=True)
class Series:
    """One stacked part of every bar: ``key`` names its CSS class, ``label`` its legend."""

    key: str
    label: str
    values: Sequence[int]


@dataclass(frozen=True)
class Category:
    """One bar: ``label`` for its tooltip and table, ``short`` for the axis."""

    label: str
    short: str = ""


@dataclass(frozen=True)
class Segment:
    key: str
    value: int
    title: str
    x: float
    y: float
    width: float
    height: float
    #: the page listing what this segment counts (the runs of that day and outcome); "" for none
    href: str = ""


@dataclass(frozen=True)
class Bar:
    """One category's bar: its stacked segments, and the band it stands in (the tooltip area)."""

    label: str
    total: int
    title: str
    x: float
    y: float
    width: float
    height: float
    segments: list[Segment]
    #: where the total is written (horizontal charts)
    value_x: float = 0.0
    #: the page listing what the bar counts; "" for none
    href: str = ""
    value_y: float = 0.0


@dataclass(frozen=True)
class Tick:
    label: str
    x: float
    y: float


@dataclass(frozen=True)
class Chart:
    id: str
    title: str
    width: int
    height: int
    #: the plot area
    left: float
    top: float
    right: float
    bottom: float
    bars: list[Bar]
    series: list[Series]
    x_ticks: list[Tick] = field(default_factory=list)
    y_ticks: list[Tick] = field(default_factory=list)
    horizontal: bool = False

    @property
    def total(self) -> int:
        return sum(b.total for b in self.bars)


Describe = Callable[[str, int], str]
#: ``link(index, series_key)``: the page behind a category's bar (``series_key`` None) or one of its segments
Link = Callable[[int, str | None], str]


def _no_link(index: int, key: str | None) -> str:
    return ""


def number(value: int) -> str:
    """A count as the page writes it (``intcomma``): grouped the way the current language groups digits."""
    return formats.number_format(value, force_grouping=True)


def _describe(label: str, value: int) -> str:
    return f"{label}: {number(value)}"


def compact(value: int) -> str:
    """A tick label: ``950``, ``9,500``, ``95k``, ``1.5M``."""
    if abs(value) < 10_000:
        return number(value)
    if abs(value) < 1_000_000:
        return f"{value / 1000:.1f}".rstrip("0").rstrip(".") + "k"
    return f"{value / 1_000_000:.1f}".rstrip("0").rstrip(".") + "M"


def nice_ticks(largest: int, count: int = 4) -> list[int]:
    """Round tick values from 0 up to at least ``largest``, about ``count`` steps (1, 2, 5 × 10ⁿ)."""
    if largest <= 0:
        return [0, 1]
    raw = largest / count
    magnitude = 10 ** math.floor(math.log10(raw))
    step = next(m * magnitude for m in (1, 2, 5, 10) if m * magnitude >= raw)
    step = max(1, int(step))
    return [i * step for i in range(math.ceil(largest / step) + 1)]


def text_width(text: str, size: float = 11) -> float:
    """About how wide ``text`` is in the chart's font: CJK characters are twice as wide as Latin ones."""
    wide = sum(1 for ch in text if unicodedata.east_asian_width(ch) in "WF")
    return (len(text) - wide) * size * 0.6 + wide * size * 1.05


def _stack(
    position: Callable[[float], float], label: str, series: Sequence[Series], i: int
) -> list[tuple[str, int, str, float, float]]:
    """Category ``i``'s non-zero parts: key, value, tooltip, and where each starts and ends on the value axis."""
    out, below = [], 0
    for s in series:
        value = s.values[i]
        if value:
            out.append(
                (s.key, value, f"{label} · {s.label}: {number(value)}", position(below), position(below + value))
            )
        below += value
    return out


def bar_chart(
    id: str,
    title: str,
    categories: Sequence[Category],
    series: Sequence[Series],
    *,
    width: int = 540,
    height: int = 220,
    max_labels: int = 8,
    describe: Describe = _describe,
    link: Link = _no_link,
) -> Chart:
    """Vertical stacked bars, one per category, on a y axis of round ticks; a category with 0 keeps its place."""
    totals = [sum(s.values[i] for s in series) for i in range(len(categories))]
    ticks = nice_ticks(max(totals, default=0))
    top, bottom, right = 10.0, height - 26.0, width - 6.0
    left = max(text_width(compact(t)) for t in ticks) + 12
    band = (right - left) / max(1, len(categories))
    bar_width = max(1.0, band * 0.72)

    def y_of(value: float) -> float:
        return round(bottom - (bottom - top) * value / ticks[-1], 2)

    bars = []
    for i, (category, total) in enumerate(zip(categories, totals, strict=True)):
        x = left + band * i
        parts = _stack(y_of, category.label, series, i)
        segments = [
            Segment(
                k,
                v,
                t,
                round(x + (band - bar_width) / 2, 2),
                end,
                round(bar_width, 2),
                round(start - end, 2),
                link(i, k),
            )
            for k, v, t, start, end in parts
        ]
        bars.append(
            Bar(
                category.label,
                total,
                describe(category.label, total),
                round(x, 2),
                top,
                round(band, 2),
                bottom - top,
                segments,
                href=link(i, None),
            )
        )
    step = math.ceil(len(categories) / max_labels) or 1
    x_ticks = [
        Tick(c.short or c.label, round(left + band * (i + 0.5), 2), bottom + 16)
        for i, c in enumerate(categories)
        if (len(categories) - 1 - i) % step == 0  # the latest category always has its label
    ]
    y_ticks = [Tick(compact(t), round(left - 6, 2), y_of(t)) for t in ticks]
    return Chart(id, title, width, height, round(left, 2), top, right, bottom, bars, list(series), x_ticks, y_ticks)


def hbar_chart(
    id: str,
    title: str,
    categories: Sequence[Category],
    series: Sequence[Series],
    *,
    width: int = 540,
    row_height: int = 26,
    describe: Describe = _describe,
    link: Link = _no_link,
) -> Chart:
    """Horizontal stacked bars, one row per category, labelled on the left, the total written at the end."""
    totals = [sum(s.values[i] for s in series) for i in range(len(categories))]
    largest = max(totals, default=0)
    left = min(width * 0.45, max((text_width(c.label) for c in categories), default=0) + 14)
    right = width - max(text_width(number(largest)), 10) - 10
    top, bottom = 4.0, 4.0 + row_height * len(categories)

    def x_of(value: float) -> float:
        return round(left + (right - left) * value / max(1, largest), 2)

    bars = []
    for i, (category, total) in enumerate(zip(categories, totals, strict=True)):
        y = top + row_height * i
        bar_y, bar_height = round(y + row_height * 0.2, 2), round(row_height * 0.6, 2)
        parts = _stack(x_of, category.label, series, i)
        segments = [
            Segment(k, v, t, start, bar_y, round(end - start, 2), bar_height, link(i, k))
            for k, v, t, start, end in parts
        ]
        bars.append(
            Bar(
                category.label,
                total,
                describe(category.label, total),
                0.0,
                y,
                float(width),
                float(row_height),
                segments,
                value_x=x_of(total) + 6,
                value_y=round(y + row_height / 2, 2),
                href=link(i, None),
            )
        )
    label_ticks = [Tick(b.label, round(left - 8, 2), b.value_y) for b in bars]
    return Chart(
        id, title, width, int(bottom + 4), round(left, 2), top, right, bottom, bars, list(series), [], label_ticks, True
    )
