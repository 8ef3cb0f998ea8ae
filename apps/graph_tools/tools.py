"""The graph tools of PROTOCOL §6. Each registers itself in the registry."""

from __future__ import annotations

from typing import Any

from django.db.models import Count

from apps.graph_tools.models import GraphObject
from apps.graph_tools.registry import GraphTool, ToolArgs, ToolContext, register


class NoArgs(ToolArgs):
    pass


async def _list_entity_types(ctx: ToolContext, args: NoArgs) -> dict[str, Any]:
    rows = (
        GraphObject.objects.filter(project_id=ctx.project_id)
        .values("type")
        .annotate(count=Count("id"))
        .order_by("-count", "type")
    )
    return {"types": [{"type": r["type"], "count": r["count"]} async for r in rows]}


register(
    GraphTool(
        name="list_entity_types",
        description="List the entity types of the knowledge graph with how many entities each has.",
        args_model=NoArgs,
        handler=_list_entity_types,
    )
)
