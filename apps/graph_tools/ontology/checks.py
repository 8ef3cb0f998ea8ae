"""The write tools' ontology checks (#51): what a planned write would break of the project's ontology.

``ontology_enforce`` runs on every write plan (``writes.write_plan``, ``write_apply``,
``write_apply_set``: an agent's proposal and its approval, REST, MCP, extraction's change sets):
in a project whose ontology refuses such writes (``on_violation: refuse``, the default) a write
that breaks it raises ``OntologyViolation`` (``400 ontology_violation``, naming each rule); in
one that flags them (``on_violation: flag``) the write goes on and its plan, diff and result carry
``ontologyViolations``, and a relationship among them is in the ontology-violations queue.

The rules: ``entity_type`` (an entity's type, or a relationship end's, is not declared),
``relationship_type`` (not declared), ``domain`` and ``range`` (the source's or target's type is
not one the relationship type allows), ``property`` (a property the type does not declare) and
``datatype`` (a value of another datatype). A merge answers for the relationships it re-points to
the kept entity, whose type their end takes. A write is checked only for what it changes: an
update of an entity's name does not answer for properties it had before the ontology.
"""

from __future__ import annotations

import uuid
from typing import Any

from apps.graph_tools.errors import OntologyViolation
from apps.graph_tools.models import GraphObject
from apps.graph_tools.ontology.document import Ontology, TypeDef, property_allowed, value_fits
from apps.graph_tools.ontology.selectors import ontology_active
from apps.graph_tools.write_plans import WritePlan


def _violation(rule: str, message: str) -> dict[str, str]:
    return {"rule": rule, "message": message}


def properties_violations(
    typedef: TypeDef | None, kind: str, type_name: str, values: dict[str, Any]
) -> list[dict[str, str]]:
    """What ``values`` (properties set, none null) break of a type's declared properties."""
    found = []
    for name, value in sorted(values.items()):
        if value is None or property_allowed(name) or typedef is None:
            continue
        datatype = typedef.property_type(name)
        if datatype is None:
            declared = ", ".join(n for n, _ in typedef.properties) or "none"
            found.append(
                _violation(
                    "property",
                    f"{kind} type {type_name} declares no property {name!r} (its properties: {declared})",
                )
            )
        elif not value_fits(value, datatype):
            found.append(
                _violation(
                    "datatype",
                    f"property {name!r} of {kind} type {type_name} is a {datatype}, not {value!r:.60}",
                )
            )
    return found


def end_violations(ontology: Ontology, rel_type: str, src_type: str, dst_type: str) -> list[dict[str, str]]:
    """What a relationship of ``rel_type`` from a ``src_type`` to a ``dst_type`` breaks."""
    relationship = ontology.relationship(rel_type)
    if relationship is None:
        declared = ", ".join(t.name for t in ontology.relationship_types[:40]) or "none"
        return [
            _violation(
                "relationship_type",
                f"relationship type {rel_type} is not declared by the ontology (declared: {declared})",
            )
        ]
    found = []
    for end, type_name, allowed, rule in (
        ("source", src_type, relationship.domain, "domain"),
        ("target", dst_type, relationship.range, "range"),
    ):
        if ontology.entity(type_name) is None:
            found.append(
                _violation("entity_type", f"the {end}'s type {type_name} is not declared by the ontology")
            )
        elif allowed and type_name not in allowed:
            found.append(
                _violation(
                    rule,
                    f"{rel_type} {'from' if end == 'source' else 'to'} a {type_name}: its {rule} is "
                    f"{' or '.join(allowed)}",
                )
            )
    return found


def _changed_properties(plan: WritePlan) -> dict[str, Any]:
    after = (plan.after or {}).get("properties") or {}
    return {
        c["field"].removeprefix("properties."): after.get(c["field"].removeprefix("properties."))
        for c in plan.changes
        if str(c.get("field", "")).startswith("properties.")
    }


def plan_violations(ontology: Ontology, plan: WritePlan) -> list[dict[str, str]]:
    """Every rule of ``ontology`` that ``plan`` would break (deletes break none)."""
    after = plan.after or {}
    if plan.tool in ("create_entity", "update_entity", "restore_entity"):
        type_name = after["type"]
        typedef = ontology.entity(type_name)
        found = []
        if typedef is None:
            declared = ", ".join(t.name for t in ontology.entity_types[:40])
            found.append(
                _violation(
                    "entity_type",
                    f"entity type {type_name} is not declared by the ontology (declared: {declared})",
                )
            )
        values = (
            _changed_properties(plan) if plan.tool == "update_entity" else (after.get("properties") or {})
        )
        return found + properties_violations(typedef, "entity", type_name, values)
    if plan.tool in ("create_relationship", "update_relationship") and plan.src and plan.dst:
        rel_type = after["type"]
        if plan.tool == "update_relationship":  # its type and ends stay: only what it sets is checked
            return properties_violations(
                ontology.relationship(rel_type), "relationship", rel_type, _changed_properties(plan)
            )
        found = end_violations(ontology, rel_type, plan.src["type"], plan.dst["type"])
        return found + properties_violations(
            ontology.relationship(rel_type), "relationship", rel_type, after.get("properties") or {}
        )
    if plan.tool == "merge_entities" and plan.src and plan.dst and plan.src["type"] != plan.dst["type"]:
        return _merge_violations(ontology, plan.src, plan.dst, plan.relationships or [])
    return []


def _merge_violations(
    ontology: Ontology, keep: dict[str, Any], lose: dict[str, Any], fates: list[dict[str, Any]]
) -> list[dict[str, str]]:
    """What the relationships a merge re-points to ``keep`` would break: their end that was ``lose``
    takes ``keep``'s type (``merges._fates``; collapsed and dropped ones are not written)."""
    moved = [r for r in fates if r.get("fate") == "repointed"]
    others = {uuid.UUID(r["dst"] if r["src"] == lose["id"] else r["src"]) for r in moved}
    types = {str(k): t for k, t in GraphObject.objects.filter(id__in=others).values_list("id", "type")}
    found: list[dict[str, str]] = []
    for r in moved:
        src_type = keep["type"] if r["src"] == lose["id"] else types.get(r["src"], "")
        dst_type = keep["type"] if r["dst"] == lose["id"] else types.get(r["dst"], "")
        found += [v for v in end_violations(ontology, r["type"], src_type, dst_type) if v not in found]
    return found


def ontology_enforce(*, project_id: uuid.UUID, plan: WritePlan) -> None:
    """Check ``plan`` against the project's ontology, if it has one: refuse it (``OntologyViolation``)
    or flag it (``plan.ontology_violations``), as the project says."""
    if not plan.changes_anything:
        return
    ontology = ontology_active(project_id=project_id)
    if ontology is None:
        return
    found = plan_violations(ontology, plan)
    if not found:
        return
    if ontology.on_violation == "flag":
        plan.ontology_violations = found
        return
    rules = "; ".join(f"{v['rule']}: {v['message']}" for v in found)
    raise OntologyViolation(
        f"{plan.tool} breaks the project's ontology ({rules}); nothing was written", violations=found
    )
