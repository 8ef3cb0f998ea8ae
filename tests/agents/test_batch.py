"""Batch turns (apps/agents/batch.py): the hallucinated-sub-agent retry of run_and_collect, run_agent."""

from __future__ import annotations

import io
from typing import Any

import pytest
from asgiref.sync import sync_to_async
from django.core.management import call_command
from pytest_django import Settings

from apps.agents.batch import run_and_collect
from apps.agents.executor import AgentExecutor, ExecuteRequest, ExecuteResult
from apps.agents.llm.base import Done, ErrorEvent
from apps.agents.llm.scripted import (
    Raise,
    ScriptedProvider,
    register_script,
    text,
    tool_call,
    unregister_script,
)
from apps.agents.models import AgentDefinition
from tests.factories import make_agent_definition, make_project

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def root() -> AgentDefinition:
    project = make_project()
    make_agent_definition(project, name="schema-helper", description="Knows the schema.")
    make_agent_definition(project, name="search-helper", description="Searches.")
    return make_agent_definition(
        project, name="router", sub_agents=["schema-helper", "search-helper"], max_steps=5
    )


def hallucinating(*retry: list[Any]) -> ScriptedProvider:
    return ScriptedProvider(
        turns=[[tool_call("transfer_to_agent", {"agent_name": "ghost-agent"}, id="t1"), Done()], *retry]
    )


async def collect(definition: AgentDefinition, provider: ScriptedProvider) -> ExecuteResult:
    return await run_and_collect(
        ExecuteRequest(agent_definition=definition, message="Route me", provider=provider)
    )


async def test_hallucinated_agent_name_triggers_retry(root: AgentDefinition) -> None:
    provider = hallucinating(text("Answered directly."))

    await collect(root, provider)

    retry_messages = provider.calls[-1].messages
    assert retry_messages[-1].role == "user"
    assert retry_messages[-1].content == (
        '[System: Agent "ghost-agent" does not exist. Valid agents: schema_helper, search_helper. '
        "Please retry using one of the valid agent names listed above.]"
    )
    assert any(m.content == "Route me" for m in retry_messages)
    assert len(provider.calls) == 2


async def test_retry_succeeds(root: AgentDefinition) -> None:
    result = await collect(root, hallucinating(text("Answered directly.")))

    assert (result.status, result.text, result.error) == ("success", "Answered directly.", None)


async def test_retry_also_fails(root: AgentDefinition) -> None:
    provider = hallucinating([tool_call("transfer_to_agent", {"agent_name": "phantom"}, id="t2"), Done()])

    result = await collect(root, provider)

    assert result.status == "error"
    assert result.error == "failed to find agent: phantom"
    assert len(provider.calls) == 2


async def test_non_hallucination_error_is_not_retried(root: AgentDefinition) -> None:
    failing = ScriptedProvider(turns=[[ErrorEvent(error="HTTP 503 from model server")]])

    result = await collect(root, failing)

    assert result.status == "error" and result.error_code == "llm_error"
    assert len(failing.calls) == 1


async def test_no_sub_agents_means_no_retry() -> None:
    definition = await sync_to_async(make_agent_definition)(await sync_to_async(make_project)(), name="solo")
    provider = ScriptedProvider(turns=[[Raise("failed to find agent: ghost")], text("never")])

    result = await collect(definition, provider)

    assert result.status == "error"
    assert result.error is not None and result.error.startswith("failed to find agent")
    assert len(provider.calls) == 1


def test_run_agent_command_prints_the_answer(root: AgentDefinition, settings: Settings) -> None:
    settings.KGCHAT_MODEL = "scripted/cli"
    register_script("cli", ScriptedProvider(turns=[text("Forty-two.")]))
    out = io.StringIO()
    try:
        call_command(
            "run_agent",
            "What is the answer?",
            project=root.project.slug,
            agent="router",
            stdout=out,
            stderr=io.StringIO(),
        )
    finally:
        unregister_script("cli")

    assert out.getvalue().strip() == "Forty-two."


async def test_executor_reports_hallucinated_agent_as_failed_to_find(root: AgentDefinition) -> None:
    result = await AgentExecutor().execute(
        ExecuteRequest(agent_definition=root, message="Route me", provider=hallucinating())
    )

    assert result.status == "error" and result.error == "failed to find agent: ghost-agent"
