"""Writes of agent definitions (create, update, delete) and the installation of the default agents.

The services of the definitions; their reads, and who may see which, are in ``selectors.py``.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from django.db import IntegrityError, transaction

from apps.agents.defaults import DEFAULT_AGENTS
from apps.agents.mcp_servers import mcp_servers_public, mcp_servers_validate
from apps.agents.models import AgentDefinition, FlowType, Visibility
from apps.agents.selectors import agent_definition_get
from apps.core.errors import ServiceError
from apps.core.inputs import InvalidInput, input_check
from apps.graph_tools.registry import tool_names
from apps.projects.models import Project, Role
from apps.projects.selectors import Principal, project_get, project_get_by_ref

EDITABLE = (
    "name",
    "description",
    "system_prompt",
    "model",
    "tools",
    "flow_type",
    "is_default",
    "max_steps",
    "visibility",
    "sub_agents",
    "mcp_servers",
    "tool_policy",
    "history_limit",
    "token_budget",
)


class InvalidAgentDefinition(ServiceError):
    """invalid agent definition"""

    code = "invalid_agent_definition"


MAX_TEXT = {"description": 10_000, "system_prompt": 100_000}


def _validate(fields: dict[str, Any]) -> dict[str, Any]:
    """The editable fields of a definition, checked and normalised; ``InvalidAgentDefinition`` names the first problem."""
    out = {k: v for k, v in fields.items() if k in EDITABLE}
    try:
        input_check(out)
    except InvalidInput as exc:
        raise InvalidAgentDefinition(exc.message) from None
    for text, limit in MAX_TEXT.items():
        if isinstance(out.get(text), str) and len(out[text]) > limit:
            raise InvalidAgentDefinition(f"{text} is longer than {limit} characters")
    for name, check in _FIELD_CHECKS.items():  # in this order: the first problem is the one named
        if name in out:
            out[name] = check(out[name])
    return out


def _name_checked(value: Any) -> str:
    name = str(value or "").strip()
    if not name or len(name) > 100:
        raise InvalidAgentDefinition("name must be 1 to 100 characters")
    return name


def _model_checked(model: Any) -> dict[str, Any]:
    if not isinstance(model, dict) or not isinstance(model.get("name"), str) or not model["name"].strip():
        raise InvalidAgentDefinition('model must be {"name": "<model>", "temperature": <0..2>}')
    temperature = model.get("temperature", 0.1)
    if not isinstance(temperature, int | float) or not 0 <= float(temperature) <= 2:
        raise InvalidAgentDefinition("model.temperature must be a number from 0 to 2")
    return {"name": model["name"].strip(), "temperature": float(temperature)}


def _tools_checked(tools: Any) -> list[str]:
    known = set(tool_names())
    unknown = [t for t in tools or [] if t not in known]
    if unknown:
        raise InvalidAgentDefinition(
            f"unknown tools: {', '.join(unknown)}; known: {', '.join(sorted(known))}"
        )
    return list(dict.fromkeys(tools or []))


def _choice_checked(field: str, choices: list[str]) -> Callable[[Any], Any]:
    def check(value: Any) -> Any:
        if value not in choices:
            raise InvalidAgentDefinition(f"{field} must be one of {', '.join(choices)}")
        return value

    return check


def _integer_checked(field: str, low: int, high: int) -> Callable[[Any], Any]:
    def check(value: Any) -> Any:
        if not isinstance(value, int) or not low <= value <= high:
            raise InvalidAgentDefinition(f"{field} must be an integer from {low} to {high}")
        return value

    return check


_FIELD_CHECKS: dict[str, Callable[[Any], Any]] = {
    "name": _name_checked,
    "model": _model_checked,
    "tools": _tools_checked,
    "flow_type": _choice_checked("flow_type", FlowType.values),
    "visibility": _choice_checked("visibility", Visibility.values),
    "max_steps": _integer_checked("max_steps", 1, 100),
    "history_limit": _integer_checked("history_limit", 1, 500),
    "token_budget": _integer_checked("token_budget", 0, 2_000_000),
    "tool_policy": lambda value: tool_policy_validate(value),
    # Users never set headers (credentials): operators do, in the admin.
    "mcp_servers": lambda value: mcp_servers_validate(value, headers_allowed=False),
}


APPROVAL_VALUES = ("always", "never")


def tool_policy_validate(value: object) -> dict[str, dict[str, str]]:
    """A tool policy as stored: ``{"<write tool>": {"approval": "always" | "never"}}``.

    Read tools always run without approval, so naming one is an error, as is an unknown tool.
    """
    if not isinstance(value, dict):
        raise InvalidAgentDefinition(
            'tool_policy must be an object: {"<write tool>": {"approval": "always"}}'
        )
    write_tools = set(tool_names(read_only=False))
    policy: dict[str, dict[str, str]] = {}
    for name, entry in value.items():
        if name not in write_tools:
            known = name in set(tool_names())
            raise InvalidAgentDefinition(
                f"tool_policy: {name!r} is a read tool, which always runs without approval"
                if known
                else f"tool_policy: unknown write tool {name!r}; write tools: {', '.join(sorted(write_tools))}"
            )
        if (
            not isinstance(entry, dict)
            or set(entry) != {"approval"}
            or entry["approval"] not in APPROVAL_VALUES
        ):
            raise InvalidAgentDefinition(f'tool_policy.{name} must be {{"approval": "always" | "never"}}')
        policy[name] = {"approval": entry["approval"]}
    return policy


def _policy_never(policy: object) -> set[str]:
    """The write tools a stored policy lets run without approval."""
    if not isinstance(policy, dict):
        return set()
    return {n for n, e in policy.items() if isinstance(e, dict) and e.get("approval") == "never"}


def _keep_operator_headers(new: list[dict[str, Any]], old: list[Any]) -> list[dict[str, Any]]:
    """Carry the operator's headers over to entries that keep the same URL and name."""
    headers = {
        (o.get("url"), o.get("name")): o["headers"]
        for o in old
        if isinstance(o, dict) and o.get("url") and o.get("headers")
    }
    return [
        {**n, "headers": headers[(n["url"], n.get("name"))]}
        if n.get("url") and (n["url"], n.get("name")) in headers
        else n
        for n in new
    ]


def _save(definition: AgentDefinition) -> AgentDefinition:
    try:
        with transaction.atomic():
            definition.save()
    except IntegrityError:
        raise InvalidAgentDefinition(
            f"an agent definition named {definition.name!r} already exists in this project",
            code="agent_definition_exists",
            status=409,
        ) from None
    return definition


def agent_definition_create(
    *, principal: Principal, project_ref: object, fields: dict[str, Any]
) -> AgentDefinition:
    """Create a definition (editor role).

    MCP servers, ``private`` visibility and a write tool with ``"approval": "never"`` need the owner
    role: the servers are the owner's choice among what the operator allowlisted, a private
    definition is seen by owners only, and "never" lets the agent change the graph unasked.
    """
    project = project_get(principal=principal, project_ref=project_ref, min_role=Role.EDITOR)
    data = _validate(fields)
    if "name" not in data:
        raise InvalidAgentDefinition("name is required")
    if (
        data.get("mcp_servers")
        or data.get("visibility") == Visibility.PRIVATE
        or _policy_never(data.get("tool_policy"))
    ):
        project_get(principal=principal, project_ref=project.id, min_role=Role.OWNER)
    return _save(AgentDefinition(project=project, **data))


def _editable(*, principal: Principal, definition_id: object) -> AgentDefinition:
    """A definition the principal sees and may change (editor role), else not found or forbidden."""
    definition = agent_definition_get(principal=principal, definition_id=definition_id)
    project_get(principal=principal, project_ref=definition.project_id, min_role=Role.EDITOR)
    return definition


def agent_definition_update(
    *, principal: Principal, definition_id: object, fields: dict[str, Any]
) -> AgentDefinition:
    """Change the given fields (editor role); changing ``mcp_servers``, making it private or letting
    a write tool run without approval (``"never"`` where it was not) needs the owner role."""
    definition = _editable(principal=principal, definition_id=definition_id)
    fields = dict(fields)
    sent = fields.get("mcp_servers")
    unchanged = isinstance(sent, list) and not any(isinstance(e, dict) and "headers" in e for e in sent)
    if unchanged and mcp_servers_public(sent) == mcp_servers_public(definition.mcp_servers):
        del fields["mcp_servers"]  # sent back as the API shows it: not a change of MCP servers
    data = _validate(fields)
    becomes_private = (
        data.get("visibility") == Visibility.PRIVATE and definition.visibility != Visibility.PRIVATE
    )
    newly_never = _policy_never(data.get("tool_policy")) - _policy_never(definition.tool_policy)
    if "mcp_servers" in data or becomes_private or newly_never:
        project_get(principal=principal, project_ref=definition.project_id, min_role=Role.OWNER)
    if "mcp_servers" in data:
        data["mcp_servers"] = _keep_operator_headers(data["mcp_servers"], definition.mcp_servers)
    for key, value in data.items():
        setattr(definition, key, value)
    return _save(definition)


def agent_definition_delete(*, principal: Principal, definition_id: object) -> None:
    """Delete a definition (editor role); its conversations continue as plain chats."""
    _editable(principal=principal, definition_id=definition_id).delete()


@dataclass
class InstallResult:
    installed: list[str] = field(default_factory=list)
    existing: list[str] = field(default_factory=list)


@transaction.atomic
def default_agents_install(*, project: Project) -> InstallResult:
    """Create the default agent definitions the project lacks (by name); never change existing ones.

    Without access checks: for operators (the admin action, bootstrap and eval commands) and tests.
    """
    result = InstallResult()
    for spec in DEFAULT_AGENTS:
        _, created = AgentDefinition.objects.get_or_create(
            project=project, name=spec["name"], defaults={k: v for k, v in spec.items() if k != "name"}
        )
        (result.installed if created else result.existing).append(spec["name"])
    return result


def default_agents_install_as_operator(*, project_ref: str | None) -> dict[Project, InstallResult]:
    """Install the default agents into the project named by id or slug, or into every project when
    ``project_ref`` is None (operators: no access checks)."""
    projects = (
        [project_get_by_ref(project_ref=project_ref)] if project_ref is not None else Project.objects.all()
    )
    return {project: default_agents_install(project=project) for project in projects}


def default_agents_install_as_owner(*, principal: Principal, project_ref: object) -> InstallResult:
    """Install the default agents into a project the principal owns (``403`` for other members)."""
    project = project_get(principal=principal, project_ref=project_ref, min_role=Role.OWNER)
    return default_agents_install(project=project)
