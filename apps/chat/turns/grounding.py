"""Grounded names: an answer names an entity of the project's graph only when the turn's tools
returned it (issue #47), as ``citations`` checks its links.

A model writes names as well as links, and a small one writes names no tool returned ("… also the
director of the movie "The Dark Knight"", a film no call of the turn found). Every name-shaped word
sequence of the answer (``graph_tools.names.name_spans``) that is the name or an alias of an entity
of the project, and that nothing the turn was given holds, is replaced by ``LEFT_OUT``. What holds
a name (``Grounding``): an entity a tool returned in this conversation (``KnownEntities``, by id,
as citations), or the name's words anywhere in the text the turn was given: the user's message,
the conversation's earlier messages, the agent's instructions, and every tool result (a
description, a property, a passage may name an entity without being it).

Why replaced, and neither retried nor cut: a retry of the offline model costs the answer's whole
time again and may invent again, and holding an answer back to check it whole would stream
nothing until it ends; a name cut out without a trace leaves a sentence that still claims
something ("the director of the movie ""). ``LEFT_OUT`` shows where a name was, and the
small-model loop lists the results it was given after an answer that names none of them
(``agents.loop.plan_turn.unnamed_results``), so the grounded answer is still there.

It happens *while streaming*, before a token leaves the turn (``NameFilter``), so the tokens a
client receives still concatenate to exactly the stored answer: text is held back only from the
first word that could start a name until the words that could continue it end, and each such run
is checked with one indexed query of its candidate names (``entities_named``; never the graph's
list of names).
"""

from __future__ import annotations

import json
import re
import unicodedata
import uuid
from collections.abc import Callable, Iterable
from typing import Any

from asgiref.sync import sync_to_async

from apps.chat.turns.citations import ANY_LINK, KnownEntities
from apps.graph_tools.names import (
    CAPITAL,
    EDGE_PUNCTUATION,
    MENTION_MAX_WORDS,
    OTHER,
    ends_name,
    name_spans,
    word_kind,
)
from apps.graph_tools.selectors import entities_named

# What stands in the answer where it named an entity no tool of the turn returned.
LEFT_OUT = "(a name no tool returned)"
# An open run of words longer than this is checked and sent but its last RUN_KEPT_WORDS words.
RUN_MAX_WORDS = MENTION_MAX_WORDS
RUN_KEPT_WORDS = 6
# How much of the text already checked a check reads before its own (where its sentence starts).
BEFORE_CHARS = 40

Lookup = Callable[[Iterable[str]], dict[str, set[str]]]

_NON_WORD = re.compile(r"[^\w]+")
_TOKEN = re.compile(r"\S+")
_APOSTROPHES = str.maketrans("", "", "'’`")


def _words(text: str) -> str:
    """``text`` lower case, without accents and apostrophes, its words separated by one space."""
    plain = "".join(c for c in unicodedata.normalize("NFKD", text) if not unicodedata.combining(c))
    return " ".join(_NON_WORD.sub(" ", plain.casefold().translate(_APOSTROPHES)).replace("_", " ").split())


class Grounding:
    """What a turn was given: the entities tools returned (``known``, the conversation's) and the
    words of its texts (the user's message, the history, the instructions, the tool results)."""

    def __init__(self, known: KnownEntities, texts: Iterable[str] = ()) -> None:
        self.known = known
        self._text = " "
        for text in texts:
            self.add_text(text)

    def add_text(self, text: str) -> None:
        if words := _words(text):
            self._text += words + " | "

    def add_result(self, result: Any) -> None:
        self.add_text(
            result if isinstance(result, str) else json.dumps(result, default=str, ensure_ascii=False)
        )

    def holds_words(self, name: str) -> bool:
        words = _words(name)
        return bool(words) and f" {words} " in self._text

    def holds_any(self, entity_ids: Iterable[str]) -> bool:
        return any(self.known.get(i) is not None for i in entity_ids)


def _masked(text: str) -> str:
    """``text`` with its links blanked (their labels are the link's, checked as citations), each
    one a lower-case word, so that no name runs across it."""
    return ANY_LINK.sub(lambda m: "x" + " " * (len(m.group(0)) - 1), text)


def invented_spans(
    text: str, grounding: Grounding, lookup: Lookup, before: str = ""
) -> list[tuple[int, int]]:
    """The spans of ``text`` (after ``before``) that name an entity of the graph that nothing in
    ``grounding`` holds: the longest names first, each part of a name already decided left out."""
    candidates = name_spans(_masked(text), _masked(before))
    open_names = [n for n in candidates if not grounding.holds_words(n)]
    found = lookup(open_names) if open_names else {}
    decided: list[tuple[int, int, bool]] = []
    for name in sorted(candidates, key=lambda n: -len(n)):
        held = name not in found or grounding.holds_any(found[name])
        if name not in found and not grounding.holds_words(name):
            continue  # no entity is called that: it decides nothing
        for start, end in candidates[name]:
            if not any(start < d_end and d_start < end for d_start, d_end, _ in decided):
                decided.append((start, end, held))
    return sorted((start, end) for start, end, held in decided if not held)


def without_invented(text: str, grounding: Grounding, lookup: Lookup, before: str = "") -> str:
    """``text`` with every name of ``invented_spans`` replaced by ``LEFT_OUT``."""
    out, at = [], 0
    for start, end in invented_spans(text, grounding, lookup, before):
        out += [text[at:start], LEFT_OUT]
        at = end
    return "".join([*out, text[at:]])


def graph_lookup(project_id: uuid.UUID) -> Lookup:
    """The project's entities by name (``entities_named``: one indexed query a call)."""
    return lambda names: entities_named(project_id=project_id, names=names)


def _open_run_start(text: str) -> int:
    """Where the last run of words that may still grow into a longer name starts (``len(text)``
    when none is open): the text before it may be checked and sent. The run's last word may still
    be being written: it is in the run whatever it is so far."""
    tokens = list(_TOKEN.finditer(text))
    if tokens and ends_name(tokens[-1].group()):
        return len(text)
    run: list[re.Match[str]] = []
    for match in reversed(tokens):
        if run and ("\n" in text[match.end() : run[-1].start()] or ends_name(match.group())):
            break
        if match.end() < len(text) and word_kind(match.group()) == OTHER:
            break
        run.append(match)
    run.reverse()
    # A name starts with a capital (or a word whose first letter is still to come): the run's
    # glue words before it are sent.
    starts = [
        i
        for i, m in enumerate(run)
        if word_kind(m.group()) == CAPITAL or (m.end() == len(text) and not m.group().strip(EDGE_PUNCTUATION))
    ]
    if not starts:
        return len(text)
    if len(run) - starts[0] > RUN_MAX_WORDS:
        # A very long run (a heading in capitals, words with no comma between): checked but its
        # last words.
        return run[-RUN_KEPT_WORDS].start()
    return run[starts[0]].start()


class NameFilter:
    """Replace, while the text streams, the names no tool of the turn returned (``feed``: what may
    be sent now; ``flush``: the rest, once the text ends)."""

    def __init__(self, grounding: Grounding, lookup: Lookup) -> None:
        self.grounding = grounding
        self._lookup = sync_to_async(lookup)
        self._pending = ""
        self._before = ""  # the end of the text checked so far (where a sentence starts)

    async def _checked(self, text: str) -> str:
        before, self._before = self._before, (self._before + text)[-BEFORE_CHARS:]
        names = [n for n in name_spans(_masked(text), _masked(before)) if not self.grounding.holds_words(n)]
        if not names:
            return text
        found = await self._lookup(names)
        return without_invented(text, self.grounding, lambda _: found, before)

    async def feed(self, delta: str) -> str:
        self._pending += delta
        cut = _open_run_start(self._pending)
        ready, self._pending = self._pending[:cut], self._pending[cut:]
        return await self._checked(ready) if ready else ""

    async def flush(self) -> str:
        ready, self._pending = self._pending, ""
        return await self._checked(ready) if ready else ""
