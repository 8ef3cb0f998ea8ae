"""The agent ``adk api_server`` serves in ``bench.vs_adk_server``: kgchat's graph-query-agent, ADK-native.

The same system prompt (with the citation instructions kgchat adds), the same ``ModelAdapter``
over the same scripted provider, the same graph tools on the bench project (``BENCH_PROJECT_ID``),
so the tool call runs the same SQL on the same database. The graph tools need Django, so this
module sets it up with the settings the kgchat server uses.
"""

from __future__ import annotations

import os
import uuid

import django

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "bench._vs_adk_settings")
django.setup()

from django.conf import settings  # noqa: E402
from google.adk.agents import LlmAgent  # noqa: E402
from google.adk.agents.readonly_context import ReadonlyContext  # noqa: E402
from google.genai import types  # noqa: E402

from apps.agents.adk.model_adapter import ModelAdapter  # noqa: E402
from apps.agents.adk.tools import adk_name, graph_tools  # noqa: E402
from apps.agents.defaults import CITATION_INSTRUCTIONS, GRAPH_QUERY_AGENT  # noqa: E402
from apps.agents.llm.resolve import resolve_model  # noqa: E402
from apps.agents.loop.turn import turn_steps  # noqa: E402

PROMPT = "\n\n".join([GRAPH_QUERY_AGENT["system_prompt"], CITATION_INSTRUCTIONS])
TEMPERATURE = float(GRAPH_QUERY_AGENT["model"]["temperature"])


def _instruction(_: ReadonlyContext) -> str:
    return PROMPT


PROJECT_ID = uuid.UUID(os.environ["BENCH_PROJECT_ID"])
# As kgchat's executor runs a turn: a model that calls tools only under a schema runs the small-model loop.
MODEL = turn_steps(resolve_model(settings.KGCHAT_MODEL), project_id=PROJECT_ID, graph_version=None)

root_agent = LlmAgent(
    name=adk_name(GRAPH_QUERY_AGENT["name"]),
    description=GRAPH_QUERY_AGENT["description"],
    model=ModelAdapter.for_provider(MODEL, temperature=TEMPERATURE),
    instruction=_instruction,
    tools=graph_tools(list(GRAPH_QUERY_AGENT["tools"]), project_id=PROJECT_ID),
    generate_content_config=types.GenerateContentConfig(temperature=TEMPERATURE),
)
