"""A reading that answers a family question with a relative of another degree (issue #48).

"Who is the father of Gia Coppola?" was read "Francis Ford Coppola" from "She is a granddaughter
of Francis Ford Coppola, the daughter of Gian-Carlo Coppola": the 1.5B model took the first
relative the passage names. Where the words just before the answer in its passage name another
degree of kinship than the question asks (a grandparent, a niece, a cousin, an in-law), the
reading loop asks again, the answer excluded, as it does for an answer the question itself names.
"""

from __future__ import annotations

import re
from collections.abc import Awaitable, Callable
from typing import Any

from apps.agents.loop.passage_text import Reading, plain

# The kinship words a question asks by (singular, plain).
_ASKED = re.compile(
    r"\b(father|mother|parent|son|daughter|child|children|spouse|wife|husband|brother|sister|sibling)s?\b"
)
# Words of another degree; a question that uses one asks that degree (and is not checked).
_OTHER_DEGREE = re.compile(
    r"\b(?:grand\w*|great|step\w*|half|niece|nephew|cousin|uncle|aunt|in law|godfather|godmother)\b"
)
# Words read before the answer: "she is a granddaughter of <answer>", "his maternal uncle <answer>".
BEFORE_WORDS = 4


def other_degree(question: str, answer: str, text: str) -> bool:
    """Whether every place the passage ``text`` names ``answer`` follows, within ``BEFORE_WORDS``
    words, a kinship word of another degree than the family relation ``question`` asks for, and
    none of the asked one. False for a question that asks no family relation, asks another degree
    itself ("grandfather", "father-in-law"), or an answer the text does not name as written."""
    asked = plain(question)
    if not _ASKED.search(asked) or _OTHER_DEGREE.search(asked):
        return False
    said, name = f" {plain(text)} ", plain(answer)
    if not name:
        return False
    starts = [m.start() for m in re.finditer(re.escape(f" {name} "), said)]
    if not starts:
        return False
    for start in starts:
        before = " ".join(said[:start].split()[-BEFORE_WORDS:])
        if not _OTHER_DEGREE.search(before) or _ASKED.search(before):
            return False
    return True


async def kin_checked(
    read: Callable[[str, list[dict[str, Any]], str], Awaitable[Reading | None]],
    question: str,
    shown: list[dict[str, Any]],
    reading: Reading | None,
) -> Reading | None:
    """``reading``, or the reading asked again without its answer where its passage names that
    answer as a relative of another degree than ``question`` asks (``kinship.other_degree``) and
    the second reading does not."""
    if reading is None or reading.passage is None:
        return reading
    if not other_degree(question, reading.answer, str(reading.passage["text"])):
        return reading
    again = await read(question, shown, reading.answer)
    if again is None or not again.answer or again.passage is None:
        return reading
    return reading if other_degree(question, again.answer, str(again.passage["text"])) else again
