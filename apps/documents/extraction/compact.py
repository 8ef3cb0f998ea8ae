"""The compact answer the offline default writes for a passage (issue #48 item 6): its
relationships by source, ``{"Osmimorovia":{"LOCATED_IN":["Aurelis"],"BORDERS":["Garshaia",
"Jorgarland"]},"Nuhalburg":{"CAPITAL_OF":["Osmimorovia"]}}``, each name written once a group
instead of once a fact and no entity list at all: an entity's type is read from the graph's
relationship types (the only pair of types a relationship of that type joins, given its other end)
and from the mention index, whose mentions of the graph's entities keep the graph's type.

Measured (docs/evals.md, 2026-12-07): the answer's tokens are a passage's time, and the rows of
``{"entities":…,"relationships":…}`` wrote every name once an entity and again once a fact, and
every entity again when the model started its list over (then resumed). Asked only of a model
that answers under a grammar (llama.cpp) in a project whose types are fixed: a project that allows
new types has no pairs of types to read a type from."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from apps.agents.structured import ChatMessage, JsonQuestion
from apps.documents.extraction.guide import PassageGuide
from apps.documents.extraction.spec import (
    ANSWER_NAME,
    MAX_MENTIONS,
    TOOL_NAME,
    ExtractionSpec,
    answer_token_cap,
    relationship_lines,
)
from apps.graph_tools.names import normalised_name

if TYPE_CHECKING:
    from apps.documents.extraction.queue import ClaimedPassage

# Sources of one answer, and targets of one source's relationship of one type, at most.
MOST_SOURCES = 25
MOST_TARGETS = 20


def compact_fits(spec: ExtractionSpec) -> bool:
    """Whether a project's passages can be asked for the compact answer: its types are fixed and
    its graph has relationships, whose pairs of types give the answer's names their types."""
    return not spec.free_types and bool(spec.relationships)


def compact_schema(spec: ExtractionSpec) -> dict[str, Any]:
    """The JSON Schema of the compact answer: a map of source names to maps of relationship types
    (the project's) to lists of target names."""
    targets = {"type": "array", "items": {"type": "string"}, "minItems": 1, "maxItems": MOST_TARGETS}
    by_type = {
        "type": "object",
        "propertyNames": {"enum": list(spec.relationship_types)},
        "additionalProperties": targets,
        "minProperties": 1,
        "maxProperties": len(spec.relationship_types) + 2,
    }
    return {"type": "object", "additionalProperties": by_type, "maxProperties": MOST_SOURCES}


def compact_question(passage: ClaimedPassage, spec: ExtractionSpec, guide: PassageGuide) -> JsonQuestion:
    """The structured call that asks the model for one passage's compact answer. The instructions
    are the project's alone (the server's cache of them serves every passage); the passage's
    mentions of the graph's entities, with their types, come before the passage."""
    lines = [
        "You read one passage of a document and list the relationships it states between the "
        "entities it names, for a knowledge graph.",
        "Rules: name each entity by its full proper name as the passage gives it (resolve 'it', "
        "'its capital', 'the city' to the entity they mean); list every fact the passage states, "
        "and only those.",
        *relationship_lines(spec),
        "Answer with JSON only: each source entity once, with each type of its relationships and "
        f"their targets, as in {_example(spec)}.",
    ]
    known = ""
    if guide.linked:
        named = "; ".join(f"{m.surface} ({m.type})" for m in guide.linked)
        known = f"Entities of the graph the passage names: {named}.\n\n"
    return JsonQuestion(
        messages=[
            ChatMessage(role="system", content="\n".join(lines)),
            ChatMessage(
                role="user", content=f"Document: {passage.document_name}\n\n{known}Passage:\n{passage.text}"
            ),
        ],
        schema=compact_schema(spec),
        name=ANSWER_NAME,
        tool_name=TOOL_NAME,
        tool_description="Record the passage's relationships by source.",
        max_tokens=answer_token_cap(passage.text),
        most_items=MOST_TARGETS,
    )


def _example(spec: ExtractionSpec) -> str:
    """An answer of the compact shape in the project's relationship types, its names letters: a
    shape written with placeholders ("source") had the model write the placeholder as a name."""
    first, *others = spec.relationship_types
    if not others:
        return f'{{"A":{{"{first}":["B","C"]}},"D":{{"{first}":["A"]}}}}'
    last = others[1] if len(others) > 1 else first
    return f'{{"A":{{"{first}":["B"],"{others[0]}":["C","D"]}},"E":{{"{last}":["A"]}}}}'


def compact_facts(answer: Any) -> list[dict[str, str]]:
    """The relationships of a compact answer, in the order written (anything malformed left out)."""
    facts: list[dict[str, str]] = []
    if not isinstance(answer, dict):
        return facts
    for source, by_type in answer.items():
        if not isinstance(by_type, dict):
            continue
        for type_, targets in by_type.items():
            for target in targets if isinstance(targets, list) else []:
                if isinstance(target, str) and len(facts) < MAX_MENTIONS:
                    facts.append({"source": source, "type": type_, "target": target})
    return facts


def compact_output(answer: Any, spec: ExtractionSpec, guide: PassageGuide) -> dict[str, list[dict[str, str]]]:
    """A compact answer as the answer of ``spec.schema`` (``{"entities", "relationships"}``), to be
    cleaned as any (``answers.extraction_output_clean``): the relationships, and each name they
    join with the type ``types_read`` gives it (a name whose type stays open is not listed: the
    change set may still type it beside the other end, ``change_sets._Builder.end_of``)."""
    facts = compact_facts(answer)
    known = {normalised_name(m.surface): m.type for m in guide.linked}
    types = types_read(facts, spec.relationships, known)
    entities: dict[str, dict[str, str]] = {}
    for fact in facts:
        for name in (fact["source"], fact["target"]):
            key = normalised_name(name)
            if key in types and key not in entities:
                entities[key] = {"name": name, "type": types[key], "description": ""}
    return {"entities": list(entities.values()), "relationships": facts}


def types_read(
    facts: list[dict[str, str]], relationships: tuple[tuple[str, str, str], ...], known: dict[str, str]
) -> dict[str, str]:
    """The type of each name (normalised) of ``facts`` that the graph's relationship types
    (``(type, source type, target type)``) leave one of. Every name may be any type the
    relationships join (a name in ``known``, a mention of the graph's entity, is its type) until a
    fact narrows its ends to the pairs of types its relationship type joins, either way round (the
    change set turns round a relationship written against the graph's direction), over and over
    until nothing narrows; then, for the names still open, a fact whose pair fits as written is
    read as written. A fact that would leave a name no type narrows nothing (the change set leaves
    it out)."""
    pairs: dict[str, set[tuple[str, str]]] = {}
    for type_, source, target in relationships:
        pairs.setdefault(type_, set()).add((source, target))
    every = {t for joined in pairs.values() for pair in joined for t in pair}
    ends = [(normalised_name(f["source"]), f["type"], normalised_name(f["target"])) for f in facts]
    open_: dict[str, set[str]] = {}
    for source, _, target in ends:
        for name in (source, target):
            open_.setdefault(name, {known[name]} if name in known else set(every))
    for as_written in (False, True):
        narrowed = True
        while narrowed:
            narrowed = False
            for source, type_, target in ends:
                fits = _fitting(pairs.get(type_, set()), open_[source], open_[target], as_written)
                for name, side in ((source, 0), (target, 1)) if fits else ():
                    allowed = {pair[side] for pair in fits}
                    if allowed != open_[name]:
                        open_[name], narrowed = allowed, True
    return {name: next(iter(types)) for name, types in open_.items() if len(types) == 1}


def _fitting(
    joined: set[tuple[str, str]], sources: set[str], targets: set[str], as_written: bool
) -> set[tuple[str, str]]:
    """The pairs of types (the source's, the target's) a fact's ends may have: those its relationship
    type joins as written and, turned round, those it joins the other way (``as_written``: the
    latter only when none of the former fits)."""
    written = {(s, d) for s, d in joined if s in sources and d in targets}
    turned = {(d, s) for s, d in joined if d in sources and s in targets}
    if as_written and written:
        return written
    return written | turned
