"""Entity names and aliases: the word sequences of a text that could be a name, and the SQL that
finds an entity by one of its aliases.

An entity's aliases are the other names it is known by: ``properties["aliases"]``, a list of
strings. Extraction keeps there the name a mention had when a change set linked or merged it into
an existing entity under another name (``documents/review.py``), so the next search by that
name finds the entity and the next extraction links the mention instead of proposing a duplicate.
``kb.entity_aliases(properties)`` is the lower-cased list (migration 0019), indexed (GIN) for the
entities that have one; ``ALIAS_MATCH`` is the predicate the index serves.
"""

from __future__ import annotations

import re
import string

# A text's names: word sequences of at most this many words, from its first MENTION_TEXT_CHARS.
MENTION_MAX_WORDS = 12
MENTION_TEXT_CHARS = 2000
ALIASES_PROPERTY = "aliases"
# At most this many aliases are kept per entity (the first ones).
MAX_ALIASES = 50
# ``{names}``: a parameter holding a text[] of lower-cased names. The ``?`` term is the index's
# predicate (a partial index over the entities that have aliases), so the planner can use it.
ALIAS_MATCH = "(o.properties ? 'aliases' AND kb.entity_aliases(o.properties) && {names}::text[])"

EDGE_PUNCTUATION = string.punctuation + "¿¡“”‘’«»…"
_POSSESSIVE = re.compile(r"['’]s$", re.IGNORECASE)


def mention_candidates(text: str) -> dict[str, tuple[int, int]]:
    """Every word sequence of ``text`` (up to ``MENTION_MAX_WORDS``), lower case, with its span.

    Each also without the punctuation at its ends and without a possessive "'s" ("Ghana's"), so a
    name at the end of a question ("… of Ghana?") or in casual phrasing is found; the widest span
    of a candidate is kept.
    """
    words = text[:MENTION_TEXT_CHARS].split()
    found: dict[str, tuple[int, int]] = {}
    for i in range(len(words)):
        for j in range(i + 1, min(len(words), i + MENTION_MAX_WORDS) + 1):
            raw = " ".join(words[i:j])
            stripped = raw.strip(EDGE_PUNCTUATION)
            for variant in {raw, stripped, _POSSESSIVE.sub("", stripped)}:
                variant = variant.casefold()
                if variant and variant.strip(EDGE_PUNCTUATION):
                    found.setdefault(variant, (i, j))
    return found


def normalised_name(name: str) -> str:
    """A name for comparing: case, spacing, edge punctuation and a leading "the" aside."""
    text = " ".join(name.casefold().split()).strip(" .,;:!?\"'()[]")
    return re.sub(r"^the ", "", text)


def same_name(a: str, b: str) -> bool:
    """Whether two names are the same as extraction compares them (``normalised_name``)."""
    return normalised_name(a) == normalised_name(b)


def aliases_with(properties: dict[str, object], name: str, entity_name: str) -> list[str] | None:
    """The entity's aliases with ``name`` added, or None when it has it already (or it is the entity's
    own name, or the entity has ``MAX_ALIASES``)."""
    value = properties.get(ALIASES_PROPERTY)
    aliases = [a for a in value if isinstance(a, str)] if isinstance(value, list) else []
    name = " ".join(name.split())
    if not name or same_name(name, entity_name) or any(same_name(name, a) for a in aliases):
        return None
    if len(aliases) >= MAX_ALIASES:
        return None
    return [*aliases, name]


# --- the names an answer writes (issue #47) ---

# Lower-case words that may stand inside a name ("Mr. Smith Goes to Washington", "Vincenzo de
# Angelis"), never at its ends.
NAME_GLUE = frozenset(
    "a an and at by da de del der di du en for from in la le les of on or the to van von y & - – :".split()
)
# Words that are not taken for a name when they stand alone, whatever their case: a sentence's first
# word is capitalised, and a graph may hold an entity called that (MetaQA has films "Yes", "Her",
# "Up" and "It", and the tags "No" and "3").
NOT_NAMES_ALONE = frozenset(
    """a about above after again against all also although an and another any are as at be because
    been before being below both but by can could did do does doing each either else even every few
    for from further had has have having he her here hers herself him himself his how however i if in
    indeed into is it its itself just later let many may me meanwhile might more most my neither no
    none nor not note now of off often on once one only or other otherwise our ours out over own
    perhaps please rather same see she should since so some still such sure than thanks that the their
    theirs them then there therefore these they this those though through thus to too two under
    unfortunately until up us very was we well were what when where whether which while who whom
    whose why will with within without would yes yet you your yours""".split()
)
# A number alone is a name only with four digits (a year's shape): shorter ones are counts.
NAME_NUMBER_DIGITS = 4
_TOKEN = re.compile(r"\S+")


def _core(token: str) -> tuple[int, int]:
    """The span of ``token`` without the punctuation at its ends (and a possessive "'s")."""
    start = len(token) - len(token.lstrip(EDGE_PUNCTUATION))
    end = len(token.rstrip(EDGE_PUNCTUATION))
    possessive = _POSSESSIVE.search(token[start:end])
    if possessive is not None and end - start > 2:
        end = start + possessive.start()
    return start, max(start, end)


def _capital(word: str) -> bool:
    return bool(word) and (word[0].isupper() or word[0].isdigit())


CAPITAL, GLUE, OTHER = "capital", "glue", "other"


def word_kind(token: str) -> str:
    """What a word (a run of non-space characters) can be in a name: its first word or last
    (``CAPITAL``: a capital letter or a digit first), a word inside it (``GLUE``: ``NAME_GLUE``, or
    punctuation alone), or nothing (``OTHER``)."""
    start, end = _core(token)
    word = token[start:end]
    if _capital(word):
        return CAPITAL
    return GLUE if not word or word.casefold() in NAME_GLUE else OTHER


_CLOSING = "\"'”’)]*_"


def ends_name(token: str) -> bool:
    """Whether a name cannot go on past this word: it ends with a comma, a semicolon, "!" or "?",
    or a full stop after four letters or more ("Washington." but not "Mr.", "Inc." or "M.D.")."""
    word = token.rstrip(_CLOSING)
    if word[-1:] in (",", ";", "!", "?"):
        return True
    core = word[:-1].lstrip(EDGE_PUNCTUATION)
    return word.endswith(".") and len(core) >= 4 and "." not in core


# What comes before a sentence's first word: nothing, a line break, or the end of a sentence (its
# closing quotes and brackets aside); and before a list item's first word: its marker.
_SENTENCE_START = re.compile(r"(?:\A|\n|[.!?][\"'”’)\]*_]*)\s*\Z")
_LIST_ITEM = re.compile(r"(?:\A|\n)\s*(?:[-*•+]|\d{1,3}[.)])\s*\Z")


def _starts_sentence(before: str) -> bool:
    """Whether a word after ``before`` is a sentence's first (a list item's first is not)."""
    tail = before[-40:]
    return bool(_SENTENCE_START.search(tail)) and not _LIST_ITEM.search(tail)


def _alone_no_name(name: str, first_of_sentence: bool) -> bool:
    """Whether one word alone is no candidate: a common word, a number shorter than a year, or the
    first word of a sentence (capitalised wherever it stands: MetaQA has the films "Following",
    "Heat" and "Signs", the tags "Country" and "Book")."""
    return (
        first_of_sentence
        or name.casefold() in NOT_NAMES_ALONE
        or (name.isdigit() and len(name) < NAME_NUMBER_DIGITS)
    )


def name_spans(text: str, before: str = "") -> dict[str, list[tuple[int, int]]]:
    """The word sequences of ``text`` written as a name could be, lower case, with their spans;
    ``before`` is the text that came before it (where its sentence starts).

    A name is written capitalised: a run of words that start with a capital letter or a digit, with
    ``NAME_GLUE`` words inside it, ended by a line break or a word ``ends_name``; every part of a run that starts and ends with such a word (up to
    ``MENTION_MAX_WORDS``) is a candidate, without the punctuation at its ends. One word alone is
    no candidate when it is a sentence's first, a word of ``NOT_NAMES_ALONE`` or a number shorter
    than a year (``_alone_no_name``). Lower-case words are never a name here: "a good film" does
    not name MetaQA's rating "good" or tag "film".
    """
    runs: list[list[tuple[int, int, bool, bool]]] = []  # (start, end, capital, first of a sentence)
    run: list[tuple[int, int, bool, bool]] = []
    last_end = 0
    for match in _TOKEN.finditer(text):
        at, token = match.start(), match.group()
        kind = word_kind(token)
        if "\n" in text[last_end:at] or kind == OTHER:
            runs.append(run)
            run = []
        if kind != OTHER:
            start, end = _core(token)
            first = _starts_sentence(before + text[:at]) if kind == CAPITAL else False
            run.append((at + start, at + end, kind == CAPITAL, first))
            if ends_name(token):
                runs.append(run)
                run = []
        last_end = at + len(token)
    runs.append(run)
    found: dict[str, list[tuple[int, int]]] = {}
    for words in runs:
        for i, (start, _, capital, first) in enumerate(words):
            if not capital:
                continue
            for j in range(i, min(len(words), i + MENTION_MAX_WORDS)):
                end = words[j][1]
                name = text[start:end]
                if not words[j][2] or (i == j and _alone_no_name(name, first)):
                    continue
                found.setdefault(name.lower(), []).append((start, end))
    return found
