"""Settings of the daphne process that ``bench.load`` measures: the app's own, plus an instant model.

The model is a scripted provider registered in the server process (``scripted/bench-load``):
for a new question it calls ``get_entity_edges`` once, after the tool result it streams 200
tokens; a plain turn (no tools offered) gets the 200 tokens at once. It answers at once and costs no I/O, so the figures measure kgchat (websocket, turn
service, frame bus, ADK executor, the tool's SQL, persistence), not a model or a fake HTTP server.
Everything else, including the per-user rate limit, is as in ``config.settings.local``.
"""

from typing import Any

from apps.agents.llm.base import Done, TextDelta, Usage
from apps.agents.llm.scripted import ScriptedProvider, register_script, tool_call
from config.settings.local import *  # noqa: F403

MODEL_NAME = "bench-load"
TOKENS = 200
ENTITY = "paris"

DEBUG = False
KGCHAT_MODEL = f"scripted/{MODEL_NAME}"


def _respond(messages: list[Any], tools: list[Any]) -> list[Any]:
    if not tools or (messages and messages[-1].role == "tool"):  # a plain turn, or after the tool
        return [
            *(TextDelta(text=f"t{i} ") for i in range(TOKENS)),
            Done(usage=Usage(input_tokens=500, output_tokens=TOKENS)),
        ]
    return [
        tool_call("get_entity_edges", {"entity_id": ENTITY}),
        Done(usage=Usage(input_tokens=400, output_tokens=10)),
    ]


register_script(MODEL_NAME, ScriptedProvider(responder=_respond, name=KGCHAT_MODEL))
