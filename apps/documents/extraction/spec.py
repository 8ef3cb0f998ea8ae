"""What the model is asked about one passage: the JSON Schema of its answer, built from the
project's entity and relationship types, and the prompt (``extraction_question``). The offline
default is asked for a compact answer instead where the project's types allow it
(``compact.py``, #48)."""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from apps.agents.structured import ChatMessage, JsonQuestion
from apps.documents.models import ExtractionSettings
from apps.graph_tools.selectors import graph_vocabulary

if TYPE_CHECKING:
    from apps.documents.extraction.queue import ClaimedPassage

MAX_MENTIONS = 50  # entities and relationships read from one passage's answer
# The answer's name (``response_format``'s) and the tool offered to a model without constrained output.
ANSWER_NAME = "extraction"
TOOL_NAME = "record_extraction"
MAX_OUTPUT_TOKENS = 1500
# A passage's answer may take this many tokens plus one a character of the passage (at most
# MAX_OUTPUT_TOKENS): a compact answer of a country's paragraph (~450 characters, 12 facts) took
# ~330, and a model that loops on a short passage stops sooner. An answer cut there keeps the
# items it finished (``json_answers.json_cut_short``).
ANSWER_TOKENS_BASE = 384


@dataclass(frozen=True)
class ExtractionSpec:
    """What the model is asked for one passage: the schema, the types it may use, its instructions."""

    schema: dict[str, Any]
    entity_types: tuple[str, ...]
    relationship_types: tuple[str, ...]
    relationships: tuple[tuple[str, str, str], ...]
    free_types: bool


def extraction_spec(*, project_id: uuid.UUID) -> ExtractionSpec:
    """The JSON Schema of one passage's answer, built from the project's entity and relationship
    types (enums): its ontology's when it has one (#51), whatever ``allow_new_types`` says; else its
    graph's, or free strings when the project allows new types or has none yet."""
    vocabulary = graph_vocabulary(project_id=project_id)
    settings_row = ExtractionSettings.objects.filter(project_id=project_id).first()
    allow_new = bool(settings_row and settings_row.allow_new_types) and not vocabulary.declared
    free = allow_new or not vocabulary.entity_types
    entity_type: dict[str, Any] = {"type": "string"}
    relationship_type: dict[str, Any] = {"type": "string"}
    if not free:
        entity_type = {"type": "string", "enum": list(vocabulary.entity_types)}
        if vocabulary.relationship_types:
            relationship_type = {"type": "string", "enum": list(vocabulary.relationship_types)}
    schema = {
        "type": "object",
        "properties": {
            "entities": {
                "type": "array",
                "items": {
                    "type": "object",
                    # No description: on the offline default it doubled the tokens of an answer (and
                    # so its time); one given anyway is kept.
                    "properties": {"name": {"type": "string"}, "type": entity_type},
                    "required": ["name", "type"],
                    "additionalProperties": False,
                },
            },
            "relationships": {
                "type": "array",
                "items": {
                    "type": "object",
                    "properties": {
                        "source": {"type": "string"},
                        "type": relationship_type,
                        "target": {"type": "string"},
                    },
                    "required": ["source", "type", "target"],
                    "additionalProperties": False,
                },
            },
        },
        "required": ["entities", "relationships"],
        "additionalProperties": False,
    }
    return ExtractionSpec(
        schema=schema,
        entity_types=vocabulary.entity_types,
        relationship_types=vocabulary.relationship_types,
        relationships=vocabulary.relationships,
        free_types=free,
    )


def answer_token_cap(text: str) -> int:
    """The most tokens the model may answer a passage of ``text`` with."""
    return min(MAX_OUTPUT_TOKENS, ANSWER_TOKENS_BASE + len(text))


def relationship_lines(spec: ExtractionSpec) -> list[str]:
    """The prompt's lines naming the project's relationships: each with the types it joins."""
    if not spec.relationships:
        return []
    return [
        "Relationships (source type -TYPE-> target type): "
        + "; ".join(f"{s} -{t}-> {d}" for t, s, d in spec.relationships)
        + "."
    ]


def _vocabulary_lines(spec: ExtractionSpec) -> list[str]:
    lines = []
    if spec.entity_types:
        lines.append("Entity types: " + ", ".join(spec.entity_types) + ".")
    lines += relationship_lines(spec)
    if spec.free_types:
        lines.append("You may use other types when none of these fits.")
    return lines


def extraction_prompt(
    passage: ClaimedPassage, spec: ExtractionSpec, *, rows: bool = False
) -> list[ChatMessage]:
    """The model's messages for one passage: what to extract, under which types, then the text;
    with ``rows``, the answer's items are asked as rows (``compact_json_grammar``)."""
    lines = [
        "You read one passage of a document and list the entities it names and the relationships it "
        "states between them, for a knowledge graph.",
        "Rules: give each entity its full proper name as the passage gives it (resolve 'it', 'its "
        "capital', 'the city' to the entity they mean); list only facts the passage states; every "
        "relationship's source and target must be names from your entities list; list each entity once.",
        *_vocabulary_lines(spec),
    ]
    if rows:
        lines.append(
            'Answer with JSON only: {"entities":[["name","type"],...],'
            '"relationships":[["source","TYPE","target"],...]}.'
        )
    else:
        lines.append('Answer with JSON only: {"entities": [...], "relationships": [...]}.')
    return [
        ChatMessage(role="system", content="\n".join(lines)),
        ChatMessage(role="user", content=f"Document: {passage.document_name}\n\nPassage:\n{passage.text}"),
    ]


def extraction_question(passage: ClaimedPassage, spec: ExtractionSpec, *, rows: bool = False) -> JsonQuestion:
    """The structured call that asks the model about one passage."""
    return JsonQuestion(
        messages=extraction_prompt(passage, spec, rows=rows),
        schema=spec.schema,
        name=ANSWER_NAME,
        tool_name=TOOL_NAME,
        tool_description="Record the passage's entities and relationships.",
        max_tokens=answer_token_cap(passage.text),
        most_items=MAX_MENTIONS,
    )
