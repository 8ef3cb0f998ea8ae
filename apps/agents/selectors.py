"""Reads of agent definitions. A member's every lookup is scoped to the definitions they may see.

Visibility: a ``project`` definition is seen and used by every member of its project; a
``private`` one only by the project's owners. A definition a principal may not see answers
``AgentDefinitionNotFound``, exactly like one that does not exist.
"""

from __future__ import annotations

import uuid

from django.db.models import Exists, Q, QuerySet

from apps.agents.models import AgentDefinition, Visibility
from apps.core.errors import NotFound, ServiceError
from apps.graph_tools.registry import tool_get, tool_names
from apps.graph_tools.selectors import approval_allowed
from apps.projects.models import Project, ProjectMembership, Role
from apps.projects.selectors import Principal, parse_uuid, project_get, project_list


class AgentDefinitionNotFound(NotFound):
    """agent definition not found"""

    code = "agent_definition_not_found"


class AgentDefinitionDisabled(ServiceError):
    """this agent definition is disabled"""

    status = 409
    code = "agent_definition_disabled"


def agent_definitions_visible(*, principal: Principal) -> QuerySet[AgentDefinition]:
    """Every definition the principal may see and use, in all the projects they may see."""
    owned = ProjectMembership.objects.filter(user_id=principal.user_id, role=Role.OWNER).values("project_id")
    return AgentDefinition.objects.filter(project__in=project_list(principal=principal)).filter(
        Q(visibility=Visibility.PROJECT) | Q(project_id__in=owned)
    )


def agent_definition_list(*, principal: Principal, project_ref: object) -> QuerySet[AgentDefinition]:
    """The project's definitions the principal may see, the default ones first."""
    project = project_get(principal=principal, project_ref=project_ref)
    return (
        agent_definitions_visible(principal=principal).filter(project=project).order_by("-is_default", "name")
    )


def agent_definition_get(*, principal: Principal, definition_id: object) -> AgentDefinition:
    did = parse_uuid(definition_id)
    definition = agent_definitions_visible(principal=principal).filter(id=did).first() if did else None
    if definition is None:
        raise AgentDefinitionNotFound()
    return definition


def agent_definition_check_enabled(definition: AgentDefinition) -> None:
    """Raise ``AgentDefinitionDisabled`` (with the operator's reason) for a definition that may not run."""
    if definition.disabled_reason:
        raise AgentDefinitionDisabled(
            f"agent definition {definition.name!r} is disabled: {definition.disabled_reason}"
        )


def agent_definition_check_usable(*, principal: Principal, definition: AgentDefinition) -> None:
    """Raise unless the principal may chat with ``definition`` now: it is visible to them and enabled.

    One they may not see is ``400 agent_definition_not_found`` (PROTOCOL §2, StreamRequest).
    """
    if not agent_definitions_visible(principal=principal).filter(id=definition.id).exists():
        raise AgentDefinitionNotFound("agent definition not found", status=400)
    agent_definition_check_enabled(definition)


def agent_definition_for_conversation(
    *, principal: Principal, project_id: uuid.UUID, definition_id: object
) -> AgentDefinition:
    """Return the definition a new conversation of the project will use, checked as usable.

    Another project's, an invisible or an unknown one is ``400 agent_definition_not_found``.
    """
    did = parse_uuid(definition_id)
    # One query: the project's definition, if the principal may see it (else it does not exist).
    definition = (
        agent_definitions_visible(principal=principal).filter(id=did, project_id=project_id).first()
        if did
        else None
    )
    if definition is None:
        raise AgentDefinitionNotFound("agent definition not found", status=400)
    agent_definition_check_enabled(definition)
    return definition


async def agent_definitions_by_names(
    *, project_id: uuid.UUID, names: list[str], user_id: int | None = None
) -> list[AgentDefinition]:
    """The project's enabled definitions named in ``names``, in that order; others are left out.

    With ``user_id`` (the user whose turn it is), a private definition is left out unless that user
    owns the project: naming one as a sub-agent does not let other members use it. Without it
    (operators' commands and evals), no visibility applies."""
    if not names:
        return []
    enabled = AgentDefinition.objects.filter(project_id=project_id, name__in=names, disabled_reason="")
    if user_id is not None:
        owner = ProjectMembership.objects.filter(project_id=project_id, user_id=user_id, role=Role.OWNER)
        enabled = enabled.filter(Q(visibility=Visibility.PROJECT) | Exists(owner))
    found = {d.name: d async for d in enabled}
    return [found[n] for n in names if n in found]


def agent_definition_by_name(*, project: Project, name: str) -> AgentDefinition:
    """Return a definition by name without access checks (operators' commands)."""
    try:
        return AgentDefinition.objects.get(project=project, name=name)
    except AgentDefinition.DoesNotExist:
        raise AgentDefinitionNotFound(f"no agent {name!r} in project {project.slug}") from None


def tool_approval_needed(*, definition: AgentDefinition, tool_name: str, principal: Principal) -> bool:
    """Whether a call of ``tool_name`` by this agent, in a turn of ``principal``, must wait for a
    member's approval.

    Read tools: never. Write tools: unless the definition's tool policy says ``"never"`` for the tool
    *and* the principal may edit the graph (a viewer's turn never writes unasked: an editor or owner
    approves it). ``UnknownTool`` for a name the registry does not know.
    """
    if tool_get(tool_name).read_only:
        return False
    policy = definition.tool_policy if isinstance(definition.tool_policy, dict) else {}
    entry = policy.get(tool_name)
    never = isinstance(entry, dict) and entry.get("approval") == "never"
    return not (never and approval_allowed(principal=principal, project_id=definition.project_id))


def tool_policy_effective(definition: AgentDefinition) -> dict[str, dict[str, str]]:
    """The approval setting of every write tool the definition has (``"always"`` unless set), plus
    any other write tool its stored policy names."""
    stored = definition.tool_policy if isinstance(definition.tool_policy, dict) else {}
    writes = set(tool_names(read_only=False))
    names = [t for t in definition.tools or [] if t in writes]
    names += [t for t in stored if t in writes and t not in names]
    return {
        t: {"approval": "never" if (stored.get(t) or {}).get("approval") == "never" else "always"}
        for t in names
    }
