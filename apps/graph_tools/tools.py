"""The graph tools of PROTOCOL §6, registered in the registry by ``tools_register`` at start-up.

Handlers are ``async`` (ADK runs tools on the event loop): they run the synchronous queries of
``search`` and ``graph_queries`` through ``sync_to_async``, and the query embedding in a worker
thread of its own so the model never holds up the database thread.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Annotated, Any, Literal

from asgiref.sync import sync_to_async
from pydantic import Field, StringConstraints

from apps.graph_tools import graph_queries, paths, search, selectors, writes
from apps.graph_tools.embeddings import get_embedder
from apps.graph_tools.errors import ApprovalRequired
from apps.graph_tools.registry import GraphTool, ToolArgs, ToolContext, register

Query = Annotated[
    str,
    StringConstraints(strip_whitespace=True, min_length=1, max_length=1000),
    Field(description="What to look for, in natural language or keywords."),
]
TypeName = Annotated[str, StringConstraints(strip_whitespace=True, min_length=1, max_length=128)]
EntityRef = Annotated[
    str,
    StringConstraints(strip_whitespace=True, min_length=1, max_length=512),
    Field(description="The entity's id (from a previous result) or its key."),
]
Direction = Literal["out", "in", "both"]


class NoArgs(ToolArgs):
    pass


class HybridSearchArgs(ToolArgs):
    query: Query
    types: list[TypeName] | None = Field(
        default=None, max_length=50, description="Only entities of these types (see list_entity_types)."
    )
    limit: int = Field(default=10, ge=1, le=100, description="Maximum number of results.")


class SearchEntitiesArgs(ToolArgs):
    query: Query
    type: TypeName | None = Field(default=None, description="Only entities of this type.")
    limit: int = Field(default=20, ge=1, le=100, description="Maximum number of results.")


class SemanticSearchArgs(ToolArgs):
    query: Query
    type: TypeName | None = Field(default=None, description="Only entities of this type.")
    limit: int = Field(default=10, ge=1, le=100, description="Maximum number of results.")


class QueryEntitiesArgs(ToolArgs):
    type: TypeName | None = Field(default=None, description="Only entities of this type.")
    properties: dict[str, Any] | None = Field(
        default=None, description='Exact property values the entities must have, e.g. {"country": "PT"}.'
    )
    limit: int = Field(default=50, ge=1, le=500, description="Maximum number of results (a page).")
    offset: int = Field(default=0, ge=0, le=1_000_000, description="How many results to skip (paging).")


class FindSimilarArgs(ToolArgs):
    entity_id: EntityRef
    limit: int = Field(default=10, ge=1, le=100, description="Maximum number of results.")


class EntityEdgesArgs(ToolArgs):
    entity_id: EntityRef
    direction: Direction = Field(
        default="both", description='"out": the entity is the source; "in": the target; "both".'
    )
    relationship_type: TypeName | None = Field(default=None, description="Only relationships of this type.")
    limit: int = Field(default=100, ge=1, le=1000, description="Maximum number of edges.")


class TraverseGraphArgs(ToolArgs):
    start_entity_id: EntityRef
    max_depth: int = Field(default=2, ge=1, le=5, description="How many hops to walk (1 to 5).")
    relationship_types: list[TypeName] | None = Field(
        default=None, max_length=50, description="Only follow relationships of these types."
    )
    direction: Direction = Field(
        default="both", description='"out": follow edges from source to target; "in": backwards; "both".'
    )
    limit: int = Field(default=200, ge=1, le=1000, description="Maximum number of nodes, the start included.")


class ListRelationshipsArgs(ToolArgs):
    relationship_type: TypeName | None = Field(default=None, description="Only this relationship type.")
    entity_type: TypeName | None = Field(
        default=None, description="Only relationships with an entity of this type at either end."
    )
    limit: int = Field(default=100, ge=1, le=1000, description="Maximum number of relationship types.")


def _db(func: Any) -> Any:
    return sync_to_async(func, thread_sensitive=True)


async def _embed_query(query: str) -> tuple[Any, list[float]]:
    embedder = get_embedder()
    vector = await sync_to_async(embedder.embed_query, thread_sensitive=False)(query)
    return embedder, vector


def _ranked_by_vectors(search_run: Callable[..., list[dict[str, Any]]], **arguments: Any) -> dict[str, Any]:
    """Run a search that ranks by vectors; its result says how many entities it could not rank.

    ``"embedding": {"pending": n}`` is added while the background worker has not embedded ``n``
    of the project's entities (absent once it has): they are missing from vector rankings
    (PROTOCOL §6). Counted before the search: counted after, a search that ran while entities
    were pending could be called complete.
    """
    pending = selectors.embedding_pending_count(project_id=arguments["project_id"])
    result: dict[str, Any] = {"results": search_run(**arguments)}
    if pending:
        result["embedding"] = {"pending": pending}
    return result


async def _hybrid_search(ctx: ToolContext, args: HybridSearchArgs) -> dict[str, Any]:
    embedder, vector = await _embed_query(args.query)
    result: dict[str, Any] = await _db(_ranked_by_vectors)(
        search.hybrid_search,
        project_id=ctx.project_id,
        embedder=embedder,
        query=args.query,
        types=args.types,
        limit=args.limit,
        query_vector=vector,
    )
    return result


async def _search_entities(ctx: ToolContext, args: SearchEntitiesArgs) -> dict[str, Any]:
    results = await _db(search.text_search)(
        project_id=ctx.project_id, query=args.query, type=args.type, limit=args.limit
    )
    return {"results": results}


async def _semantic_search(ctx: ToolContext, args: SemanticSearchArgs) -> dict[str, Any]:
    embedder, vector = await _embed_query(args.query)
    result: dict[str, Any] = await _db(_ranked_by_vectors)(
        search.vector_search,
        project_id=ctx.project_id,
        embedder=embedder,
        vector=vector,
        types=[args.type] if args.type else None,
        limit=args.limit,
    )
    return result


async def _query_entities(ctx: ToolContext, args: QueryEntitiesArgs) -> dict[str, Any]:
    result: dict[str, Any] = await _db(graph_queries.entity_query)(
        project_id=ctx.project_id,
        type=args.type,
        properties=args.properties,
        limit=args.limit,
        offset=args.offset,
    )
    return result


def _find_similar_sync(ctx: ToolContext, args: FindSimilarArgs) -> dict[str, Any]:
    entity, merged_from = selectors.entity_resolve_following(project_id=ctx.project_id, ref=args.entity_id)
    result = _ranked_by_vectors(
        search.find_similar,
        project_id=ctx.project_id,
        embedder=get_embedder(),
        entity=entity,
        limit=args.limit,
    )
    return selectors.merged_from_noted(result, merged_from)


async def _find_similar(ctx: ToolContext, args: FindSimilarArgs) -> dict[str, Any]:
    result: dict[str, Any] = await _db(_find_similar_sync)(ctx, args)
    return result


async def _get_entity_edges(ctx: ToolContext, args: EntityEdgesArgs) -> dict[str, Any]:
    result: dict[str, Any] = await _db(graph_queries.entity_edges)(
        project_id=ctx.project_id,
        entity_id=args.entity_id,
        direction=args.direction,
        relationship_type=args.relationship_type,
        limit=args.limit,
    )
    return result


async def _traverse_graph(ctx: ToolContext, args: TraverseGraphArgs) -> dict[str, Any]:
    result: dict[str, Any] = await _db(graph_queries.graph_traverse)(
        project_id=ctx.project_id,
        start_entity_id=args.start_entity_id,
        max_depth=args.max_depth,
        relationship_types=args.relationship_types,
        direction=args.direction,
        limit=args.limit,
    )
    return result


async def _query_paths(ctx: ToolContext, args: paths.QueryPathsArgs) -> dict[str, Any]:
    result: dict[str, Any] = await _db(paths.paths_query)(project_id=ctx.project_id, args=args)
    return result


async def _list_entity_types(ctx: ToolContext, args: NoArgs) -> dict[str, Any]:
    types = await _db(graph_queries.entity_type_counts)(project_id=ctx.project_id)
    return {"types": types}


async def _schema_version(ctx: ToolContext, args: NoArgs) -> dict[str, Any]:
    result: dict[str, Any] = await _db(graph_queries.schema_version)(project_id=ctx.project_id)
    return result


async def _list_relationships(ctx: ToolContext, args: ListRelationshipsArgs) -> dict[str, Any]:
    types = await _db(graph_queries.relationship_summary)(
        project_id=ctx.project_id,
        relationship_type=args.relationship_type,
        entity_type=args.entity_type,
        limit=args.limit,
    )
    return {"relationship_types": types}


def _write_handler(name: str) -> Any:
    async def handler(ctx: ToolContext, args: ToolArgs) -> dict[str, Any]:
        if ctx.authorization is None:
            raise ApprovalRequired(
                f"{name} changes the graph and needs the approval of a project editor or owner; "
                "it was not run and nothing was written"
            )
        outcome = await _db(writes.write_apply)(
            project_id=ctx.project_id, tool_name=name, args=args, authorization=ctx.authorization
        )
        return outcome.result

    return handler


_WRITE_NOTE = (
    " Changes the graph: it runs only after a project editor or owner approved the call (or the agent's "
    "tool policy says no approval is needed); otherwise the result is an approval_required error."
)

# The registry is filled from these tuples when Django starts (GraphToolsConfig.ready).
GRAPH_TOOLS: tuple[GraphTool, ...] = (
    GraphTool(
        name="hybrid_search",
        description=(
            "Find entities relevant to a question or phrase. Combines keyword full-text search, fuzzy "
            "name matching and semantic (meaning) similarity; the best first tool to find where to start. "
            "Returns entities (id, key, type, name, description) with a relevance score."
        ),
        args_model=HybridSearchArgs,
        handler=_hybrid_search,
    ),
    GraphTool(
        name="search_entities",
        description=(
            "Keyword search over entity names and descriptions (all words must match; a name may also "
            "contain the query as a substring; an entity is also found by another name it is known by "
            "that the query holds, an alias). Use for exact names or terms."
        ),
        args_model=SearchEntitiesArgs,
        handler=_search_entities,
    ),
    GraphTool(
        name="semantic_search",
        description=(
            "Find entities whose meaning is close to the query (embedding similarity only), even when no "
            "word matches. Score is cosine similarity."
        ),
        args_model=SemanticSearchArgs,
        handler=_semantic_search,
    ),
    GraphTool(
        name="query_entities",
        description=(
            "List entities by type and/or exact property values, with paging (limit, offset) and the total "
            "count. Results include each entity's properties."
        ),
        args_model=QueryEntitiesArgs,
        handler=_query_entities,
    ),
    GraphTool(
        name="find_similar",
        description="Find the entities most similar in meaning to a given entity (never the entity itself).",
        args_model=FindSimilarArgs,
        handler=_find_similar,
    ),
    GraphTool(
        name="get_entity_edges",
        description=(
            "Show one entity (with its properties) and its relationships: for each edge its type, its "
            'direction ("out": the entity is the source, "in": the target) and the entity at the other end.'
        ),
        args_model=EntityEdgesArgs,
        handler=_get_entity_edges,
    ),
    GraphTool(
        name="traverse_graph",
        description=(
            "Walk the graph breadth-first from an entity up to max_depth hops (1-5), optionally following "
            "only some relationship types or one direction. Returns the nodes reached with their depth, the "
            "relationships among them, and truncated=true when the node limit cut the walk short."
        ),
        args_model=TraverseGraphArgs,
        handler=_traverse_graph,
    ),
    GraphTool(
        name="query_paths",
        description=(
            "Answer a question of any shape with one declarative path query: start entities (a name, key or "
            "id, a search, or the names a question mentions), up to 4 hops (a relationship type or any, a "
            "direction), filters at any step (entity type, a property compared with a value, membership in "
            "another path's result), and a result shape (the entities, count, exists, group with counts, "
            "min or max of a numeric property). Each result entity comes with the path that reaches it; "
            "truncated=true says a bound cut the walk. Use it for chains (the capital of the country a "
            "city lies in), inverse facts, intersections (borders both A and B), filtered lists "
            "(neighbours that use X), per-item second hops (each neighbour's currency), counts and "
            "comparisons."
        ),
        args_model=paths.QueryPathsArgs,
        handler=_query_paths,
        schema_for=paths.paths_schema,
    ),
    GraphTool(
        name="list_entity_types",
        description="List the entity types of the knowledge graph with how many entities each has.",
        args_model=NoArgs,
        handler=_list_entity_types,
    ),
    GraphTool(
        name="schema_version",
        description=(
            "The graph's schema: its entity types and relationship types, a version string that changes "
            "whenever those sets change, when the graph last changed, graph_version: a number that "
            "every import and every write raises by one, and the project's ontology (null when it has "
            "none): the entity types, relationship types with domain and range, and properties with "
            "datatypes that writes must keep to."
        ),
        args_model=NoArgs,
        handler=_schema_version,
    ),
    GraphTool(
        name="list_relationships",
        description=(
            "List the relationship types with their counts and the entity types found at their source and "
            "target ends; filter by relationship type or by an entity type at either end."
        ),
        args_model=ListRelationshipsArgs,
        handler=_list_relationships,
    ),
)


WRITE_TOOLS: tuple[GraphTool, ...] = tuple(
    GraphTool(
        name=kind.name,
        description=kind.description + _WRITE_NOTE,
        args_model=kind.args_model,
        handler=_write_handler(kind.name),
        read_only=False,
        destructive=kind.destructive,
    )
    for kind in writes.WRITE_KINDS
    if not kind.internal
)


def tools_register() -> None:
    """Put the graph tools, read and write, into the registry (once, at start-up)."""
    for tool in (*GRAPH_TOOLS, *WRITE_TOOLS):
        register(tool)
