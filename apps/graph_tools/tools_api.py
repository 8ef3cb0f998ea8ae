"""REST routes for the graph tools (PROTOCOL §2, §6): list them, call one directly.

Each route makes one call into the registry; ``config.api`` maps ``ToolError`` to JSON
(``400 invalid_arguments`` naming the argument, ``404`` for an unknown entity or tool).
"""

from __future__ import annotations

from typing import Any

from asgiref.sync import async_to_sync
from django.http import HttpRequest
from ninja import Router, Schema

from apps.graph_tools.registry import ToolArgumentError, tool_call, tool_list
from apps.projects.auth import principal_of
from apps.projects.inputs import InvalidInput, json_parse
from apps.projects.selectors import project_get

router = Router(tags=["graph tools"])


class ToolOut(Schema):
    name: str
    description: str
    inputSchema: dict[str, Any]
    readOnly: bool


class ToolList(Schema):
    items: list[ToolOut]
    count: int


def tools_describe() -> list[dict[str, Any]]:
    """The registry as clients see it: name, description, JSON Schema of the arguments, read-only flag."""
    return [
        {
            "name": t.name,
            "description": t.description,
            "inputSchema": t.input_schema(),
            "readOnly": t.read_only,
        }
        for t in tool_list()
    ]


@router.get("/projects/{project_id}/graph/tools", response=ToolList)
def list_tools(request: HttpRequest, project_id: str) -> ToolList:
    project_get(principal=principal_of(request), project_ref=project_id)
    items = tools_describe()
    return ToolList(items=[ToolOut(**item) for item in items], count=len(items))


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
    project = project_get(principal=principal_of(request), project_ref=project_id)
    result: dict[str, Any] = async_to_sync(tool_call)(
        project_id=project.id, name=tool_name, arguments=_arguments(request)
    )
    return result
