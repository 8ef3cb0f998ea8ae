"""A few names of the entities each relationship type reaches, read once per graph version (issue #25).

The plan step compares a question whose words name no relationship with them
(``word_relationships.value_path``): "how popular of a movie is X" with the Votes a film has ("famous", "well
known"), "what words describe film X" with its tags. The turn's loop is given its project and
graph version by the executor (``turn.turn_steps``), and the plan step reads that graph's values
here (``graph_values``: ``relationship_value_names``, bounded, cached per project and graph version;
their names embedded once, off the event loop).
"""

from __future__ import annotations

import logging
import uuid
from collections import OrderedDict

from asgiref.sync import sync_to_async
from django.db import DatabaseError

from apps.agents.loop.meaning import values_ready
from apps.graph_tools.selectors import relationship_value_names

log = logging.getLogger("kgchat.agents.values")

# Names read per relationship type (the most reached first).
VALUES_PER_TYPE = 60
_GRAPHS_KEPT = 64

Values = dict[str, tuple[str, ...]]

_READ: OrderedDict[tuple[uuid.UUID, int], Values] = OrderedDict()


def _read(project_id: uuid.UUID) -> Values:
    values = relationship_value_names(project_id=project_id, per_type=VALUES_PER_TYPE)
    values_ready(values)  # the names embedded here, in a worker thread, not on the event loop
    return values


async def graph_values(project_id: uuid.UUID | None, version: int | None) -> Values:
    """The values of the project's graph (none without a project, or when the read fails): read
    once per project and graph version, every turn when the version is unknown."""
    if project_id is None:
        return {}
    key = (project_id, version) if version is not None else None
    if key is not None and key in _READ:
        _READ.move_to_end(key)
        return _READ[key]
    try:
        values = await sync_to_async(_read)(project_id)
    except DatabaseError as exc:  # a failed read must not stop a turn: the plan goes as before
        log.warning("no relationship values for the plan: %s", exc)
        return {}
    if key is not None:
        _READ[key] = values
        while len(_READ) > _GRAPHS_KEPT:
            _READ.popitem(last=False)
    return values
