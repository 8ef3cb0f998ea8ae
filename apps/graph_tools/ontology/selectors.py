"""Reads of a project's ontology (#51): the one in force, as a member sees it, and the schema the
graph actually has (what an export writes)."""

from __future__ import annotations

import re
import uuid
from collections import Counter
from dataclasses import dataclass
from typing import Any

from django.db import connection

from apps.graph_tools.errors import OntologyNotFound
from apps.graph_tools.models import ProjectOntology
from apps.graph_tools.names import ALIASES_PROPERTY
from apps.graph_tools.ontology.document import (
    MAX_ENTITY_TYPES,
    MAX_PROPERTIES,
    MAX_RELATIONSHIP_TYPES,
    Ontology,
    TypeDef,
    ontology_parse,
)
from apps.projects.selectors import Principal, project_get

# Entities (or relationships) of each type whose properties an export reads for their datatypes.
EXPORT_SAMPLE = 200
_DATE = re.compile(r"^\d{4}-\d{2}-\d{2}$")
_DATETIME = re.compile(r"^\d{4}-\d{2}-\d{2}[T ]\d{2}:\d{2}")


def ontology_of_row(row: ProjectOntology | None) -> Ontology | None:
    """The ontology a stored row holds (None: none in force). Stored documents were checked on import."""
    if row is None or row.document is None:
        return None
    return ontology_parse({**row.document, "on_violation": row.on_violation})


def ontology_active(*, project_id: uuid.UUID) -> Ontology | None:
    """The project's ontology in force, or None. One read by primary key."""
    return ontology_of_row(ProjectOntology.objects.filter(project_id=project_id).first())


@dataclass(frozen=True)
class OntologyState:
    """A project's ontology as members see it: the one in force (or None) and the draft waiting."""

    project_id: uuid.UUID
    ontology: Ontology | None
    row: ProjectOntology | None

    @property
    def draft(self) -> dict[str, Any] | None:
        return self.row.draft if self.row is not None else None


def ontology_state(*, principal: Principal, project_ref: object) -> OntologyState:
    """The ontology of a project the principal is a member of (``ProjectNotFound`` otherwise)."""
    project = project_get(principal=principal, project_ref=project_ref)
    row = ProjectOntology.objects.filter(project_id=project.id).select_related("updated_by").first()
    return OntologyState(project_id=project.id, ontology=ontology_of_row(row), row=row)


def ontology_get(*, principal: Principal, project_ref: object) -> OntologyState:
    """As ``ontology_state``, but ``OntologyNotFound`` when the project has none in force."""
    state = ontology_state(principal=principal, project_ref=project_ref)
    if state.ontology is None:
        raise OntologyNotFound()
    return state


def _datatype(seen: Counter[str]) -> str:
    """One datatype for the kinds of value a property was seen with (the most common, numbers
    widened: integers and other numbers are numbers, dates and datetimes are datetimes)."""
    kinds = set(seen)
    if kinds <= {"integer", "number"}:
        return "integer" if kinds == {"integer"} else "number"
    if kinds <= {"date", "datetime"}:
        return "date" if kinds == {"date"} else "datetime"
    if kinds <= {"date", "datetime", "string"}:
        return "string"
    return seen.most_common(1)[0][0]


def _value_kind(json_type: str, text: str | None) -> str:
    if json_type == "number":
        return "integer" if text is not None and re.fullmatch(r"-?\d+", text) else "number"
    if json_type == "string" and text is not None:
        return "date" if _DATE.match(text) else "datetime" if _DATETIME.match(text) else "string"
    return {"boolean": "boolean", "array": "array", "object": "object"}.get(json_type, "string")


def _property_types(
    table: str, types: list[str], project_id: uuid.UUID
) -> dict[str, tuple[tuple[str, str], ...]]:
    """For each type, its sampled rows' properties with a datatype each (at most ``EXPORT_SAMPLE``
    rows a type, ``MAX_PROPERTIES`` properties). One round trip, served by the (project, type) index."""
    with connection.cursor() as cursor:
        cursor.execute(
            f"""SELECT t.type, p.key, jsonb_typeof(p.value), left(p.value #>> '{{}}', 40)
                  FROM unnest(%(types)s::text[]) AS t(type)
                  CROSS JOIN LATERAL (SELECT x.properties FROM {table} x
                                       WHERE x.project_id = %(p)s AND x.type = t.type
                                       LIMIT %(sample)s) s
                  CROSS JOIN LATERAL jsonb_each(s.properties) p
                 WHERE jsonb_typeof(p.value) <> 'null'""",
            {"types": types, "p": project_id, "sample": EXPORT_SAMPLE},
        )
        rows = cursor.fetchall()
    seen: dict[str, dict[str, Counter[str]]] = {}
    for type_name, key, json_type, text in rows:
        if key == ALIASES_PROPERTY:
            continue
        seen.setdefault(type_name, {}).setdefault(key, Counter())[_value_kind(json_type, text)] += 1
    return {
        t: tuple(sorted((k, _datatype(c)) for k, c in props.items())[:MAX_PROPERTIES])
        for t, props in seen.items()
    }


def graph_schema(*, project_id: uuid.UUID) -> Ontology:
    """The schema the project's graph actually has, as an ontology: its entity types, each
    relationship type with the types its sources and targets have (domain and range), and the
    properties sampled rows of each type hold with their datatypes. Bounded: the type counts
    (no scan), and ``EXPORT_SAMPLE`` rows of each type."""
    with connection.cursor() as cursor:
        cursor.execute(
            """SELECT ARRAY(SELECT type FROM kb.graph_entity_type_counts WHERE project_id = %(p)s
                             ORDER BY type LIMIT %(most_e)s),
                      ARRAY(SELECT ARRAY[type, src_type, dst_type] FROM kb.graph_relationship_type_counts
                             WHERE project_id = %(p)s ORDER BY type, src_type, dst_type)""",
            {"p": project_id, "most_e": MAX_ENTITY_TYPES},
        )
        entity_types, triples = cursor.fetchone()
    ends: dict[str, tuple[set[str], set[str]]] = {}
    for rel_type, src_type, dst_type in triples or []:
        domain, range_ = ends.setdefault(rel_type, (set(), set()))
        domain.add(src_type)
        range_.add(dst_type)
    rel_types = sorted(ends)[:MAX_RELATIONSHIP_TYPES]
    entity_properties = _property_types("kb.graph_objects", list(entity_types), project_id)
    rel_properties = _property_types("kb.graph_relationships", rel_types, project_id)
    declared = set(entity_types)
    return Ontology(
        entity_types=tuple(TypeDef(t, properties=entity_properties.get(t, ())) for t in entity_types),
        relationship_types=tuple(
            TypeDef(
                t,
                properties=rel_properties.get(t, ()),
                domain=tuple(sorted(ends[t][0] & declared)),
                range=tuple(sorted(ends[t][1] & declared)),
            )
            for t in rel_types
        ),
    )


def graph_schema_export(*, principal: Principal, project_ref: object) -> Ontology:
    """The schema the graph of a project the principal is a member of has (``graph_schema``)."""
    project = project_get(principal=principal, project_ref=project_ref)
    return graph_schema(project_id=project.id)


def ontology_draft_get(*, principal: Principal, project_ref: object) -> OntologyState:
    """As ``ontology_state``, but ``OntologyNotFound`` when the project has no draft waiting."""
    state = ontology_state(principal=principal, project_ref=project_ref)
    if state.draft is None:
        raise OntologyNotFound("this project has no draft ontology")
    return state
