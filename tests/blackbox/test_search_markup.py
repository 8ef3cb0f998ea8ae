"""Full-text search reads the words inside angle brackets (#47 item 2), as clients meet it: names,
descriptions and a passage holding ``<…>`` found by those words over REST and MCP right after the
import and the upload (before the embedding worker gives them vectors), and conversations found
by the words of their messages and titles."""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

import httpx2
import pytest
from mcp import Client
from mcp.client.streamable_http import streamable_http_client

from tests.blackbox.clients import TIMEOUT
from tests.blackbox.covers import covers
from tests.blackbox.server import Kgchat
from tests.blackbox.world import World

TOOL = "POST /api/projects/{project_id}/graph/tools/{tool_name}"
# key -> (name, description, a query holding none of the name as a substring, found by its words)
MARKUP = {
    "list": ("List<String>", "A container type", "strings"),
    "vec": ("Vec<T>", "A growable array", "Vec<T>"),
    "bold": ("<b>Type</b>", "Bold markup", "types"),
    "abc": ("a<b>c", "Letters", "b c"),
    "img": ('<img src="x" onerror="alert(1)">', "An injection attempt", "alert img"),
    "code": ("Parts guide", "Call Optional<Sprocket> when the part may be missing.", "optional sprocket"),
}
PASSAGE = "Keep the parts in a List<Gizmo> and sort them."
NOTES = f"# Parts\n\n{PASSAGE}\n\nNothing else here.\n".encode()


@dataclass
class Generics:
    project_id: str
    token: str


@pytest.fixture(scope="module")
def generics(kgchat: Kgchat, world: World) -> Generics:
    """ada's project "Generics": the names above imported and a note uploaded, then searched at once."""
    ada = world.api("ada")
    project = ada.call("POST /api/projects", 201, json={"name": "Generics", "slug": "generics"}).json()["id"]
    lines = [
        {"kind": "entity", "key": key, "type": "Type", "name": name, "description": description}
        for key, (name, description, _) in MARKUP.items()
    ]
    body = "\n".join(json.dumps(line) for line in lines)
    ada.call("POST /api/projects/{project_id}/graph/import", 200, content=body, project_id=project)
    ada.call(
        "POST /api/projects/{project_id}/documents",
        201,
        files={"file": ("parts.md", NOTES, "text/markdown")},
        project_id=project,
    )
    token = kgchat.manage("create_api_token", "ada", "--project", "generics", "--name", "markup").strip()
    return Generics(project_id=project, token=token)


def keys(result: dict[str, Any]) -> list[str]:
    return [r["key"] for r in result["results"]]


@covers("POST /api/projects/{project_id}/graph/tools/{tool_name}", "200")
def test_names_and_a_passage_in_angle_brackets_are_found_by_their_words_over_rest(
    world: World, generics: Generics
) -> None:
    ada = world.api("ada")

    def tool(name: str, query: str) -> dict[str, Any]:
        arguments = {"query": query, "limit": 10}
        return ada.call(TOOL, 200, json=arguments, project_id=generics.project_id, tool_name=name).json()

    searched = {key: keys(tool("search_entities", query)) for key, (_, _, query) in MARKUP.items()}
    hybrid = {key: keys(tool("hybrid_search", query)) for key, (_, _, query) in MARKUP.items()}
    passages = tool("search_passages", "gizmos")

    assert {key: found[:1] for key, found in searched.items()} == {key: [key] for key in MARKUP}
    assert {key: key in found for key, found in hybrid.items()} == dict.fromkeys(MARKUP, True)
    assert passages["results"][0]["text"] == PASSAGE


@covers("MCP tools/call", "result")
async def test_names_and_a_passage_in_angle_brackets_are_found_by_their_words_over_mcp(
    world: World, generics: Generics
) -> None:
    http = httpx2.AsyncClient(headers={"Authorization": f"Bearer {generics.token}"}, timeout=TIMEOUT)
    results: dict[str, dict[str, Any]] = {}

    async with Client(streamable_http_client(f"{world.url}/mcp", http_client=http)) as client:
        for key, (_, _, query) in MARKUP.items():
            for name in ("search_entities", "hybrid_search"):
                called = await client.call_tool(name, {"query": query})
                assert called.is_error is False, called.content
                results[f"{name} {key}"] = json.loads(called.content[0].text)
        called = await client.call_tool("search_passages", {"query": "gizmos"})
        passages = json.loads(called.content[0].text)

    found = {label: label.split(" ")[1] in keys(result) for label, result in results.items()}
    assert found == dict.fromkeys(results, True)
    assert passages["results"][0]["text"] == PASSAGE


@covers("GET /api/chat/conversations", "200")
@covers("PATCH /api/chat/conversations/{conversation_id}", "200")
def test_a_conversation_is_found_by_words_inside_angle_brackets_with_the_brackets_shown(
    world: World, generics: Generics
) -> None:
    ada = world.api("ada")
    turn = ada.stream({"message": "How do I sort a List<Widget> by name?", "projectId": generics.project_id})
    other = ada.stream({"message": "Something else", "projectId": generics.project_id})
    ada.call(
        "PATCH /api/chat/conversations/{conversation_id}",
        200,
        json={"title": "Map<Gadget> notes"},
        conversation_id=other.meta["conversationId"],
    )

    def search(q: str) -> list[dict[str, Any]]:
        params = {"q": q, "projectId": generics.project_id}
        items: list[dict[str, Any]] = ada.call("GET /api/chat/conversations", 200, params=params).json()[
            "items"
        ]
        return items

    by_message, by_title = search("widgets"), search("gadget")

    assert [c["id"] for c in by_message] == [turn.meta["conversationId"]]
    assert "List&lt;<mark>Widget</mark>&gt;" in by_message[0]["snippet"]
    assert [c["id"] for c in by_title] == [other.meta["conversationId"]]
    assert by_title[0]["snippet"] == "Map&lt;<mark>Gadget</mark>&gt; notes"
