"""Every error the graph tools, the graph import and the graph's REST and MCP edges raise on purpose.

Each transport maps them once: REST through ``config.api`` (``{"error", "code"}`` plus ``extra``),
MCP as an ``isError`` result, an agent turn as a tool result ``{"error", "code"}``.
"""

from __future__ import annotations

from apps.projects.errors import NotFound, ServiceError


class ToolError(ServiceError):
    """The tool could not run."""

    status = 400
    code = "tool_error"


class ToolArgumentError(ToolError):
    """Invalid arguments."""

    code = "invalid_arguments"

    def __init__(self, message: str, *, argument: str | None = None) -> None:
        super().__init__(message)
        self.argument = argument

    @property
    def extra(self) -> dict[str, str]:
        """Extra keys of the REST error body: the argument at fault, when known."""
        return {"argument": self.argument} if self.argument else {}


class UnknownTool(NotFound):
    """No such tool."""

    code = "unknown_tool"


class EntityNotFound(ToolError):
    """No such entity (by id or key) in the project: for a tool, for REST browsing alike."""

    status = 404
    code = "entity_not_found"


class GraphImportError(ServiceError):
    """The import file is invalid; nothing of it was kept."""

    code = "invalid_import"

    def __init__(self, message: str, *, line: int | None = None) -> None:
        super().__init__(f"line {line}: {message}" if line else message)
        self.line = line
        self.extra = {"line": line} if line else {}


class ImportTooLarge(ServiceError):
    """the import file is too large"""

    status = 413
    code = "payload_too_large"


class McpUnauthorized(ServiceError):
    """authentication required: 'Authorization: Bearer <api token>'"""

    status = 401
    code = "unauthorized"
