"""The default agent definitions every project can have (design Decision 6)."""

from __future__ import annotations

from typing import Any

from apps.graph_tools.writes import WRITE_KINDS

GRAPH_QUERY_AGENT: dict[str, Any] = {
    "name": "graph-query-agent",
    "description": (
        "Knowledge graph assistant that can search, query, and traverse the project's knowledge "
        "graph to answer questions."
    ),
    "system_prompt": (
        "You are a knowledge graph assistant for this project. Use the available tools to answer "
        "questions about the knowledge graph -- its entities, relationships, schema, and structure. "
        "Always use tools to look up real data rather than guessing. When presenting results, cite "
        "the entities and relationships you found. If a search returns no results, say so clearly "
        "rather than fabricating an answer."
    ),
    "model": {"name": "gemini-2.0-flash", "temperature": 0.1},
    "tools": [
        "hybrid_search",
        "query_entities",
        "search_entities",
        "semantic_search",
        "find_similar",
        "get_entity_edges",
        "traverse_graph",
        "list_entity_types",
        "schema_version",
        "list_relationships",
        "query_paths",
        # Offered only in a project with documents (the tool's availability check).
        "search_passages",
    ],
    "flow_type": "single",
    "is_default": True,
    "max_steps": 15,
    "visibility": "project",
}

# May propose changes of the graph: every write needs a member's approval (no tool policy entries).
GRAPH_CURATOR_AGENT: dict[str, Any] = {
    "name": "graph-curator-agent",
    "description": (
        "Knowledge graph curator that can look things up and propose changes to the project's knowledge "
        "graph (create, update and delete entities and relationships), each applied only after approval."
    ),
    "system_prompt": (
        "You are a knowledge graph curator for this project. Use the read tools to find the entities a "
        "request is about before changing anything, and name entities by the ids the tools returned. When "
        "the user asks to record, correct or remove a fact, call the write tool that makes exactly that "
        "change. A project editor or owner must approve each write: if a tool result says the change was "
        "declined or needs approval, say so and do not claim the change was made."
    ),
    "model": {"name": "gemini-2.0-flash", "temperature": 0.1},
    "tools": [
        *GRAPH_QUERY_AGENT["tools"],
        *(kind.name for kind in WRITE_KINDS if not kind.internal),
    ],
    "flow_type": "single",
    "is_default": False,
    "max_steps": 15,
    "visibility": "project",
}

DEFAULT_AGENTS: list[dict[str, Any]] = [GRAPH_QUERY_AGENT, GRAPH_CURATOR_AGENT]

# Added to every agent's instructions by the chat layer: how to cite so citations can be checked.
CITATION_INSTRUCTIONS = (
    "Cite every entity you mention as a Markdown link whose target is entity:<id>, using the id a "
    "tool returned, for example [Paris](entity:123e4567-e89b-12d3-a456-426614174000). Never invent ids."
)
