"""The one registry of graph tools, read by the ADK agent, the MCP server and the REST route.

A tool is a name, a description written for an LLM, a pydantic argument model with
``extra="forbid"`` (its JSON Schema is what LLMs and MCP clients see), ``read_only`` and an
``async`` handler scoped to one project. ``tool_call`` validates the arguments and maps every
failure to a ``ToolError`` that names what was wrong; a tool never crashes its caller.

A tool that has something to work on only in some projects has an ``available`` check
(``search_passages``: the project has documents); an agent's toolset leaves it out in the others,
so a model is not offered a search that can only come back empty. The check is a query (the rows
whose existence makes the tool available), so a chat turn reads it in its admission's statement
(``availability_reads``) rather than in a round trip of its own before the model's first request.

A tool whose arguments name the graph's own types (``query_paths``) has a ``schema_for``: given
a project's ``GraphVocabulary`` (its entity types and relationship types) it narrows the schema to
them (enums), so ADK agents, MCP ``tools/list`` and REST show each project its own types.

The tools of ``tools.py`` are registered when Django starts (``GraphToolsConfig.ready``), and those
of the apps above it by theirs (``apps.documents.tools``: ``search_passages``, ``DocumentsConfig.ready``).
"""

from __future__ import annotations

import copy
import functools
import uuid
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

from django.db.models import QuerySet
from pydantic import BaseModel, ConfigDict
from pydantic import ValidationError as PydanticValidationError

from apps.core.inputs import input_problem
from apps.core.prepared import QueryTemplate
from apps.graph_tools.errors import ToolArgumentError, UnknownTool


class ToolArgs(BaseModel):
    """Base of every tool's argument model: unknown arguments are refused."""

    model_config = ConfigDict(extra="forbid")


@dataclass(frozen=True)
class WriteAuthorization:
    """On whose word a write tool may change the graph, recorded in its audit row.

    ``via`` is ``"approval"`` (``approval_id`` names the decided ``WriteApproval``),
    ``"policy_never"`` (the agent definition's tool policy lets the tool run without approval) or
    ``"direct"`` (a member called the tool over REST or MCP, which the operator allowed).
    """

    via: str
    user_id: int | None = None
    approval_id: uuid.UUID | None = None
    run_id: uuid.UUID | None = None
    # The same key twice writes once: the second call answers the first's result
    # (an agent's call id within its run, so a resumed run never repeats a write).
    idempotency_key: str | None = None


@dataclass(frozen=True)
class ToolContext:
    """What a handler may touch: one project; a write tool also needs an authorization (without one
    it answers ``approval_required`` and writes nothing)."""

    project_id: uuid.UUID
    authorization: WriteAuthorization | None = None


Handler = Callable[[ToolContext, Any], Awaitable[dict[str, Any]]]


@dataclass(frozen=True)
class GraphVocabulary:
    """A project's types: its entity types and its relationships as (type, source type, target type).

    Read from the per-project type counts (``graph_queries.graph_vocabulary``); hashable, so a
    schema narrowed to it is built once per vocabulary.
    """

    entity_types: tuple[str, ...] = ()
    relationships: tuple[tuple[str, str, str], ...] = ()
    # Declared by the project's ontology (#51) rather than read from its graph.
    declared: bool = False

    @property
    def relationship_types(self) -> tuple[str, ...]:
        return tuple(sorted({r[0] for r in self.relationships}))


SchemaFor = Callable[[dict[str, Any], GraphVocabulary], dict[str, Any]]
# Whether a tool has anything to work on in a project: the rows whose existence says so.
Availability = Callable[[uuid.UUID], QuerySet[Any]]


@dataclass(frozen=True)
class GraphTool:
    name: str
    description: str
    args_model: type[ToolArgs]
    handler: Handler
    read_only: bool = True
    # MCP's destructiveHint: the tool may change or remove what is already in the graph.
    destructive: bool = False
    # Narrows the schema to one project's types; None: the same schema for every project.
    schema_for: SchemaFor | None = None
    # Whether the tool has anything to work on in a project (``search_passages``: the project has
    # documents); an agent is not offered a tool unavailable in its project. None: always available.
    available: Availability | None = None

    def input_schema(self, vocabulary: GraphVocabulary | None = None) -> dict[str, Any]:
        """The JSON Schema of the arguments; with a project's ``vocabulary``, narrowed to its types."""
        # A copy: callers may change what they get; the schema itself is built once per model
        # (and per vocabulary).
        if vocabulary is not None and self.schema_for is not None:
            return copy.deepcopy(_project_schema(self, vocabulary))
        return copy.deepcopy(_input_schema(self.args_model))

    @property
    def per_project(self) -> bool:
        """Whether the schema depends on the project (its entity and relationship types)."""
        return self.schema_for is not None


@functools.cache
def _input_schema(args_model: type[ToolArgs]) -> dict[str, Any]:
    # Building a JSON Schema with pydantic takes about a millisecond, and every model call of an
    # agent turn declares every tool of the agent (20 schemas a turn for graph-query-agent).
    schema = args_model.model_json_schema()
    schema.pop("title", None)
    schema.setdefault("properties", {})
    schema.setdefault("type", "object")
    return schema


@functools.lru_cache(maxsize=256)
def _project_schema(tool: GraphTool, vocabulary: GraphVocabulary) -> dict[str, Any]:
    assert tool.schema_for is not None
    return tool.schema_for(copy.deepcopy(_input_schema(tool.args_model)), vocabulary)


_REGISTRY: dict[str, GraphTool] = {}


def register(tool: GraphTool) -> GraphTool:
    if tool.name in _REGISTRY:
        raise ValueError(f"tool {tool.name!r} registered twice")
    _REGISTRY[tool.name] = tool
    return tool


def tool_list(*, read_only: bool | None = None) -> list[GraphTool]:
    """Every registered tool, or only the read-only (``True``) or only the write (``False``) ones:
    the read tools first, each kind in the order they were registered (the graph's, then those
    the apps above register: ``search_passages``)."""
    tools = sorted(_REGISTRY.values(), key=lambda t: not t.read_only)
    return [t for t in tools if read_only is None or t.read_only == read_only]


def tool_names(*, read_only: bool | None = None) -> list[str]:
    return [t.name for t in tool_list(read_only=read_only)]


def availability_reads(project_id: uuid.UUID) -> dict[str, tuple[str, list[Any]]]:
    """Each availability check of the registry in ``project_id``, by tool name, as a one-value
    read (a row's id, or NULL when the tool has nothing to work on) for ``apps.core.db.rows_write``:
    its SQL built once per process (``QueryTemplate``)."""
    return {
        t.name: _availability_template(t.name).sql_with_params(project_id=project_id)
        for t in _REGISTRY.values()
        if t.available is not None
    }


@functools.cache
def _availability_template(name: str) -> QueryTemplate[Any]:
    available = _REGISTRY[name].available
    assert available is not None
    return QueryTemplate(lambda project_id: available(project_id).order_by().values("pk")[:1])


def tool_available(tool: GraphTool, project_id: uuid.UUID) -> bool:
    """Whether ``tool`` has anything to work on in ``project_id`` (a database read)."""
    return tool.available is None or tool.available(project_id).exists()


def tool_get(name: str) -> GraphTool:
    try:
        return _REGISTRY[name]
    except KeyError:
        raise UnknownTool(f"unknown tool {name!r}; known tools: {', '.join(sorted(_REGISTRY))}") from None


def validate_arguments(tool: GraphTool, arguments: dict[str, Any] | None) -> ToolArgs:
    if arguments is not None and not isinstance(arguments, dict):
        raise ToolArgumentError("arguments must be a JSON object")
    # The input boundary for every caller: REST, MCP and the arguments a model passes in a turn.
    problem = input_problem(arguments or {})
    if problem is not None:
        path, reason = problem
        raise ToolArgumentError(
            f"invalid arguments for {tool.name}: {path or '(arguments)'} {reason}", argument=path or None
        )
    try:
        return tool.args_model.model_validate(arguments or {})
    except PydanticValidationError as exc:
        first = exc.errors()[0]
        argument = ".".join(str(p) for p in first.get("loc", ())) or None
        problems = "; ".join(
            f"{'.'.join(str(p) for p in e.get('loc', ())) or '(arguments)'}: {e.get('msg')}"
            for e in exc.errors()
        )
        raise ToolArgumentError(f"invalid arguments for {tool.name}: {problems}", argument=argument) from None


async def tool_call(
    *,
    project_id: uuid.UUID,
    name: str,
    arguments: dict[str, Any] | None,
    authorization: WriteAuthorization | None = None,
) -> dict[str, Any]:
    """Validate ``arguments`` and run tool ``name`` on one project; raise ``ToolError`` on failure.

    A write tool runs only with an ``authorization``; without one it raises ``ApprovalRequired``.
    """
    tool = tool_get(name)
    args = validate_arguments(tool, arguments)
    return await tool.handler(ToolContext(project_id=project_id, authorization=authorization), args)
