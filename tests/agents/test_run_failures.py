"""What ends an agent run is classified once, by ``apps.core.failures`` (issue #47 item 8): the
user's ``error`` event says what a service error says, a busy database as ``database_busy``, and an
unexpected exception only as ``internal_error``: its text is logged, never shown or stored."""

from __future__ import annotations

import logging

import pytest
from psycopg_pool import PoolTimeout

from apps.agents.events import RunError, RunEvent
from apps.agents.executor import AgentExecutor, ExecuteRequest
from apps.agents.llm.scripted import ScriptedProvider
from apps.agents.models import AgentDefinition, AgentRun
from apps.core.errors import NotFound
from tests.factories import make_agent_definition, make_project

pytestmark = pytest.mark.django_db(transaction=True)

SECRET = "password=hunter2 at /srv/kgchat/secrets.env"


@pytest.fixture
def definition() -> AgentDefinition:
    return make_agent_definition(
        make_project(), name="graph-query-agent", tools=["list_entity_types"], model={"name": "scripted/t"}
    )


def _raising(exc: Exception) -> ScriptedProvider:
    def responder(messages, tools):
        raise exc

    return ScriptedProvider(responder=responder)


async def _run(definition: AgentDefinition, provider: ScriptedProvider) -> tuple[list[RunError], AgentRun]:
    events: list[RunEvent] = []
    result = await AgentExecutor().execute(
        ExecuteRequest(
            agent_definition=definition,
            message="Which types?",
            provider=provider,
            stream_callback=events.append,
        )
    )
    run = await AgentRun.objects.aget(id=result.run_id)
    return [e for e in events if isinstance(e, RunError)], run


async def test_an_unexpected_exception_that_ends_a_run_is_logged_and_never_shown(
    definition: AgentDefinition, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.ERROR, logger="kgchat.failures")

    errors, run = await _run(definition, _raising(RuntimeError(SECRET)))

    assert [(e.code, SECRET in e.message, "RuntimeError" in e.message) for e in errors] == [
        ("internal_error", False, False)
    ]
    assert (run.status, run.stop_reason) == ("error", "internal_error")
    assert SECRET not in run.error and "RuntimeError" not in run.error
    assert any(SECRET in str(r.exc_info[1]) for r in caplog.records if r.exc_info)


async def test_a_run_ended_by_a_busy_database_says_database_busy(definition: AgentDefinition) -> None:
    errors, run = await _run(definition, _raising(PoolTimeout("couldn't get a connection after 30.00 sec")))

    assert [e.code for e in errors] == ["database_busy"]
    assert "couldn't get a connection" not in errors[0].message
    assert (run.status, run.stop_reason) == ("error", "database_busy")


async def test_a_service_error_that_ends_a_run_is_shown_as_it_says(definition: AgentDefinition) -> None:
    errors, run = await _run(definition, _raising(NotFound("the project's graph is gone")))

    assert [(e.code, e.message) for e in errors] == [("not_found", "the project's graph is gone")]
    assert (run.status, run.stop_reason, run.error) == ("error", "not_found", "the project's graph is gone")
