"""One eval end to end: questions through the turn service, answered by scripted models, scored."""

import json

import pytest
from asgiref.sync import sync_to_async

from apps.agents.definitions import default_agents_install
from apps.agents.llm.scripted import ScriptedProvider, register_script, text, unregister_script
from apps.agents.models import AgentRunToolCall
from apps.chat.models import Conversation
from apps.chat.streams.bus import InProcessFrameBus, set_bus
from apps.evals.planner import PLANNER_MODEL
from apps.evals.questions import BASIC_KINDS
from apps.evals.services import eval_plan, eval_run
from apps.evals.sets import fictional_world, world_graph_lines
from apps.graph_tools.importer import graph_import
from tests.factories import make_project

pytestmark = pytest.mark.django_db(transaction=True)

SEED = 7


@pytest.fixture(autouse=True)
def fresh_bus():
    set_bus(InProcessFrameBus())
    yield
    set_bus(None)


@pytest.fixture
def fictional_project(db):
    project = make_project(name="Fictional")
    graph_import(
        project=project, lines=(json.dumps(r) for r in world_graph_lines(fictional_world(seed=SEED)))
    )
    default_agents_install(project=project)
    return project


async def test_perfect_planner_answers_every_fictional_question_from_the_tools(fictional_project):
    plan = await eval_plan(
        set_name="fictional", project_ref=fictional_project.slug, agent_name="graph-query-agent",
        models=[PLANNER_MODEL], plain=False, per_kind=1, seed=SEED, kinds=list(BASIC_KINDS),
    )  # fmt: skip

    results = await eval_run(plan=plan)

    assert [r.kind for r in results] == ["one_hop", "two_hop", "list", "absent", "count"]
    assert [r.score for r in results] == [1.0] * 5
    assert all(r.mode == "agent" and r.run_id and r.error is None for r in results)
    stored_calls = await AgentRunToolCall.objects.filter(run_id__in=[r.run_id for r in results]).acount()
    assert sum(r.tool_calls for r in results) == stored_calls > 0
    assert all(len(r.calls) == r.tool_calls for r in results)
    assert results[0].calls[0]["tool"] == "search_entities" and "query" in results[0].calls[0]["arguments"]
    cited = [r for r in results if r.kind != "absent"]
    assert all(r.cited > 0 and r.citation_precision == 1.0 for r in cited)
    assert all(r.steps >= 2 and r.input_tokens > 0 and r.done_s is not None for r in results)
    assert await Conversation.objects.filter(project=fictional_project).acount() == 5


async def test_a_model_that_answers_from_memory_scores_zero_and_its_made_up_citation_is_imprecise(
    fictional_project,
):
    provider = ScriptedProvider(
        responder=lambda messages, tools: text("It is [Atlantis](entity:atlantis-id), I believe.")
    )
    register_script("from-memory", provider)
    try:
        plan = await eval_plan(
            set_name="fictional", project_ref=fictional_project.slug, agent_name="graph-query-agent",
            models=["scripted/from-memory"], plain=True, per_kind=1, seed=SEED, limit=1,
        )  # fmt: skip

        results = await eval_run(plan=plan)
    finally:
        unregister_script("from-memory")

    assert [(r.mode, r.score) for r in results] == [("agent", 0.0), ("plain", 0.0)]
    assert [(r.cited, r.valid_citations, r.citation_precision) for r in results] == [(1, 0, 0.0)] * 2
    assert [r.tool_calls for r in results] == [0, 0]
    assert results[1].steps == 1


async def test_eval_of_an_unknown_agent_is_a_clear_error_and_asks_nothing(fictional_project):
    from apps.evals.harness import EvalError

    with pytest.raises(EvalError, match="no agent definition named 'nobody'"):
        await eval_plan(
            set_name="fictional", project_ref=fictional_project.slug, agent_name="nobody",
            models=[PLANNER_MODEL], plain=False, seed=SEED,
        )  # fmt: skip

    assert not await sync_to_async(Conversation.objects.exists)()


async def test_a_follow_up_is_asked_after_its_prelude_in_the_same_conversation(fictional_project):
    from apps.chat.models import Message

    seen: list[list[str]] = []

    def respond(messages, tools):
        seen.append([m.content for m in messages if m.role == "user"])
        return text("Noted.")

    register_script("echo", ScriptedProvider(responder=respond))
    try:
        plan = await eval_plan(
            set_name="fictional", project_ref=fictional_project.slug, agent_name="graph-query-agent",
            models=["scripted/echo"], plain=False, per_kind=1, seed=SEED, kinds=["follow_up"],
        )  # fmt: skip
        (question,) = plan.questions

        (result,) = await eval_run(plan=plan)
    finally:
        unregister_script("echo")

    assert result.prelude == list(question.prelude) and len(question.prelude) == 1
    assert seen[-1] == [question.prelude[0], question.text]
    users = Message.objects.filter(conversation_id=result.conversation_id, role="user").order_by("created_at")
    assert [m.content async for m in users] == [question.prelude[0], question.text]
