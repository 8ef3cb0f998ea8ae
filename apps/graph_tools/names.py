"""Entity names and aliases: the word sequences of a text that could be a name, and the SQL that
finds an entity by one of its aliases.

An entity's aliases are the other names it is known by: ``properties["aliases"]``, a list of
strings. Extraction keeps there the name a mention had when a change set linked or merged it into
an existing entity under another name (``documents/change_sets.py``), so the next search by that
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

_EDGE_PUNCTUATION = string.punctuation + "¿¡“”‘’«»…"
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
            stripped = raw.strip(_EDGE_PUNCTUATION)
            for variant in {raw, stripped, _POSSESSIVE.sub("", stripped)}:
                variant = variant.casefold()
                if variant and variant.strip(_EDGE_PUNCTUATION):
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
