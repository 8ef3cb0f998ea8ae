"""A reading's answer in the words of the passage it came from (issue #48): whether a passage holds
an answer (its words, or their stems where the passage inflects them), the answer as the passage
writes it, and the name a hop's answer gives for the next search. Used by ``reading``."""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from apps.agents.loop.compared import date_of
from apps.agents.loop.countries import country_of
from apps.agents.loop.grammar import FUNCTION_WORDS
from apps.graph_tools.recognizer import MONTHS, mentions_find, normalise

# Letters by which a long word of an answer is found in a passage that inflects it.
STEM = 5
# The kinds of answer (``questions.answer_kind``) that a bare date never is.
DATELESS = ("a place", "a name")


@dataclass(frozen=True)
class Reading:
    """What the model read in passages: the answer (empty: none) and the passage that gives it."""

    answer: str
    passage: dict[str, Any] | None


def reading_of(
    written: dict[str, Any], passages: Sequence[dict[str, Any]], kind: str | None = None
) -> Reading:
    """The model's JSON as a ``Reading``: an answer that no passage shown holds counts as none, and
    so does a bare date where ``kind`` (``questions.answer_kind``) asks for a place or a name. A
    word the passage inflects is given as the passage writes it ("Austria" -> "Austrian"), and so
    is a country it writes by its demonym ("United Kingdom" -> "British": ``countries``)."""
    answer = " ".join(str(written.get("answer") or "").split()).strip(" .")
    number = written.get("passage")
    if not answer or not passages or (kind in DATELESS and bare_date(answer)):
        return Reading(answer="", passage=None)
    named = passages[number - 1] if isinstance(number, int) and 1 <= number <= len(passages) else None
    holding = [p for p in passages if holds(str(p["text"]), answer)]
    if not holding and (country := country_of(answer)) is not None:
        # "United Kingdom" read in "a 1935 British film": the passage's form of the country.
        for form in (f for f in (country.demonym, country.name) if f):
            if holding := [p for p in passages if holds(str(p["text"]), form)]:
                answer = form
                break
    passage = named if named is not None and named in holding else (holding[0] if holding else None)
    if passage is None:
        return Reading(answer="", passage=None)
    written_as = _as_written(str(passage["text"]), answer)
    if kind == "a place":
        written_as = _with_region(str(passage["text"]), written_as)
    return Reading(answer=written_as, passage=passage)


def _with_region(text: str, place: str) -> str:
    """``place`` with the region the passage writes after it ("St. Louis" -> "St. Louis, Missouri"),
    as a place is written: its name, a comma, a capitalised name."""
    after = re.search(re.escape(place) + r",\s+([A-Z][\w'’.-]*(?:\s+[A-Z][\w'’-]*)*)", text)
    return f"{place}, {after.group(1).rstrip('.')}" if after else place


def bare_date(answer: str) -> bool:
    """Whether ``answer`` is a date and nothing more ("24 May 1900", "1900")."""
    rest = re.sub(rf"\b(?:{'|'.join(MONTHS)})\b|\d+|[\s,.]", "", answer, flags=re.IGNORECASE)
    return date_of(answer) is not None and not rest


def _as_written(text: str, answer: str) -> str:
    """``answer`` with each word ``text`` does not hold as such replaced by the word of ``text``
    that shares its first ``STEM`` letters: the passage's own form."""
    said = f" {plain(text)} "
    words = re.findall(r"[\w'’-]+", text)
    out = []
    for word in answer.split():
        key = plain(word)
        if not key or f" {key} " in said or len(key) < STEM:
            out.append(word)
            continue
        found = next((w for w in words if plain(w).startswith(key[:STEM])), None)
        out.append(found.split("-")[0] if found else word)
    return " ".join(out)


def plain(text: str) -> str:
    """``text`` as words without case, accents or punctuation (parentheses kept: a passage's "(born
    1950 in Tartu)" is what a reading quotes, unlike ``normalise`` which leaves qualifiers out)."""
    text = unicodedata.normalize("NFKD", text)
    text = "".join(c for c in text if not unicodedata.combining(c)).casefold()
    return " ".join(re.sub(r"[^\w\s]", " ", text).split())


def holds(text: str, answer: str) -> bool:
    """Whether a passage's ``text`` holds ``answer``: its words in order, or most of them, a word
    of five letters or more counting by its first five ("Austria" in "Austrian-American")."""
    said, key = f" {plain(text)} ", plain(answer)
    if not key:
        return False
    if f" {key} " in said:
        return True
    stems = {w[:STEM] for w in said.split() if len(w) >= STEM}

    def held(word: str) -> bool:
        return f" {word} " in said or (len(word) >= STEM and word[:STEM] in stems)

    words = key.split()
    return sum(held(w) for w in words) * 2 > len(words) or (len(words) == 1 and held(words[0]))


# A bridge longer than this many words is a sentence, not a name: the name is taken from it.
BRIDGE_MAX_WORDS = 6


def bridge_name(answer: str, question: str, head: str = "") -> str:
    """The name a reading gave for a nested description, or "" when it gave none the question does
    not hold already. A sentence gives the first name after the word that writes the description's
    ``head`` ("directed" for "director": "Agni is a 2004 film directed by Swapan Saha and produced
    by Mukul Sarkar" gives "Swapan Saha"), else the last name it mentions that the question does
    not ("Damerjog is located in eastern Djibouti" gives "Djibouti")."""
    if not answer:
        return ""
    asked = normalise(question)
    if len(answer.split()) > BRIDGE_MAX_WORDS:
        names = [m for m in mentions_find(answer) if m.kind != "date" and m.normalised not in asked]
        cue = _cue_end(answer, head)
        after = [m for m in names if cue is not None and m.start >= cue]
        answer = after[0].surface if after else (names[-1].surface if names else "")
    answer = re.sub(r"(?<=\w)- (?=[A-Z])", "-", answer)  # "Sayn- Wittgenstein", as some passages split it
    return answer if answer and normalise(answer) not in asked else ""


def _cue_end(text: str, head: str) -> int | None:
    """Where the first word of ``text`` that writes ``head`` ends ("directed" for "director", by their
    first ``STEM`` letters; a shorter head as itself), or None."""
    key = plain(head)
    if not key:
        return None
    stem = key[:STEM] if len(key) >= STEM else key
    for word in re.finditer(r"[\w'’-]+", text):
        written = plain(word.group())
        if written.startswith(stem) if len(key) >= STEM else written == key:
            return word.end()
    return None


# Words a passage writes for what a question asks, beside the question's own ("the child of X":
# "His son Sergio …"; "Where did X die?": "… died in Ljubljana"), by their first ``STEM`` letters.
CUES = {
    "child": ("son", "daughter", "children"),
    "children": ("son", "daughter"),
    "spouse": ("wife", "husband", "married"),
    "wife": ("married",),
    "husband": ("married",),
    "father": ("son", "daughter"),
    "mother": ("son", "daughter"),
    "parent": ("son", "daughter", "father", "mother"),
    "die": ("died", "death"),
    "death": ("died",),
    "born": ("birth",),
    "birth": ("born",),
    "nationality": ("citizen",),
}
_SENTENCE = re.compile(r"(?<=[.!?])\s+(?=[A-Z0-9\"“(])")


def focus(text: str, question: str, limit: int) -> str:
    """``text`` on one line in at most ``limit`` characters, keeping what bears on ``question``.

    A passage that fits is given whole. A longer one keeps its first sentence (which names its
    subject), then the sentences sharing most words with the question or their ``CUES``, then the
    rest in order while they fit; the kept sentences stay in the passage's order, "…" marking a gap.
    Measured on the docqa dev sample: 95 of 743 passages are over 800 characters, and the answer to
    "Who is the child of Vatroslav Mimica?" is the last sentence of his article's second passage."""
    text = " ".join(text.split())
    if len(text) <= limit:
        return text
    sentences = _SENTENCE.split(text)
    asked = [w for w in plain(question).split() if w not in FUNCTION_WORDS and len(w) >= 3]
    keys = {w[:STEM] for w in asked} | {c[:STEM] for w in asked for c in CUES.get(w, ())}

    def score(sentence: str) -> int:
        return sum(any(w.startswith(k) for k in keys) for w in plain(sentence).split())

    if len(sentences[0]) >= limit:
        return sentences[0][: limit - 1].rstrip() + "…"
    kept, used = [0], len(sentences[0])
    for i in sorted(range(1, len(sentences)), key=lambda i: (-score(sentences[i]), i)):
        if used + len(sentences[i]) + 2 <= limit:
            kept.append(i)
            used += len(sentences[i]) + 2
    parts, last = [], -1
    for i in sorted(kept):
        parts.append(("… " if i != last + 1 else "") + sentences[i])
        last = i
    return " ".join(parts) + (" …" if last != len(sentences) - 1 else "")
