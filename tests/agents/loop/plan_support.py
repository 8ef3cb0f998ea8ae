"""What the tests of a planned turn share: a small graph of countries (its path tool and
relationships), named entities, a plan as the model writes it, and a planned turn's messages and
steps against the local test server."""

from __future__ import annotations

import json
from typing import Any

from apps.agents.llm.base import (
    ChatMessage,
    GenerationConfig,
    StreamEvent,
    ToolCallRequest,
    ToolSpec,
)
from apps.agents.llm.openai_compat import OpenAICompatProvider
from apps.agents.loop import plan_graph
from apps.agents.loop.prompt import LOOKUP_ID_PREFIX
from apps.agents.loop.turn import SmallModelTurn
from apps.graph_tools.registry import GraphVocabulary, tool_get
from tests.llm_server import LLMTestServer

VOCABULARY = GraphVocabulary(
    entity_types=("City", "Country", "Currency"),
    relationships=(
        ("BORDERS", "Country", "Country"),
        ("CAPITAL_OF", "City", "Country"),
        ("LOCATED_IN", "City", "Country"),
        ("USES_CURRENCY", "Country", "Currency"),
    ),
)


def spec(name: str, vocabulary: GraphVocabulary | None = None) -> ToolSpec:
    tool = tool_get(name)
    return ToolSpec(name=tool.name, description=tool.description, parameters=tool.input_schema(vocabulary))


PATHS = spec("query_paths", VOCABULARY)
TOOLS = [spec("hybrid_search"), spec("get_entity_edges"), PATHS]
RELATIONSHIPS = plan_graph.graph_relationships(PATHS)
BENIN = plan_graph.Mention("Benin", "Country", ("country:BJ",), ("area_km2", "population"))
NAIRA = plan_graph.Mention("Naira", "Currency", ("currency:NGN",))
TOGO = plan_graph.Mention("Togo", "Country", ("country:TG",), ("area_km2", "population"))


def entity(key: str, type_: str, name: str, **properties: Any) -> dict[str, Any]:
    return {"id": f"id-{key}", "key": key, "type": type_, "name": name, "properties": properties}


def plan(**fields: Any) -> dict[str, Any]:
    return {
        "start": "Benin",
        "asks_for": "Country",
        "relationships": ["BORDERS"],
        "and": None,
        "answer": "list",
        **fields,
    }


def provider_for(server: LLMTestServer) -> SmallModelTurn:
    return SmallModelTurn(inner=OpenAICompatProvider(base_url=server.base_url, model="small", max_retries=0))


QUESTION = [
    ChatMessage(role="system", content="Be helpful."),
    ChatMessage(role="user", content="Which neighbours of Benin use the Naira?"),
]


def after(*calls: tuple[str, str, dict[str, Any], Any]) -> list[ChatMessage]:
    messages = list(QUESTION)
    for call_id, name, arguments, result in calls:
        messages.append(
            ChatMessage(
                role="assistant", tool_calls=[ToolCallRequest(id=call_id, name=name, arguments=arguments)]
            )
        )
        messages.append(ChatMessage(role="tool", tool_call_id=call_id, content=json.dumps(result)))
    return messages


async def run(provider: SmallModelTurn, messages: list[ChatMessage]) -> list[StreamEvent]:
    return [
        e async for e in provider.stream(messages, TOOLS, GenerationConfig(model="small", temperature=0.1))
    ]


LOOKUP = (
    f"{LOOKUP_ID_PREFIX}1",
    "query_paths",
    plan_graph.mention_lookup("Which neighbours of Benin use the Naira?"),
    {
        "start": [],
        "results": [entity("country:BJ", "Country", "Benin"), entity("currency:NGN", "Currency", "Naira")],
        "count": 2,
    },
)
