"""What a passage already mentions, given to the model that extracts it (issue #48 item 6): the
mention index's rows of the passage (``documents/mention_index.py``) that name an entity of the
graph, each name once. The model is told them with their types, the compact answer's names that
are one keep the graph's type (``compact.types_read``), and each is stored as that entity
(``answers.guided_output``), so that the change set links it. The other names the index found are
candidates: the ones the model relates are typed and proposed as new entities."""

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
    """A passage's mentions of the graph's entities, each name once, in the order the passage first
    names them."""

    linked: tuple[LinkedName, ...] = ()


def passage_guide(*, passage_id: uuid.UUID) -> PassageGuide:
    """The mentions of a passage that link an entity, read from the mention index: a name the
    passage mentions more than once (or with two spellings of one normalised key) is given once."""
    rows = (
        PassageMention.objects.filter(passage_id=passage_id, mention_name__entity__isnull=False)
        .select_related("mention_name__entity")
        .order_by("char_start", "char_end")
    )
    seen: set[str] = set()
    linked: list[LinkedName] = []
    for row in rows:
        key, entity = row.mention_name.normalised, row.mention_name.entity
        if entity is None or key in seen or len(seen) >= MOST_NAMES:
            continue
        seen.add(key)
        linked.append(LinkedName(surface=row.surface, name=entity.name, type=entity.type))
    return PassageGuide(linked=tuple(linked))
