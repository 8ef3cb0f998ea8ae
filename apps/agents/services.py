"""Writes of the agent audit trail (``kb.agent_runs``, ``agent_run_messages``, ``agent_run_tool_calls``).

All async: the executor runs on the event loop, where ADK also runs tools inline.
"""

from __future__ import annotations

import os
import socket
import uuid
from collections.abc import Sequence
from typing import Any

from asgiref.sync import sync_to_async
from django.db import transaction
from django.utils import timezone

from apps.agents.models import AgentRun, AgentRunMessage, AgentRunToolCall, RunStatus
from apps.projects.inputs import storable


def worker_name() -> str:
    """This server process, so that a restarted one can mark its orphaned runs interrupted."""
    return f"{socket.gethostname()}:{os.getpid()}"


async def agent_run_start(
    *,
    project_id: uuid.UUID,
    agent_definition_id: uuid.UUID | None,
    conversation_id: uuid.UUID | None,
    model: str = "",
    run_id: uuid.UUID | None = None,
) -> AgentRun:
    return await AgentRun.objects.acreate(
        id=run_id or uuid.uuid4(),
        project_id=project_id,
        agent_definition_id=agent_definition_id,
        conversation_id=conversation_id,
        model=model[:200],
        status=RunStatus.RUNNING,
        worker=worker_name()[:200],
    )


async def agent_run_finish(
    *,
    run: AgentRun,
    status: str,
    stop_reason: str,
    error: str = "",
    model: str = "",
    step_count: int = 0,
    input_tokens: int = 0,
    output_tokens: int = 0,
    final_text: str = "",
    messages: Sequence[dict[str, Any]] = (),
    tool_calls: Sequence[dict[str, Any]] = (),
) -> AgentRun:
    """Close a run with its outcome, its messages and its tool calls: one transaction, one round trip."""
    run.status = status
    run.stop_reason = stop_reason[:64]
    run.error = storable(error)
    run.model = (model or run.model)[:200]
    run.step_count = step_count
    run.input_tokens = input_tokens
    run.output_tokens = output_tokens
    run.final_text = storable(final_text)
    # What the model wrote (and the arguments it passed) may hold NUL or lone surrogates.
    messages, tool_calls = storable(messages), storable(tool_calls)
    run.completed_at = timezone.now()

    @sync_to_async
    def write() -> None:
        with transaction.atomic():
            run.save(
                update_fields=[
                    "status",
                    "stop_reason",
                    "error",
                    "model",
                    "step_count",
                    "input_tokens",
                    "output_tokens",
                    "final_text",
                    "completed_at",
                ]
            )
            if messages:
                AgentRunMessage.objects.bulk_create([AgentRunMessage(run=run, **m) for m in messages])
            if tool_calls:
                AgentRunToolCall.objects.bulk_create([AgentRunToolCall(run=run, **c) for c in tool_calls])

    await write()
    return run
