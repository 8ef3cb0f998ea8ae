"""What a passage names, for checking a model's extraction against the passage (issue 26 item 3).

A small model copies names imperfectly ("LumiFintorora" for "Lumfintorora"), names what the
passage only refers to ("the country", "it") and now and then states a fact about something the
passage never mentions. ``PassageNames.find`` maps a name the model gave to the passage's own
spelling of it: the same words, a near spelling of a word sequence of the passage, or, for a
reference ("it", "the country"), the entity the passage is about (its first-named entity of a
fitting type). A name it cannot find is not in the passage: its facts are left out.
"""

from __future__ import annotations

import difflib
import re
import string
from collections.abc import Iterable

from apps.graph_tools.names import normalised_name

# Names of at most this many words are looked for in the passage.
MAX_NAME_WORDS = 8
# A name at least this similar (difflib's ratio, case aside) to a word sequence of the passage of
# the same number of words is that sequence misspelt; only names of at least FUZZY_MIN_CHARS
# characters (a short name is too near too many words).
FUZZY_RATIO = 0.85
FUZZY_MIN_CHARS = 5

_EDGE = string.punctuation + "¿¡“”‘’«»…"
_POSSESSIVE = re.compile(r"['’]s$", re.IGNORECASE)
# A reference to something the passage named before: a pronoun, or a determiner (or a possessive)
# and common nouns ("the country", "its capital").
_PRONOUNS = {"it", "they", "he", "she", "this", "that", "these", "those"}
_DETERMINERS = {"the", "this", "that", "these", "those"}
_POSSESSIVES = {"its", "their", "his", "her"}


def _spans(text: str) -> dict[str, tuple[int, str]]:
    """Every word sequence of ``text`` (up to ``MAX_NAME_WORDS``), normalised, with the position
    of its first occurrence and its spelling there (edge punctuation and a possessive "'s" off)."""
    found: dict[str, tuple[int, str]] = {}
    words = [(m.start(), m.group(0)) for m in re.finditer(r"\S+", text)]
    for i in range(len(words)):
        for j in range(i + 1, min(len(words), i + MAX_NAME_WORDS) + 1):
            raw = " ".join(w for _, w in words[i:j])
            for variant in (raw.strip(_EDGE), _POSSESSIVE.sub("", raw.strip(_EDGE)).strip(_EDGE)):
                key = normalised_name(variant)
                if key and key not in found:
                    found[key] = (words[i][0], re.sub(r"^(?i:the)\s+", "", variant))
    return found


class PassageNames:
    """The names a passage holds, and the entities a model's answer typed, to resolve references."""

    def __init__(self, text: str, types: Iterable[str] = ()) -> None:
        self.spans = _spans(text)
        # The project's entity types: a name that is one is the passage's common noun ("a country
        # in Aurelis" answered with an entity "Country"), not an entity.
        self.nouns = {normalised_name(t) for t in types}
        self._by_words: dict[int, list[str]] = {}
        for key in self.spans:
            self._by_words.setdefault(len(key.split()), []).append(key)
        self.subjects: list[tuple[int, str, str]] = []  # (position, name, type), first named first

    def typed(self, entities: Iterable[tuple[str, str]]) -> None:
        """Note the entities of the answer (name as the passage spells it, type): references
        resolve to them."""
        for name, type_ in entities:
            span = self.spans.get(normalised_name(name))
            if span is not None:
                self.subjects.append((span[0], name, type_))
        self.subjects.sort()

    def reference(self, name: str) -> tuple[bool, str | None]:
        """Whether ``name`` is a reference, and the entity it refers to: "it" is the passage's
        first-named entity; "the country" its first-named entity of type Country; "its capital"
        is not resolved (a relationship names it). A reference's nouns are in lower case."""
        given = name.strip(_EDGE).split()
        words = [w.casefold() for w in given]
        if len(words) == 1 and words[0] in _PRONOUNS:
            return True, (self.subjects[0][1] if self.subjects else None)
        if len(words) < 2 or any(w != w.casefold() for w in given[1:]):
            return False, None
        if words[0] in _DETERMINERS:
            noun = "".join(words[1:])
            for _, subject, type_ in self.subjects:
                if type_.casefold().replace("_", "").replace(" ", "") == noun:
                    return True, subject
            return True, None
        return (True, None) if words[0] in _POSSESSIVES else (False, None)

    def find(self, name: str) -> str | None:
        """``name`` as the passage has it (the model's own spelling when the passage holds it,
        the passage's for a near spelling, the entity meant for a reference); None when the
        passage does not name it, or it is one of the types."""
        key = normalised_name(name)
        if not key:
            return None
        is_reference, referred = self.reference(name)
        if is_reference:
            return referred
        if key in self.nouns:
            return None
        if key in self.spans:
            return " ".join(name.split())
        if len(key) < FUZZY_MIN_CHARS:
            return None
        close = difflib.get_close_matches(
            key, self._by_words.get(len(key.split()), []), n=1, cutoff=FUZZY_RATIO
        )
        return self.spans[close[0]][1] if close else None
