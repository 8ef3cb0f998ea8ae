"""Retrieval for plain conversations (chat-agent-loop CA-3/CA-4): *always retrieve*.

One ``hybrid_search`` on the user's message, its results placed into the system prompt, no tools
offered. An agent-backed conversation retrieves through tool use instead: its agent is offered
the graph tools (``apps.agents``) and decides when to search.
"""

from __future__ import annotations

import json
import uuid
from dataclasses import dataclass, field
from typing import Any

from apps.graph_tools.registry import tool_call

NO_RESULTS = "No matching entities were found in the knowledge graph."
MAX_QUERY_CHARS = 1000  # the longest query hybrid_search accepts


@dataclass
class Retrieval:
    """What one retrieval found: the text for the prompt and the entities behind it."""

    context: str
    entities: list[dict[str, Any]] = field(default_factory=list)
    tool: str = "hybrid_search"
    arguments: dict[str, Any] = field(default_factory=dict)
    result: dict[str, Any] = field(default_factory=dict)


def format_entities(entities: list[dict[str, Any]]) -> str:
    """Format search results for the prompt: one block per entity with its id for citations."""
    if not entities:
        return NO_RESULTS
    blocks = []
    for e in entities:
        lines = [f"- {e['name']} ({e['type']}), id {e['id']}, key {e['key']}"]
        if e.get("description"):
            lines.append(f"  {e['description']}")
        if e.get("properties"):
            lines.append(
                f"  properties: {json.dumps(e['properties'], ensure_ascii=False, default=str)[:800]}"
            )
        blocks.append("\n".join(lines))
    return "\n".join(blocks)


class AlwaysRetrieveStrategy:
    """Search the graph once for every message; offer the model no tools."""

    def __init__(self, limit: int = 8) -> None:
        self.limit = limit

    async def retrieve(self, *, project_id: uuid.UUID, query: str) -> Retrieval:
        # Strip before cutting: a message that starts with a page of blank lines still has words.
        arguments = {"query": query.strip()[:MAX_QUERY_CHARS], "limit": self.limit}
        result = await tool_call(project_id=project_id, name="hybrid_search", arguments=arguments)
        entities = list(result.get("results", []))
        return Retrieval(
            context=format_entities(entities), entities=entities, arguments=arguments, result=result
        )
