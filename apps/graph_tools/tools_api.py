"""REST routes for the graph tools (PROTOCOL §2, §6): list them, call one directly.

Each route makes one call into selectors or services; ``config.api`` maps ``ToolError`` to JSON
(``400 invalid_arguments`` naming the argument, ``404`` for an unknown entity or tool).
"""

from __future__ import annotations

from typing import Any

from asgiref.sync import async_to_sync
from django.http import HttpRequest
from ninja import Router, Schema

from apps.core.inputs import InvalidInput, json_parse
from apps.graph_tools.errors import ToolArgumentError
from apps.graph_tools.selectors import ProjectTool, tool_list_for
from apps.graph_tools.services import tool_call_as_member
from apps.projects.auth import principal_of

router = Router(tags=["graph tools"])


class ToolOut(Schema):
    name: str
    description: str
    inputSchema: dict[str, Any]
    readOnly: bool


class ToolList(Schema):
    items: list[ToolOut]
    count: int


def tool_out(item: ProjectTool) -> ToolOut:
    """A tool as clients see it: name, description, JSON Schema of the arguments (narrowed to the
    project's types), read-only flag."""
    tool = item.tool
    return ToolOut(
        name=tool.name, description=tool.description, inputSchema=item.input_schema, readOnly=tool.read_only
    )


@router.get("/projects/{project_id}/graph/tools", response=ToolList)
def list_tools(request: HttpRequest, project_id: str) -> ToolList:
    items = [tool_out(t) for t in tool_list_for(principal=principal_of(request), project_ref=project_id)]
    return ToolList(items=items, count=len(items))


def _arguments(request: HttpRequest) -> dict[str, Any]:
    if not request.body.strip():
        return {}
    try:
        arguments = json_parse(request.body)
    except InvalidInput as exc:
        if exc.field:
            raise ToolArgumentError(f"invalid arguments: {exc.message}", argument=exc.field) from None
        raise ToolArgumentError(f"the body must be a JSON object of arguments: {exc.message}") from None
    if not isinstance(arguments, dict):
        raise ToolArgumentError("the body must be a JSON object of arguments")
    return arguments


@router.post("/projects/{project_id}/graph/tools/{tool_name}", response=dict[str, Any])
def call_tool(request: HttpRequest, project_id: str, tool_name: str) -> dict[str, Any]:
    result: dict[str, Any] = async_to_sync(tool_call_as_member)(
        principal=principal_of(request), project_ref=project_id, name=tool_name, arguments=_arguments(request)
    )
    return result
