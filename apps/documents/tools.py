"""The documents' graph tool, ``search_passages`` (PROTOCOL §6): declared here beside the search it
runs, registered in the one registry of ``apps.graph_tools.registry`` when Django starts
(``DocumentsConfig.ready``), so agents, plain RAG, MCP and REST call it as they call the others."""

from __future__ import annotations

import uuid
from typing import Annotated, Any

from asgiref.sync import sync_to_async
from django.db.models import QuerySet
from pydantic import Field, StringConstraints

from apps.documents.search import passages_pending_count, passages_search
from apps.documents.selectors import documents_of_project
from apps.graph_tools.embeddings import get_embedder
from apps.graph_tools.errors import ToolArgumentError
from apps.graph_tools.registry import GraphTool, ToolArgs, ToolContext, register
from apps.graph_tools.tools import Query
from apps.projects.selectors import parse_uuid


class SearchPassagesArgs(ToolArgs):
    query: Query
    document_id: (
        Annotated[str, StringConstraints(strip_whitespace=True, min_length=1, max_length=64)] | None
    ) = Field(default=None, description="Only passages of this document (its id).")
    limit: int = Field(default=5, ge=1, le=50, description="Maximum number of passages.")


def _documents(project_id: uuid.UUID) -> QuerySet[Any]:
    return documents_of_project(project_id=project_id)


def _passages_ranked(**arguments: Any) -> dict[str, Any]:
    pending = passages_pending_count(project_id=arguments["project_id"])
    result: dict[str, Any] = {"results": passages_search(**arguments)}
    if pending:
        result["embedding"] = {"pending": pending}
    return result


async def _search_passages(ctx: ToolContext, args: SearchPassagesArgs) -> dict[str, Any]:
    document_id = None
    if args.document_id is not None:
        document_id = parse_uuid(args.document_id)
        if document_id is None:
            raise ToolArgumentError("document_id: not a document id", argument="document_id")
    # The query's vector in a worker thread of its own, as the graph tools' (``graph_tools.tools``).
    embedder = get_embedder()
    vector = await sync_to_async(embedder.embed_query, thread_sensitive=False)(args.query)
    result: dict[str, Any] = await sync_to_async(_passages_ranked, thread_sensitive=True)(
        project_id=ctx.project_id,
        query=args.query,
        limit=args.limit,
        embedder=embedder,
        query_vector=vector,
        document_id=document_id,
    )
    return result


SEARCH_PASSAGES = GraphTool(
    name="search_passages",
    description=(
        "Find passages of the project's uploaded documents (text, Markdown, HTML, PDF) relevant to a "
        "question or phrase: full-text and semantic search, then a walk of the names the passages "
        "mention. Each result has the passage's id, text, document_id, document_name, page (PDFs), "
        "character offsets and the query's mentions it names. Passages are evidence as good as the "
        "graph: when one names what the question asks about next (the director of a film, the "
        "country of a city), search again with that name before answering. Cite a passage as a "
        "Markdown link whose target is passage:<id>."
    ),
    args_model=SearchPassagesArgs,
    handler=_search_passages,
    # Not offered to an agent in a project without documents: it could only find nothing, and
    # the offline model's prompt for a graph-only project stays what it was.
    available=_documents,
)


def tools_register() -> None:
    """Put the documents' tools into the graph tools' registry (once, at start-up)."""
    register(SEARCH_PASSAGES)
