"""Agent turns for batch callers (commands, evals): no stream, one retry on a made-up sub-agent."""

from __future__ import annotations

import re
from dataclasses import replace

from asgiref.sync import sync_to_async

from apps.agents.adk.tools import adk_name
from apps.agents.executor import AgentExecutor, ExecuteRequest, ExecuteResult
from apps.agents.history import HistoryMessage
from apps.agents.models import RunStatus
from apps.agents.selectors import agent_definition_by_name, agent_definitions_by_names
from apps.projects.selectors import project_get_by_ref

_FAILED_TO_FIND_AGENT = re.compile(r"failed to find agent: ([\w.-]+)")
CORRECTION_MESSAGE = (
    '[System: Agent "{name}" does not exist. Valid agents: {valid}. '
    "Please retry using one of the valid agent names listed above.]"
)


async def run_and_collect(request: ExecuteRequest, *, executor: AgentExecutor | None = None) -> ExecuteResult:
    """Run a turn for a batch caller; retry once when the model named a sub-agent that does not exist.

    The text is collected from partial events or the final event, never both (see ``RunState``).
    On ``failed to find agent: <name>`` with sub-agents registered, the correction message is sent
    as the next user message (after the failed attempt's messages) and the run is retried exactly
    once; its result, success or error, is returned. Any other error is returned at once.
    """
    executor = executor or AgentExecutor()
    result = await executor.execute(request)
    match = _FAILED_TO_FIND_AGENT.search(result.error or "") if result.status == RunStatus.ERROR else None
    if match is None:
        return result
    definition = request.agent_definition
    subs = request.sub_agent_definitions
    if subs is None:
        subs = await agent_definitions_by_names(
            project_id=request.project_id or definition.project_id,
            names=list(definition.sub_agents or []),
            user_id=request.writer_user_id,
        )
    if not subs:
        return result
    correction = CORRECTION_MESSAGE.format(
        name=match.group(1), valid=", ".join(adk_name(d.name) for d in subs)
    )
    history = [*request.history, HistoryMessage(role="user", content=request.message), *result.messages]
    retry = replace(request, message=correction, history=history, sub_agent_definitions=subs)
    return await executor.execute(retry)


async def agent_question_answer(*, project_ref: str, agent_name: str, question: str) -> ExecuteResult:
    """Ask one agent of a project one question, in batch mode (the ``run_agent`` command)."""
    project = await sync_to_async(project_get_by_ref)(project_ref=project_ref)
    definition = await sync_to_async(agent_definition_by_name)(project=project, name=agent_name)
    return await run_and_collect(
        ExecuteRequest(agent_definition=definition, message=question, project_id=project.id)
    )
