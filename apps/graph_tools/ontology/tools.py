"""The ontology-violations queue as a read-only tool of the one registry (#51), so agents, MCP
clients and REST's tool route all read it: ``ontology_violations``."""

from __future__ import annotations

from typing import Annotated, Any

from asgiref.sync import sync_to_async
from pydantic import Field, StringConstraints

from apps.graph_tools.ontology.queue import DEFAULT_LIMIT, MAX_LIMIT, violations_page
from apps.graph_tools.registry import GraphTool, ToolArgs, ToolContext, register

Cursor = Annotated[str, StringConstraints(strip_whitespace=True, min_length=1, max_length=1000)]


class OntologyViolationsArgs(ToolArgs):
    cursor: Cursor | None = Field(
        default=None, description="The nextCursor of the previous page; omitted: the first."
    )
    limit: int = Field(
        default=DEFAULT_LIMIT, ge=1, le=MAX_LIMIT, description="Most relationships in the page."
    )


async def _ontology_violations(ctx: ToolContext, args: OntologyViolationsArgs) -> dict[str, Any]:
    page = await sync_to_async(violations_page, thread_sensitive=True)(
        project_id=ctx.project_id, cursor=args.cursor, limit=args.limit
    )
    return page.as_json()


ONTOLOGY_TOOLS: tuple[GraphTool, ...] = (
    GraphTool(
        name="ontology_violations",
        description=(
            "The curation queue of relationships that break the project's ontology: a relationship type it "
            "does not declare, or a source or target whose entity type is outside the type's domain or range "
            "(or undeclared). A page at a time: items (the relationship, its source and target with their "
            "types, the rules broken), count (the whole queue) and nextCursor (null on the last page). Empty "
            "when the project has no ontology."
        ),
        args_model=OntologyViolationsArgs,
        handler=_ontology_violations,
    ),
)


def ontology_tools_register() -> None:
    """Put the ontology's tools into the registry (once, at start-up)."""
    for tool in ONTOLOGY_TOOLS:
        register(tool)
