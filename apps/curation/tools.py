"""The read-only graph tool ``curation_queue`` (#51): a page of one of the curation queues, for
agents, MCP clients and REST alike (registered in the one registry by ``CurationConfig.ready``)."""

from __future__ import annotations

from typing import Annotated, Any, Literal

from asgiref.sync import sync_to_async
from pydantic import Field, StringConstraints

from apps.curation.queues import LIMIT_DEFAULT, LIMIT_MAX, queue_read
from apps.graph_tools.registry import GraphTool, ToolArgs, ToolContext, register


class CurationQueueArgs(ToolArgs):
    kind: Literal["orphans", "duplicates", "unsupported"] = Field(
        description=(
            "orphans: entities with no relationship; duplicates: pairs of entities that may be one, "
            "with their evidence and the merge to propose; unsupported: entities no passage mentions "
            "and no import or extracted passage backs any more."
        )
    )
    cursor: Annotated[str, StringConstraints(max_length=1000)] | None = Field(
        default=None, description="nextCursor of the previous page; none for the first page."
    )
    limit: int = Field(default=LIMIT_DEFAULT, ge=1, le=LIMIT_MAX, description="At most this many items.")


async def _curation_queue(ctx: ToolContext, args: CurationQueueArgs) -> dict[str, Any]:
    page = await sync_to_async(queue_read, thread_sensitive=True)(
        project_id=ctx.project_id, kind=args.kind, cursor=args.cursor, limit=args.limit
    )
    return page.as_json()


CURATION_QUEUE = GraphTool(
    name="curation_queue",
    description=(
        "A page of a queue of what needs care in the graph: orphans (entities with no relationship), "
        "duplicates (pairs that may be one entity: same or similar name, alias, near vector, shared "
        "neighbours) or unsupported (entities nothing backs any more). Bounded: a page looks at a "
        "bounded stretch of the graph, so it may hold fewer items than the limit while nextCursor "
        "is set; pass nextCursor to go on, until it is null. Read-only."
    ),
    args_model=CurationQueueArgs,
    handler=_curation_queue,
)


def tools_register() -> None:
    register(CURATION_QUEUE)
