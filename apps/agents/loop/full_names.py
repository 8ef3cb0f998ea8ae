"""A reading that gives a person by first name alone, completed from the passages (issue #48).

"Who is Marianus V Of Arborea's mother?" was read "Eleanor" from "he was under the tutelage of his
mother Eleanor"; the next passage shown names her "Eleanor of Arborea", as the question names her
son. The reading's answer is completed to the longer name a passage the search found gives when the rest of
that name is written in the question or in the answering passage: the same person in the same
context, not another Eleanor.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from apps.agents.loop.passage_text import Reading, plain
from apps.graph_tools.recognizer import FUNCTION_WORDS, mentions_find


def full_name(question: str, reading: Reading, shown: Sequence[dict[str, Any]]) -> Reading:
    """``reading`` with its one-word answer replaced by the first name of a passage the search
    found (``shown``: all of them, not only those read; the answering passage first) that starts with that word and whose other words (but for function
    words) are all in ``question`` or the answering passage; ``reading`` itself otherwise."""
    answer = reading.answer.strip()
    if reading.passage is None or len(answer.split()) != 1 or not answer[:1].isupper():
        return reading
    own = str(reading.passage.get("text", ""))
    context = set(plain(f"{question} {own}").split())
    texts = [own, *(str(p.get("text", "")) for p in shown if p is not reading.passage)]
    for text in texts:
        for mention in mentions_find(text):
            words = mention.surface.split()
            if mention.kind != "name" or len(words) < 2 or words[0] != answer:
                continue
            rest = [w for w in plain(" ".join(words[1:])).split() if w not in FUNCTION_WORDS]
            if rest and all(w in context for w in rest):
                return Reading(mention.surface, reading.passage)
    return reading
