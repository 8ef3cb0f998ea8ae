"""One passage's answer as the schema and the passage allow it: unknown types, blank names and
anything malformed left out, names taken as the passage spells them (``documents/mentions.py``);
under the passage's mentions (``guided_output``), its linked entities added as the graph has them."""

from __future__ import annotations

from typing import Any

from apps.documents.extraction.guide import PassageGuide
from apps.documents.extraction.spec import MAX_MENTIONS, ExtractionSpec
from apps.documents.mentions import PassageNames
from apps.graph_tools.names import normalised_name


def _clean(value: Any, limit: int) -> str:
    return " ".join(str(value).split())[:limit] if isinstance(value, str) else ""


def extraction_output_clean(
    output: Any, spec: ExtractionSpec, *, text: str | None = None
) -> dict[str, list[dict[str, str]]]:
    """The model's answer as the schema allows it: unknown types (when new ones are not allowed),
    blank names and anything malformed are left out.

    With the passage's ``text``, the answer is checked against it (``mentions.PassageNames``): a
    name is taken as the passage spells it (a misspelt copy mended, "it" or "the country" read as
    the entity the passage is about), and an entity or relationship naming what the passage does
    not is left out. (The ends' types are checked when the change set is built, once every
    passage has typed its names: ``change_sets.change_set_build``.)"""
    entities: list[dict[str, str]] = []
    relationships: list[dict[str, str]] = []
    if not isinstance(output, dict):
        return {"entities": entities, "relationships": relationships}
    for item in (output.get("entities") or [])[:MAX_MENTIONS]:
        if not isinstance(item, dict):
            continue
        name, type_ = _clean(item.get("name"), 512), _clean(item.get("type"), 128)
        if not name or not type_ or (not spec.free_types and type_ not in spec.entity_types):
            continue
        entities.append({"name": name, "type": type_, "description": _clean(item.get("description"), 2000)})
    for item in (output.get("relationships") or [])[:MAX_MENTIONS]:
        if not isinstance(item, dict):
            continue
        source, type_, target = (_clean(item.get(k), 512) for k in ("source", "type", "target"))
        if not source or not target or not type_:
            continue
        if not spec.free_types and spec.relationship_types and type_ not in spec.relationship_types:
            continue
        relationships.append({"source": source, "type": type_[:128], "target": target})
    if text is not None:
        entities, relationships = _as_the_passage_says(entities, relationships, text, spec.entity_types)
    return {"entities": entities, "relationships": relationships}


def _as_the_passage_says(
    entities: list[dict[str, str]], relationships: list[dict[str, str]], text: str, types: tuple[str, ...]
) -> tuple[list[dict[str, str]], list[dict[str, str]]]:
    """``extraction_output_clean``'s check against the passage (and the project's entity types)."""
    names = PassageNames(text, types)
    kept: dict[str, dict[str, str]] = {}
    for entity in entities:
        found = names.find(entity["name"])
        if found is not None and normalised_name(found) not in kept:
            kept[normalised_name(found)] = {**entity, "name": found}
    names.typed((e["name"], e["type"]) for e in kept.values())
    stated: list[dict[str, str]] = []
    for rel in relationships:
        source, target = names.find(rel["source"]), names.find(rel["target"])
        if source is None or target is None or normalised_name(source) == normalised_name(target):
            continue
        stated.append({"source": source, "type": rel["type"], "target": target})
    return list(kept.values()), stated


def guided_output(
    output: dict[str, list[dict[str, str]]], guide: PassageGuide
) -> dict[str, list[dict[str, str]]]:
    """A cleaned answer (``extraction_output_clean``) given the passage's mentions: each mention of
    an entity of the graph is one of its entities, with the entity's own name and type (whatever
    type the model gave it), so that the change set links it; a relationship's end that is such a
    mention names the entity. A candidate the model typed stays as it typed it (the change set
    creates it, or merges it into a near entity)."""
    linked = {normalised_name(m.surface): m for m in guide.linked}

    def as_graph_has_it(name: str) -> str:
        mention = linked.get(normalised_name(name))
        return mention.name if mention is not None else name

    entities = [{"name": m.name, "type": m.type, "description": ""} for m in guide.linked]
    entities += [e for e in output["entities"] if normalised_name(e["name"]) not in linked]
    relationships = [
        {**rel, "source": as_graph_has_it(rel["source"]), "target": as_graph_has_it(rel["target"])}
        for rel in output["relationships"]
    ]
    return {"entities": entities, "relationships": relationships}
