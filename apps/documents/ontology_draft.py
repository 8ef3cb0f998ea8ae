"""A project's ontology proposed from a sample of its documents (#51), kept as a draft to review.

For a project with no ontology yet: a few passages of each document (``SAMPLE_PASSAGES`` in all, at
most ``SAMPLE_CHARS`` of text) and the types its graph already has are given to the model (through
``apps.agents.structured``, as extraction is) under a JSON Schema of three flat lists: entity types,
relationship types with one domain and one range, and properties with datatypes. The answer is
mended (names trimmed and bounded, relationship types written ``UPPER_SNAKE``, a domain or range
that is no entity type of the answer (a small model writes an example's name there) left open,
repeats dropped), checked as any imported ontology is,
and stored as the project's draft (``graph_tools.ontology.services.ontology_draft_store``); what was
mended is in the draft's notes. Accepting it imports it (``ontology_draft_accept``).
"""

from __future__ import annotations

import re
from typing import Any

from asgiref.sync import sync_to_async
from django.db.models import F, Window
from django.db.models.functions import RowNumber

from apps.agents.structured import ChatMessage, JsonQuestion, LLMError, Provider, structured_model
from apps.core.errors import ServiceError
from apps.documents.extraction.services import extraction_model
from apps.documents.models import Passage
from apps.graph_tools.errors import OntologyExists, OntologyInvalid
from apps.graph_tools.models import ProjectOntology
from apps.graph_tools.ontology.document import DATATYPES, MAX_TYPE_NAME
from apps.graph_tools.ontology.selectors import ontology_active
from apps.graph_tools.ontology.services import ontology_draft_store
from apps.graph_tools.selectors import graph_vocabulary
from apps.projects.models import Role
from apps.projects.selectors import Principal, project_get

SAMPLE_PASSAGES = 12
PER_DOCUMENT = 3
SAMPLE_CHARS = 8000
PASSAGE_CHARS = 1200
MOST_TYPES = 30
MAX_TOKENS = 1200
ANSWER_NAME = "ontology"
TOOL_NAME = "record_ontology"


class NoDocuments(ServiceError):
    """This project has no documents to propose an ontology from: upload some first."""

    status = 409
    code = "no_documents"


class DraftFailed(ServiceError):
    """The model could not propose an ontology."""

    status = 502
    code = "draft_failed"


def _list_of(properties: dict[str, Any]) -> dict[str, Any]:
    return {
        "type": "array",
        "maxItems": MOST_TYPES,
        "items": {
            "type": "object",
            "properties": properties,
            "required": list(properties),
            "additionalProperties": False,
        },
    }


ANSWER_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "entity_types": _list_of({"name": {"type": "string"}, "description": {"type": "string"}}),
        "relationship_types": _list_of(
            {"name": {"type": "string"}, "domain": {"type": "string"}, "range": {"type": "string"}}
        ),
        "properties": _list_of(
            {
                "type": {"type": "string"},
                "name": {"type": "string"},
                "datatype": {"type": "string", "enum": list(DATATYPES)},
            }
        ),
    },
    "required": ["entity_types", "relationship_types", "properties"],
    "additionalProperties": False,
}


def sample_passages(*, project_id: Any) -> list[tuple[str, str]]:
    """(document name, text) of the first ``PER_DOCUMENT`` passages of each document, at most
    ``SAMPLE_PASSAGES`` and ``SAMPLE_CHARS`` of text in all."""
    rows = (
        Passage.objects.filter(project_id=project_id)
        .annotate(n=Window(RowNumber(), partition_by=[F("document_id")], order_by=F("ordinal").asc()))
        .filter(n__lte=PER_DOCUMENT)
        .order_by("document__name", "ordinal")
        .values_list("document__name", "text")[:SAMPLE_PASSAGES]
    )
    sample, total = [], 0
    for name, text in rows:
        piece = text[:PASSAGE_CHARS]
        if total + len(piece) > SAMPLE_CHARS:
            break
        sample.append((name, piece))
        total += len(piece)
    return sample


def draft_question(
    sample: list[tuple[str, str]], known_types: tuple[str, ...], *, rows: bool = False
) -> JsonQuestion:
    """The structured call that asks for an ontology; with ``rows``, its lists' items are asked as
    rows of values (the offline default's ``compact_json_grammar``), as extraction words it."""
    lines = [
        "You design the schema (ontology) of a knowledge graph from a sample of a project's documents.",
        "List the kinds of things the documents talk about as entity types (singular, e.g. Person, City), "
        "the relationships between them as relationship types (UPPER_SNAKE_CASE verbs, e.g. LIVES_IN, each "
        "with the entity type of its source as domain and of its target as range: types from your list, "
        "never the name of one thing), and the facts stated "
        f"about each entity type as properties with a datatype ({', '.join(DATATYPES)}).",
        f"At most {MOST_TYPES} of each. Only what the documents show.",
    ]
    if known_types:
        lines.append(
            "The graph already has these entity types; reuse them: " + ", ".join(known_types[:60]) + "."
        )
    if rows:
        lines.append(
            'Answer with JSON only: {"entity_types":[["Person","a human being"],...],'
            '"relationship_types":[["LIVES_IN","Person","City"],...],'
            '"properties":[["Person","birth_year","integer"],...]}.'
        )
    else:
        lines.append(
            'Answer with JSON only: {"entity_types": [...], "relationship_types": [...], "properties": [...]}.'
        )
    passages = "\n\n".join(f"[{name}]\n{text}" for name, text in sample)
    return JsonQuestion(
        messages=[
            ChatMessage(role="system", content="\n".join(lines)),
            ChatMessage(role="user", content=f"Documents:\n\n{passages}"),
        ],
        schema=ANSWER_SCHEMA,
        name=ANSWER_NAME,
        tool_name=TOOL_NAME,
        tool_description="Record the proposed ontology.",
        max_tokens=MAX_TOKENS,
        most_items=MOST_TYPES,
    )


def _clean(value: Any, *, relationship: bool = False) -> str:
    """A type or property name as the model wrote it, trimmed and bounded ("" for one without a
    letter: punctuation a model wrote in its place)."""
    name = re.sub(r"\s+", " ", str(value or "")).strip()[:MAX_TYPE_NAME]
    if relationship:
        name = re.sub(r"[^0-9A-Za-z]+", "_", name).strip("_").upper()
    return name if re.search(r"[^\W\d_]", name) else ""


def _items(answer: Any, key: str) -> list[dict[str, Any]]:
    items = answer.get(key) if isinstance(answer, dict) else None
    return [i for i in items or [] if isinstance(i, dict)][:MOST_TYPES]


def _relationship_types(
    answer: Any, entity_types: dict[str, dict[str, Any]], notes: list[str]
) -> dict[str, dict[str, Any]]:
    """The answer's relationship types, each end that is no entity type of the answer left open."""
    relationship_types: dict[str, dict[str, Any]] = {}
    for item in _items(answer, "relationship_types"):
        name = _clean(item.get("name"), relationship=True)
        if not name:
            continue
        definition = relationship_types.setdefault(name, {})
        for key in ("domain", "range"):
            end = _clean(item.get(key))
            if end and end not in entity_types:
                notes.append(f"{name}: its {key} {end!r} is no entity type of the draft; left open")
            elif end and end not in definition.setdefault(key, []):
                definition[key].append(end)
    return {
        name: {k: v for k, v in definition.items() if v} for name, definition in relationship_types.items()
    }


def draft_document(answer: Any) -> tuple[dict[str, Any], list[str]]:
    """The ontology document a model's answer proposes, mended, and notes on what was mended."""
    notes: list[str] = []
    entity_types: dict[str, dict[str, Any]] = {}
    for item in _items(answer, "entity_types"):
        name = _clean(item.get("name"))
        if name and name not in entity_types:
            description = str(item.get("description") or "").strip()[:2000]
            entity_types[name] = {"description": description} if description else {}
    relationship_types = _relationship_types(answer, entity_types, notes)
    for item in _items(answer, "properties"):
        type_name, name, datatype = _clean(item.get("type")), _clean(item.get("name")), item.get("datatype")
        if type_name in entity_types and name and datatype in DATATYPES:
            entity_types[type_name].setdefault("properties", {}).setdefault(name, datatype)
        elif name:
            notes.append(
                f"property {name} of {type_name or '(no type)'} left out: no such entity type or datatype"
            )
    return {"entity_types": entity_types, "relationship_types": relationship_types}, notes


async def ontology_draft_propose(
    *, principal: Principal, project_ref: object, provider: Provider | None = None
) -> ProjectOntology:
    """Propose an ontology for a project with none (``OntologyExists`` otherwise) from a sample of
    its documents (``NoDocuments``: none) and keep it as the project's draft, as an editor or owner."""
    project = await sync_to_async(project_get)(
        principal=principal, project_ref=project_ref, min_role=Role.EDITOR
    )
    if await sync_to_async(ontology_active)(project_id=project.id) is not None:
        raise OntologyExists()
    sample = await sync_to_async(sample_passages)(project_id=project.id)
    if not sample:
        raise NoDocuments()
    known = (await sync_to_async(graph_vocabulary)(project_id=project.id)).entity_types
    try:
        model = structured_model(extraction_model(), provider=provider)
        answer = await model.answer(draft_question(sample, known, rows=model.in_rows))
    except LLMError as exc:
        raise DraftFailed(f"the model could not propose an ontology: {exc}") from None
    document, notes = draft_document(answer)
    try:
        return await sync_to_async(ontology_draft_store)(
            project_id=project.id, document=document, notes="\n".join(notes)
        )
    except OntologyInvalid as exc:
        raise DraftFailed(f"the model's proposal is not an ontology: {exc.message}") from None
