"""What a passage already mentions, given to the model that extracts it (issue #48 item 6): the
mention index's rows of the passage (``documents/mention_index.py``), each name once, either
linked to an entity of the graph (its name and type are known: the model does not write them) or a
candidate whose type, if it is an entity at all, the model confirms."""

from __future__ import annotations

import uuid
from dataclasses import dataclass

from apps.documents.models import PassageMention

# A passage's mentions given to the model: at most this many names (in the order the passage
# names them). A passage of a few sentences names a dozen.
MOST_NAMES = 40


@dataclass(frozen=True)
class LinkedName:
    """A mention of an entity the graph has: as the passage writes it, and the entity's own name and
    type."""

    surface: str
    name: str
    type: str


@dataclass(frozen=True)
class PassageGuide:
    """A passage's mentions, each name once, in the order the passage first names them."""

    linked: tuple[LinkedName, ...] = ()
    candidates: tuple[str, ...] = ()

    @property
    def names(self) -> tuple[str, ...]:
        """Every name a relationship may join: the linked ones as the passage writes them, then the
        candidates."""
        return tuple(m.surface for m in self.linked) + self.candidates


def passage_guide(*, passage_id: uuid.UUID) -> PassageGuide:
    """The mentions of a passage, read from the mention index: a name the passage mentions more than
    once (or with two spellings of one normalised key) is given once."""
    rows = (
        PassageMention.objects.filter(passage_id=passage_id)
        .select_related("mention_name__entity")
        .order_by("char_start", "char_end")
    )
    seen: set[str] = set()
    linked: list[LinkedName] = []
    candidates: list[str] = []
    for row in rows:
        key = row.mention_name.normalised
        if key in seen or len(seen) >= MOST_NAMES:
            continue
        seen.add(key)
        entity = row.mention_name.entity
        if entity is not None:
            linked.append(LinkedName(surface=row.surface, name=entity.name, type=entity.type))
        else:
            candidates.append(row.surface)
    return PassageGuide(linked=tuple(linked), candidates=tuple(candidates))
