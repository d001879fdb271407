"""One date format everywhere (``|when``) and thousands grouped in both languages (console/formats/)."""

from __future__ import annotations

import re
from datetime import UTC, date, datetime
from pathlib import Path

import pytest
from django.template import Context, Template, TemplateSyntaxError
from django.utils import timezone, translation

INSTANT = datetime(2026, 3, 10, 12, 5, 9, tzinfo=UTC)


def render(source: str, **context) -> str:
    return Template(source).render(Context(context))


@pytest.mark.parametrize(
    ("language", "short", "full"),
    [
        ("en", "10 Mar 2026, 12:05", "10 Mar 2026, 12:05:09 UTC"),
        ("zh-hans", "2026年3月10日 12:05", "2026年3月10日 12:05:09 UTC"),
    ],
)
def test_a_time_is_one_element_with_the_iso_instant_and_the_full_timestamp(language, short, full):
    with translation.override(language):
        html = render("{{ t|when }}", t=INSTANT)
    assert html == f'<time datetime="2026-03-10T12:05:09+00:00" title="{full}">{short}</time>'


def test_it_writes_the_current_time_zone_and_a_day_alone():
    with timezone.override("Asia/Shanghai"), translation.override("zh-hans"):
        assert ">2026年3月10日 20:05</time>" in render("{{ t|when }}", t=INSTANT)
        assert 'datetime="2026-03-10T20:05:09+08:00"' in render("{{ t|when }}", t=INSTANT)
    with translation.override("en"):
        assert render('{{ d|when:"date" }}', d=date(2026, 3, 10)).endswith(">10 Mar 2026</time>")
    assert render("{{ t|when }}", t=None) == "—"
    with pytest.raises(TemplateSyntaxError, match="unknown style 'bogus'"):
        render('{{ t|when:"bogus" }}', t=INSTANT)


@pytest.mark.parametrize("language", ["en", "zh-hans"])
def test_counts_and_milliseconds_are_grouped_by_thousands_in_both_languages(language):
    with translation.override(language):
        assert render("{{ n|intcomma }}", n=128000) == "128,000"
        assert render('{{ ms|floatformat:"1g" }}', ms=12345.67) == "12,345.7"


def test_roles_and_the_system_actor_are_translated():
    with translation.override("zh-hans"):
        assert render(
            "{{ r|role }} {{ x|role }} {{ a|actor }} {{ b|actor }}", r="user", x="bot", a="system", b="alice"
        ) == ("用户 bot 系统 alice")


TEMPLATES = Path(__file__).resolve().parents[2] / "templates"
#: a date an <input type="date"> reads back (a value, not a rendering)
INPUT_DATE = re.compile(r'value="\{\{ [\w.]+\|date:\'Y-m-d\' \}\}"')


def template_files() -> list[Path]:
    return sorted(TEMPLATES.rglob("*.html"))


def test_every_template_writes_times_with_when_only():
    """One date format: no ``|date``, ``naturaltime`` or ``timesince`` rendering left in a template."""
    found = []
    for path in template_files():
        text = INPUT_DATE.sub("", path.read_text(encoding="utf-8"))
        for bad in re.findall(r"\|date:[^ }%]*|\|naturaltime|\|timesince|\|timeuntil", text):
            found.append(f"{path.relative_to(TEMPLATES)}: {bad}")
    assert not found, "\n".join(found)


def test_every_counted_sentence_groups_its_number():
    """``{% blocktranslate count n=x %}{{ n }} …`` writes x bare; the counter is ``counter_n`` and ``n`` is grouped.

    (The counter must not read a name the ``with`` clause sets: Django resolves it after the ``with`` values.)"""
    found = []
    for path in template_files():
        for options in re.findall(
            r"\{% blocktranslate ([^%]*(?<![\w.])count \w+=[^%]*)%\}", path.read_text(encoding="utf-8")
        ):
            name, expr = re.search(r"(?<![\w.])count (\w+)=(\S+)", options).groups()
            shown = name.removeprefix("counter_")
            grouped = re.search(rf"\b{shown}={re.escape(expr)}\|intcomma\b", options)
            exempt = path.name == "_badge.html" or "|length" in expr  # the badge says 99+; a list shown is short
            if not exempt and not (name.startswith("counter_") and grouped):
                found.append(f"{path.relative_to(TEMPLATES)}: {options.strip()}")
    assert not found, "\n".join(found)


def test_a_counted_sentence_is_grouped_and_still_plural():
    source = (
        "{% load i18n %}{% blocktranslate count counter_n=x with n=x|intcomma %}"
        "{{ n }} run{% plural %}{{ n }} runs{% endblocktranslate %}"
    )
    with translation.override("en"):
        assert render(source, x=12345) == "12,345 runs"
        assert render(source, x=1) == "1 run"
