"""Sources of a plain answer that cites none (issue #48): the passages whose words it used.

Plain RAG asks the model to cite the passages it uses, and a small model rarely does (the 1.5B
offline default cited no passage in 10 answers of the docqa dev sample, though 5 were right). So when
a plain answer over passages cites none, the passages that hold what the answer adds to the question
are cited after it, under "Sources:", as the links the model was asked to write. What an answer
adds: the names and dates the mention recognizer finds in it (``graph_tools.recognizer``) and its
numbers, that the question does not hold. A passage holds one when its normalised text holds it whole. The
passages holding the most of them are cited, at most ``MAX_SOURCES``, in search order; none when no
passage holds any (an answer from nowhere is not given a source).

This is attribution by overlap, done after the answer: it shows where the answer's facts are
written, not what the model read.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any

from apps.graph_tools.recognizer import mentions_find, normalise

MAX_SOURCES = 2
# A number of two digits or more ("1889", the "66" of "66 years"): the recognizer finds dates, not
# a year or a count on its own.
_NUMBER = re.compile(r"\b\d{2,}\b")


def answer_sources(answer: str, question: str, passages: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
    """The passages (``search_passages`` rows: ``id``, ``document_name``, ``text``) that hold the most
    of what ``answer`` adds to ``question``, best first, at most ``MAX_SOURCES``; [] when none does."""
    asked = f" {normalise(question)} "
    found = {m.normalised for m in mentions_find(answer)} | set(_NUMBER.findall(answer))
    added = {key for key in found if key and f" {key} " not in asked}
    if not added:
        return []
    held = [
        (sum(f" {key} " in text for key in added), i)
        for i, text in enumerate(f" {normalise(str(p['text']))} " for p in passages)
    ]
    best = max((count for count, _ in held), default=0)
    if best == 0:
        return []
    return [passages[i] for count, i in held if count == best][:MAX_SOURCES]


def sources_text(passages: Sequence[dict[str, Any]]) -> str:
    """The line that cites ``passages`` after an answer: "\\n\\nSources: [doc](passage:<id>), …"."""
    links = ", ".join(f"[{p['document_name']}](passage:{p['id']})" for p in passages)
    return f"\n\nSources: {links}" if links else ""
