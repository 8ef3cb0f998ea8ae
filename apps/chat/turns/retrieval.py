"""Retrieval for plain conversations (chat-agent-loop CA-3/CA-4): *always retrieve*.

One ``hybrid_search`` and one ``search_passages`` on the user's message, their results (entities,
and passages of the project's documents) placed into the system prompt, no tools offered. An agent-backed conversation retrieves through tool use instead: its agent is offered
the graph tools (``apps.agents``) and decides when to search.
"""

from __future__ import annotations

import json
import uuid
from dataclasses import dataclass, field
from typing import Any

from apps.graph_tools.registry import tool_call

NO_RESULTS = "No matching entities were found in the knowledge graph."
NO_PASSAGES = "No matching passages were found in the project's documents."
# A passage is shown to the model up to this many characters.
PASSAGE_PROMPT_CHARS = 1200
MAX_QUERY_CHARS = 1000  # the longest query hybrid_search accepts


@dataclass
class Retrieval:
    """What one retrieval found: the text for the prompt and the entities behind it."""

    context: str
    entities: list[dict[str, Any]] = field(default_factory=list)
    tool: str = "hybrid_search"
    arguments: dict[str, Any] = field(default_factory=dict)
    result: dict[str, Any] = field(default_factory=dict)
    passages: list[dict[str, Any]] = field(default_factory=list)
    passages_context: str = NO_PASSAGES
    passages_result: dict[str, Any] = field(default_factory=dict)


def format_entities(entities: list[dict[str, Any]]) -> str:
    """Format search results for the prompt: one block per entity, its name written as the link
    that cites it. A small model writes the names as it read them: with ``Paris (City), id …``
    it wrote "Myanmar (Country), id 2759…" into answers, an id shown to the user and no citation."""
    if not entities:
        return NO_RESULTS
    blocks = []
    for e in entities:
        lines = [f"- [{e['name']}](entity:{e['id']}) ({e['type']}), key {e['key']}"]
        if e.get("description"):
            lines.append(f"  {e['description']}")
        if e.get("properties"):
            lines.append(
                f"  properties: {json.dumps(e['properties'], ensure_ascii=False, default=str)[:800]}"
            )
        blocks.append("\n".join(lines))
    return "\n".join(blocks)


def format_passages(passages: list[dict[str, Any]]) -> str:
    """Format passages for the prompt: each headed by the link that cites it (its document's name,
    ``passage:<id>``), then the page and the text. As with entities, a small model copies a link it
    reads: shown "passage <id> (document):", the 1.5B model cited no passage in 10 answers of the
    docqa dev sample (``make eval --set docqa --plain-only``)."""
    if not passages:
        return NO_PASSAGES
    blocks = []
    for p in passages:
        page = f" (page {p['page']})" if p.get("page") else ""
        text = p["text"] if len(p["text"]) <= PASSAGE_PROMPT_CHARS else p["text"][:PASSAGE_PROMPT_CHARS] + "…"
        blocks.append(f"- [{p['document_name']}](passage:{p['id']}){page}:\n  {text}")
    return "\n".join(blocks)


class AlwaysRetrieveStrategy:
    """Search the graph once for every message; offer the model no tools."""

    def __init__(self, limit: int = 8, passages: int = 4) -> None:
        self.limit = limit
        self.passages = passages

    async def retrieve(self, *, project_id: uuid.UUID, query: str) -> Retrieval:
        # Strip before cutting: a message that starts with a page of blank lines still has words.
        arguments = {"query": query.strip()[:MAX_QUERY_CHARS], "limit": self.limit}
        result = await tool_call(project_id=project_id, name="hybrid_search", arguments=arguments)
        entities = list(result.get("results", []))
        passages_result = await tool_call(
            project_id=project_id,
            name="search_passages",
            arguments={"query": arguments["query"], "limit": self.passages},
        )
        passages = list(passages_result.get("results", []))
        return Retrieval(
            context=format_entities(entities),
            entities=entities,
            arguments=arguments,
            result=result,
            passages=passages,
            passages_context=format_passages(passages),
            passages_result=passages_result,
        )
