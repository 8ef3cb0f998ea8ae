"""Settings of both servers that ``bench.vs_adk_server`` starts (kgchat's daphne and ``adk api_server``).

The app's own settings, with one instant model registered in each server process
(``scripted/bench-vs-adk``): for a new question it calls ``get_entity_edges`` once, after the
tool's result it streams 200 one-word deltas. A question starting with ``[slow]`` streams the
same deltas ``SLOW_DELAY`` apart (the memory bench needs turns that stay running). The model
costs no I/O, so what is measured is the server around it. The rate limit stays on (its query
runs on every turn) but is set high enough that a 100-turn conversation never trips it.
"""

from typing import Any

from apps.agents.llm.base import Done, TextDelta, Usage
from apps.agents.llm.scripted import Delay, ScriptedProvider, ScriptItem, register_script, tool_call
from config.settings.base import *  # noqa: F403

MODEL_NAME = "bench-vs-adk"
TOKENS = 200
ENTITY = "paris"
SLOW_PREFIX = "[slow]"
SLOW_DELAY = 0.03

DEBUG = False
KGCHAT_MODEL = f"scripted/{MODEL_NAME}"
KGCHAT_TURNS_PER_MINUTE = 1_000_000
LOGGING = {"version": 1, "disable_existing_loggers": False, "root": {"level": "WARNING"}}


class _Provider(ScriptedProvider):
    """The scripted provider without its call log, which would keep every request of a long run alive."""

    def stream(self, messages: Any, tools: Any, config: Any) -> Any:
        self.calls.clear()
        return super().stream(messages, tools, config)


def _respond(messages: list[Any], tools: list[Any]) -> list[ScriptItem]:
    if messages and messages[-1].role == "tool":
        question = next((m.content for m in reversed(messages) if m.role == "user"), "")
        items: list[ScriptItem] = []
        for i in range(TOKENS):
            if question.startswith(SLOW_PREFIX):
                items.append(Delay(SLOW_DELAY))
            items.append(TextDelta(text=f"t{i} "))
        return [*items, Done(usage=Usage(input_tokens=500, output_tokens=TOKENS))]
    return [
        tool_call("get_entity_edges", {"entity_id": ENTITY}),
        Done(usage=Usage(input_tokens=400, output_tokens=10)),
    ]


register_script(MODEL_NAME, _Provider(responder=_respond, name=KGCHAT_MODEL))
