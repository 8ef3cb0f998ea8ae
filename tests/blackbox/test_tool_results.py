"""A long tool result, as each of its consumers gets it (issue #47 item 6, docs/protocol.md §3).

An agent calls ``hybrid_search {"query": "zeppelin", "limit": 50}`` over 30 entities with
12,000-character descriptions (about 360,000 characters of JSON). With the defaults a user runs
with: the audit trail (``GET /api/agent-runs/{run}``) holds all 30 results; the ``mcp_tool`` frame,
past ``KGCHAT_FRAME_RESULT_MAX_CHARS`` (200,000), is ``{truncated, preview}``; the model gets at
most ``KGCHAT_TOOL_RESULT_MAX_CHARS`` (40,000), told it was shortened. The REST tool route and the
MCP server answer the whole result.
"""

from __future__ import annotations

import json
from typing import Any

import pytest

from tests.blackbox.covers import covers
from tests.blackbox.model import ScriptedModel
from tests.blackbox.server import Kgchat
from tests.blackbox.test_mcp import mcp_client, payload
from tests.blackbox.world import World
from tests.llm_server import LLMTestServer, last_user_text, tool_results

FRAME_MAX_CHARS = 200_000
MODEL_MAX_CHARS = 40_000
DESCRIPTION_CHARS = 12_000
SEARCH = {"query": "zeppelin", "limit": 50}


@pytest.fixture(scope="module")
def hangar(world: World) -> dict[str, str]:
    """ada's project "Hangar": 30 airships with 12,000-character descriptions, and an agent that searches."""
    ada = world.api("ada")
    project = ada.call("POST /api/projects", 201, json={"name": "Hangar", "slug": "hangar"}).json()["id"]
    lines = []
    for n in range(30):
        # Ends with a letter: the import strips a description's surrounding spaces.
        description = (f"The zeppelin airship number {n} flew over the sea. " * 300)[
            : DESCRIPTION_CHARS - 1
        ] + "."
        entity = {"kind": "entity", "key": f"zeppelin-{n}", "type": "Airship", "name": f"Zeppelin {n}"}
        lines.append(json.dumps({**entity, "description": description}))
    ada.call(
        "POST /api/projects/{project_id}/graph/import", 200, content="\n".join(lines), project_id=project
    )
    agent = ada.call(
        "POST /api/projects/{project_id}/agent-definitions",
        201,
        json={
            "name": "searcher",
            "description": "Searches",
            "systemPrompt": "Search.",
            "tools": ["hybrid_search"],
        },
        project_id=project,
    ).json()
    return {"project": project, "agent": agent["id"]}


def whole(result: dict[str, Any]) -> bool:
    results = result["results"]
    return len(results) == 30 and all(len(r["description"]) == DESCRIPTION_CHARS for r in results)


def given_to_the_model(server: LLMTestServer, marker: str) -> list[str]:
    """The tool results the scripted model was sent in the turn whose message holds ``marker``."""
    return [
        m["content"]
        for request in server.requests
        if marker in last_user_text(request)
        for m in tool_results(request)
    ]


@covers("POST /api/chat/stream", "200")
@covers("GET /api/agent-runs/{run_id}", "200")
def test_a_long_search_is_whole_in_the_audit_a_preview_in_the_frame_and_shortened_for_the_model(
    world: World, hangar: dict[str, str], scripted_model: tuple[LLMTestServer, ScriptedModel]
) -> None:
    ada = world.api("ada")

    turn = ada.stream(
        {
            "message": f"#tool hybrid_search {json.dumps(SEARCH)}\nWhich zeppelins are in the hangar?",
            "projectId": hangar["project"],
            "agentDefinitionId": hangar["agent"],
        }
    )

    assert turn.error is None and turn.done["messageId"] is not None
    completed = next(f for f in turn.of_type("mcp_tool") if f["status"] == "completed")
    assert completed["result"]["truncated"] is True
    assert len(completed["result"]["preview"]) == FRAME_MAX_CHARS
    run = ada.call("GET /api/agent-runs/{run_id}", 200, run_id=turn.meta["runId"]).json()
    assert [c["toolName"] for c in run["toolCalls"]] == ["hybrid_search"]
    assert whole(run["toolCalls"][0]["output"])
    [seen] = given_to_the_model(scripted_model[0], "Which zeppelins are in the hangar?")
    assert len(seen) <= MODEL_MAX_CHARS
    shortened = json.loads(seen)
    assert shortened["truncated"] is True and 0 < len(shortened["results"]) < 30


@covers("POST /api/projects/{project_id}/graph/tools/{tool_name}", "200")
@covers("MCP tools/call", "result")
async def test_the_rest_tool_route_and_the_mcp_server_answer_a_long_search_whole(
    world: World, hangar: dict[str, str], kgchat: Kgchat
) -> None:
    token = kgchat.manage("create_api_token", "ada", "--project", "hangar", "--name", "hangar").strip()

    rest = world.api("ada").call(
        "POST /api/projects/{project_id}/graph/tools/{tool_name}",
        200,
        json=SEARCH,
        project_id=hangar["project"],
        tool_name="hybrid_search",
    )
    async with mcp_client(world, token) as client:
        mcp = await client.call_tool("hybrid_search", SEARCH)

    assert whole(rest.json())
    assert whole(payload(mcp))
