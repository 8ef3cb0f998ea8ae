"""Retrieval strategies (chat-agent-loop CA-3/CA-4).

An agent-backed conversation uses *tool use*: the agent is offered the graph tools and decides
when to search. A plain conversation uses *always retrieve*: one ``hybrid_search`` on the
user's message, its results placed into the system prompt, no tools offered.
"""

from __future__ import annotations

import json
import uuid
from dataclasses import dataclass, field
from typing import Any, Protocol

from apps.agents.llm.base import ToolSpec
from apps.graph_tools.registry import tool_call, tool_get

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


class RetrievalStrategy(Protocol):
    def build_tool_definitions(self) -> list[ToolSpec]:
        """The tools offered to the model."""

    async def retrieve(self, *, project_id: uuid.UUID, query: str) -> Retrieval | None:
        """Retrieve before the model is called (None: the model retrieves through tools)."""


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

    def build_tool_definitions(self) -> list[ToolSpec]:
        return []

    async def retrieve(self, *, project_id: uuid.UUID, query: str) -> Retrieval:
        # Strip before cutting: a message that starts with a page of blank lines still has words.
        arguments = {"query": query.strip()[:MAX_QUERY_CHARS], "limit": self.limit}
        result = await tool_call(project_id=project_id, name="hybrid_search", arguments=arguments)
        entities = list(result.get("results", []))
        return Retrieval(
            context=format_entities(entities), entities=entities, arguments=arguments, result=result
        )


class ToolUseRetrievalStrategy:
    """Offer the agent's graph tools and let it decide when to retrieve."""

    def __init__(self, tool_names: list[str]) -> None:
        self.tool_names = tool_names

    def build_tool_definitions(self) -> list[ToolSpec]:
        specs = []
        for name in self.tool_names:
            tool = tool_get(name)
            specs.append(
                ToolSpec(name=tool.name, description=tool.description, parameters=tool.input_schema())
            )
        return specs

    async def retrieve(self, *, project_id: uuid.UUID, query: str) -> None:
        return None
