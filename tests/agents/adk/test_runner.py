"""The ADK runner's RunState: text is collected from partial events or the final one, never both."""

from __future__ import annotations

import uuid

import pytest
from google.adk.events.event import Event
from google.genai import types

from apps.agents.adk.run_state import RunState


def model_event(words: str, *, partial: bool) -> Event:
    return Event(
        author="agent", partial=partial, content=types.Content(role="model", parts=[types.Part(text=words)])
    )


async def test_streaming_mode_collects_from_partial_events_only() -> None:
    state = RunState(callback=None, max_steps=5)

    for event in (
        model_event("Hello ", partial=True),
        model_event("world", partial=True),
        model_event("Hello world", partial=False),
    ):
        await state.on_event(event)

    assert "".join(state.text) == "Hello world"


async def test_non_streaming_mode_collects_from_final_event() -> None:
    state = RunState(callback=None, max_steps=5)

    await state.on_event(model_event("Hello world", partial=False))

    assert "".join(state.text) == "Hello world"


class MemoryEvents:
    """Where a run without a ``kb.agent_runs`` row keeps its session events (``RunSessionService``)."""

    def __init__(self) -> None:
        self.rows: list[dict] = []

    async def agent_run_events_append(self, *, run_id, rows) -> None:
        self.rows.extend(rows)

    async def agent_run_events_load(self, *, run_id):
        return [(r["seeded"], r["event"]) for r in self.rows]


def _graph_agent_definition(tools: list[str]):
    from apps.agents.models import AgentDefinition

    return AgentDefinition(name="grapher", tools=tools, model={"name": "scripted/test", "temperature": 0.1})


@pytest.mark.django_db
async def test_graph_tools_reach_adk_as_one_toolset_and_the_model_is_offered_each_of_them() -> None:
    from apps.agents.adk.runner import adk_run, build_agent
    from apps.agents.adk.tools import GraphToolset
    from apps.agents.llm.scripted import ScriptedProvider, text
    from apps.graph_tools.registry import tool_names

    names = tool_names(read_only=True)
    definition = _graph_agent_definition(names)
    provider = ScriptedProvider(turns=[text("Nothing to look up.")])
    state = RunState(callback=None, max_steps=5)
    project_id = uuid.uuid4()

    agent = build_agent(definition, provider, state, project_id=project_id, sub_definitions=[])
    await adk_run(
        state,
        definition=definition,
        provider=provider,
        message="Hello",
        history=[],
        project_id=project_id,
        sub_definitions=[],
        run_id=uuid.uuid4(),
        event_store=MemoryEvents(),
        user_id="u",
        stop=None,
        share_provider=True,
    )

    assert len(agent.tools) == 1 and isinstance(agent.tools[0], GraphToolset)
    # The project has no documents: the passage search is not offered (its availability check).
    assert sorted(t.name for t in provider.calls[0].tools) == sorted(
        n for n in names if n != "search_passages"
    )
    assert "".join(state.text) == "Nothing to look up."


async def test_a_toolset_told_what_its_tools_have_to_work_on_reads_nothing_itself() -> None:
    # No database here (no django_db mark): a read of its own would fail the test.
    from apps.agents.adk.tools import GraphToolset, graph_tools

    names = ["hybrid_search", "search_passages"]
    project_id = uuid.uuid4()
    without = GraphToolset(
        graph_tools(names, project_id=project_id), project_id=project_id, available={"search_passages": False}
    )
    with_documents = GraphToolset(
        graph_tools(names, project_id=project_id), project_id=project_id, available={"search_passages": True}
    )

    assert [t.name for t in await without.get_tools()] == ["hybrid_search"]
    assert [t.name for t in await with_documents.get_tools()] == names


@pytest.mark.django_db(transaction=True)
async def test_query_paths_is_offered_with_the_projects_relationship_and_entity_types() -> None:
    from asgiref.sync import sync_to_async

    from apps.agents.adk.runner import adk_run
    from apps.agents.llm.scripted import ScriptedProvider, text
    from tests.factories import make_entity, make_project, make_relationship

    def build() -> uuid.UUID:
        project = make_project()
        make_relationship(
            project,
            make_entity(project, "a", type="City"),
            "LOCATED_IN",
            make_entity(project, "b", type="Country"),
        )
        return project.id

    project_id = await sync_to_async(build)()
    definition = _graph_agent_definition(["query_paths"])
    provider = ScriptedProvider(turns=[text("Nothing to look up.")])

    await adk_run(
        RunState(callback=None, max_steps=5),
        definition=definition,
        provider=provider,
        message="Hello",
        history=[],
        project_id=project_id,
        sub_definitions=[],
        run_id=uuid.uuid4(),
        event_store=MemoryEvents(),
        user_id="u",
        stop=None,
        share_provider=True,
        graph_version=1,
    )

    (spec,) = provider.calls[0].tools
    hop = spec.parameters["$defs"]["Hop"]["properties"]
    assert next(b for b in hop["relationship"]["anyOf"] if b.get("type") == "string")["enum"] == [
        "LOCATED_IN"
    ]
    assert next(b for b in hop["type"]["anyOf"] if b.get("type") == "string")["enum"] == ["City", "Country"]
