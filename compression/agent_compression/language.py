"""The one language test of the library: is a text written in Chinese or in English?

The prompt's instructions, the summary's headings and the drift detector's cue words all follow it.
A Chinese character weighs like half a word: a Chinese sentence that names ``deploy.sh`` or
``pytest -q`` is still Chinese, and an English sentence that ends in "谢谢" is still English.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from typing import Literal

Language = Literal["en", "zh"]

#: CJK unified ideographs, extension A and the compatibility block
CJK = re.compile(r"[\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff]")
LATIN_WORD = re.compile(r"[A-Za-z]{2,}")
#: how much of each of several texts is looked at: a language shows in its opening, and a long one costs nothing
SAMPLE_CHARS = 4_000


def detect_language(text: str) -> Language:
    """``"zh"`` when the text is mostly Chinese (a CJK character weighs half a Latin word), else ``"en"``."""
    cjk = len(CJK.findall(text))
    words = len(LATIN_WORD.findall(text))
    return "zh" if cjk and cjk >= words * 0.5 else "en"


def is_chinese(text: str) -> bool:
    """Whether ``text`` is written in Chinese (:func:`detect_language`)."""
    return detect_language(text) == "zh"


def texts_language(texts: Iterable[str]) -> Language:
    """The language of several texts together (a session's user turns): each text's opening counts."""
    return detect_language("\n".join(t[:SAMPLE_CHARS] for t in texts))
