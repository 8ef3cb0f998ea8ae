"""Every error the graph tools, the graph import and the graph's REST and MCP edges raise on purpose.

Each transport maps them once: REST through ``config.api`` (``{"error", "code"}`` plus ``extra``),
MCP as an ``isError`` result, an agent turn as a tool result ``{"error", "code"}``.
"""

from __future__ import annotations

from apps.core.errors import NotFound, ServiceError


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


class ApprovalRequired(ToolError):
    """A write tool was called without an approval (or a policy or setting that stands for one)."""

    status = 403
    code = "approval_required"


class RelationshipNotFound(ToolError):
    """No such relationship in the project."""

    status = 404
    code = "relationship_not_found"


class EntityExists(ToolError):
    """An entity with this key is already in the project."""

    status = 409
    code = "entity_exists"


class RelationshipExists(ToolError):
    """The relationship (source, type, target) is already in the project."""

    status = 409
    code = "relationship_exists"


class ApprovalNotFound(NotFound):
    """No such approval, or not one the caller may see."""

    code = "approval_not_found"


class ApprovalNotPending(ServiceError):
    """The approval was already decided or has expired."""

    status = 409
    code = "approval_not_pending"


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


class OntologyInvalid(ServiceError):
    """The ontology file is invalid; nothing of it was kept."""

    code = "invalid_ontology"


class OntologyTooLarge(ServiceError):
    """the ontology file is too large"""

    status = 413
    code = "payload_too_large"


class OntologyNotFound(NotFound):
    """This project has no ontology."""

    code = "ontology_not_found"


class OntologyExists(ServiceError):
    """This project already has an ontology: a draft is proposed only for a project without one."""

    status = 409
    code = "ontology_exists"


class OntologyViolation(ToolError):
    """A write breaks the project's ontology (and the project refuses such writes): each broken rule
    is named, the first in the message."""

    code = "ontology_violation"

    def __init__(self, message: str, *, violations: list[dict[str, str]]) -> None:
        super().__init__(message)
        self.violations = violations

    @property
    def extra(self) -> dict[str, object]:
        """Extra keys of the REST error body: the first rule broken and every violation."""
        return {"rule": self.violations[0]["rule"], "violations": self.violations}
