"""A project's ontology as a document (#51): what an import file holds, checked and put in one order.

The file (YAML or JSON; Turtle is read into the same shape by ``turtle.py``)::

    entity_types:
      Person: {description: "A human being", properties: {born: date, height: number}}
      City: {}
    relationship_types:
      LIVES_IN: {domain: [Person], range: [City], properties: {since: integer}}
    on_violation: refuse        # or flag (optional)

``domain`` and ``range`` list the entity types a relationship's source and target may have (left
out or empty: any declared type). A type's ``properties`` are all the properties its entities (or
relationships) may have, each with a datatype of ``DATATYPES``; ``aliases`` (the names an entity is
also known by) is always allowed. Every bound is checked here: a file past one is refused whole.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import date, datetime
from typing import Any

from apps.core.inputs import input_problem
from apps.graph_tools.errors import OntologyInvalid
from apps.graph_tools.names import ALIASES_PROPERTY
from apps.graph_tools.registry import GraphVocabulary

DATATYPES = ("string", "integer", "number", "boolean", "date", "datetime", "array", "object")
MAX_ENTITY_TYPES = 500
MAX_RELATIONSHIP_TYPES = 500
MAX_PROPERTIES = 100  # of one type
MAX_TYPE_NAME = 128  # as an entity's or relationship's type column
MAX_PROPERTY_NAME = 200
MAX_DESCRIPTION = 2000
# (relationship, source type, target type) triples a vocabulary lists; beyond them the enums stay.
MAX_TRIPLES = 5000
ENFORCEMENTS = ("refuse", "flag")
# A type or property name: printable, no leading or trailing space.
_NAME = re.compile(r"^[^\s\x00-\x1f\x7f](?:[^\x00-\x1f\x7f]*[^\s\x00-\x1f\x7f])?$")


@dataclass(frozen=True)
class TypeDef:
    """An entity type or a relationship type: its name, description and properties with datatypes;
    a relationship type's ``domain`` and ``range`` (empty: any declared entity type)."""

    name: str
    description: str = ""
    properties: tuple[tuple[str, str], ...] = ()
    domain: tuple[str, ...] = ()
    range: tuple[str, ...] = ()

    def property_type(self, name: str) -> str | None:
        return dict(self.properties).get(name)


@dataclass(frozen=True)
class Ontology:
    entity_types: tuple[TypeDef, ...]
    relationship_types: tuple[TypeDef, ...]
    on_violation: str = "refuse"

    def entity(self, name: str) -> TypeDef | None:
        return next((t for t in self.entity_types if t.name == name), None)

    def relationship(self, name: str) -> TypeDef | None:
        return next((t for t in self.relationship_types if t.name == name), None)

    def as_document(self, *, with_setting: bool = True) -> dict[str, Any]:
        """The file's shape (``ontology_parse`` reads it back to the same ``Ontology``)."""

        def one(t: TypeDef, relationship: bool) -> dict[str, Any]:
            out: dict[str, Any] = {}
            if t.description:
                out["description"] = t.description
            if relationship and t.domain:
                out["domain"] = list(t.domain)
            if relationship and t.range:
                out["range"] = list(t.range)
            if t.properties:
                out["properties"] = dict(t.properties)
            return out

        document: dict[str, Any] = {
            "entity_types": {t.name: one(t, False) for t in self.entity_types},
            "relationship_types": {t.name: one(t, True) for t in self.relationship_types},
        }
        if with_setting:
            document["on_violation"] = self.on_violation
        return document

    def vocabulary(self) -> GraphVocabulary:
        """The types as the tools' schemas and extraction name them: every entity type, and each
        relationship as (type, source type, target type) over its domain and range."""
        entity_types = tuple(t.name for t in self.entity_types)
        triples = [
            (r.name, s, d)
            for r in self.relationship_types
            for s in (r.domain or entity_types)
            for d in (r.range or entity_types)
        ]
        return GraphVocabulary(
            entity_types=entity_types, relationships=tuple(sorted(triples)[:MAX_TRIPLES]), declared=True
        )


def _name(value: Any, at: str, limit: int) -> str:
    if not isinstance(value, str) or not _NAME.match(value) or len(value) > limit:
        raise OntologyInvalid(
            f"{at}: a name must be text of 1 to {limit} printable characters, without spaces at "
            f"either end (got {value!r:.80})"
        )
    return value


def _mapping(value: Any, at: str) -> dict[str, Any]:
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise OntologyInvalid(f"{at}: expected a mapping of names to definitions")
    return value


def _properties(value: Any, at: str) -> tuple[tuple[str, str], ...]:
    found = _mapping(value, at)
    if len(found) > MAX_PROPERTIES:
        raise OntologyInvalid(f"{at}: more than {MAX_PROPERTIES} properties")
    out = []
    for name, datatype in found.items():
        _name(name, f"{at}.{name}", MAX_PROPERTY_NAME)
        if datatype not in DATATYPES:
            raise OntologyInvalid(
                f"{at}.{name}: unknown datatype {datatype!r:.60}; one of {', '.join(DATATYPES)}"
            )
        out.append((name, datatype))
    return tuple(sorted(out))


def _description(value: Any, at: str) -> str:
    if value is None:
        return ""
    if not isinstance(value, str) or len(value) > MAX_DESCRIPTION:
        raise OntologyInvalid(f"{at}.description: text of at most {MAX_DESCRIPTION} characters")
    return value.strip()


def _type_list(value: Any, at: str, known: set[str]) -> tuple[str, ...]:
    items = [value] if isinstance(value, str) else value
    if items is None:
        return ()
    if not isinstance(items, list):
        raise OntologyInvalid(f"{at}: a list of entity types")
    for item in items:
        if item not in known:
            raise OntologyInvalid(f"{at}: {item!r:.80} is not an entity type of this ontology")
    return tuple(sorted(set(items)))


def _definition(name: str, value: Any, at: str, keys: set[str]) -> dict[str, Any]:
    definition = _mapping(value, f"{at}.{name}")
    unknown = sorted(set(definition) - keys)
    if unknown:
        raise OntologyInvalid(
            f"{at}.{name}: unknown key {unknown[0]!r:.60}; known: {', '.join(sorted(keys))}"
        )
    return definition


def ontology_parse(data: Any) -> Ontology:
    """An ``Ontology`` from a file's parsed content, or ``OntologyInvalid`` naming the first fault."""
    if not isinstance(data, dict):
        raise OntologyInvalid("an ontology is a mapping with entity_types and relationship_types")
    problem = input_problem(data)
    if problem is not None:
        raise OntologyInvalid(f"{problem[0] or '(document)'}: {problem[1]}")
    unknown = sorted(set(data) - {"entity_types", "relationship_types", "on_violation"})
    if unknown:
        raise OntologyInvalid(
            f"unknown key {unknown[0]!r:.60}: entity_types, relationship_types, on_violation"
        )
    entities, relationships = (
        _mapping(data.get("entity_types"), "entity_types"),
        _mapping(data.get("relationship_types"), "relationship_types"),
    )
    if not entities:
        raise OntologyInvalid("entity_types: an ontology declares at least one entity type")
    if len(entities) > MAX_ENTITY_TYPES or len(relationships) > MAX_RELATIONSHIP_TYPES:
        raise OntologyInvalid(
            f"at most {MAX_ENTITY_TYPES} entity types and {MAX_RELATIONSHIP_TYPES} relationship types"
        )
    on_violation = data.get("on_violation") or "refuse"
    if on_violation not in ENFORCEMENTS:
        raise OntologyInvalid(f"on_violation: {on_violation!r:.40} is not one of {', '.join(ENFORCEMENTS)}")
    entity_types = []
    for name, value in entities.items():
        at = f"entity_types.{_name(name, 'entity_types', MAX_TYPE_NAME)}"
        definition = _definition(name, value, "entity_types", {"description", "properties"})
        entity_types.append(
            TypeDef(
                name,
                _description(definition.get("description"), at),
                _properties(definition.get("properties"), f"{at}.properties"),
            )
        )
    known = set(entities)
    relationship_types = []
    for name, value in relationships.items():
        at = f"relationship_types.{_name(name, 'relationship_types', MAX_TYPE_NAME)}"
        definition = _definition(
            name, value, "relationship_types", {"description", "properties", "domain", "range"}
        )
        relationship_types.append(
            TypeDef(
                name,
                _description(definition.get("description"), at),
                _properties(definition.get("properties"), f"{at}.properties"),
                domain=_type_list(definition.get("domain"), f"{at}.domain", known),
                range=_type_list(definition.get("range"), f"{at}.range", known),
            )
        )
    return Ontology(
        entity_types=tuple(sorted(entity_types, key=lambda t: t.name)),
        relationship_types=tuple(sorted(relationship_types, key=lambda t: t.name)),
        on_violation=on_violation,
    )


def value_fits(value: Any, datatype: str) -> bool:
    """Whether a property value has ``datatype`` (a date or datetime is ISO 8601 text)."""
    if datatype == "string":
        return isinstance(value, str)
    if datatype == "integer":
        return isinstance(value, int) and not isinstance(value, bool)
    if datatype == "number":
        return isinstance(value, int | float) and not isinstance(value, bool)
    if datatype == "boolean":
        return isinstance(value, bool)
    if datatype in ("date", "datetime"):
        parse = date.fromisoformat if datatype == "date" else datetime.fromisoformat
        try:
            parse(value)
        except (TypeError, ValueError):
            return False
        return True
    if datatype == "array":
        return isinstance(value, list)
    return isinstance(value, dict)


def property_allowed(name: str) -> bool:
    """Properties every type may have whatever it declares: an entity's aliases."""
    return name == ALIASES_PROPERTY
