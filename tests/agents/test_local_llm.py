"""The offline default ``local/qwen2.5-1.5b``: how it is resolved, and one real turn through it.

The test marked ``local_llm`` starts the real llama.cpp server (xllamacpp) on a free loopback port
and runs an agent turn through the small-model loop. It is skipped where ``make run`` (or
``scripts/local_llm.sh install``) has not installed the runtime and the 1.1 GB model, as on CI:
``make test`` never needs them, and the loop itself is tested against a scripted HTTP server in
tests/agents/test_prompted_tools.py.
"""

from __future__ import annotations

import importlib.util
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from django.conf import settings
from pytest_django import Settings

from apps.agents.llm.base import ChatMessage, ErrorEvent, GenerationConfig, ModelUnavailable
from apps.agents.llm.openai_compat import OpenAICompatProvider
from apps.agents.llm.prompted_tools import PromptedToolsProvider
from apps.agents.llm.resolve import resolve_model
from bench.support import free_port

MODEL_FILE = Path(settings.BASE_DIR) / ".data" / "models" / "qwen2.5-coder-1.5b-instruct-q4_k_m.gguf"


def test_local_model_is_the_small_model_loop_over_the_local_server(settings: Settings) -> None:
    settings.KGCHAT_MODEL = ""
    settings.KGCHAT_LOCAL_LLM_URL = "http://127.0.0.1:9/v1"

    provider = resolve_model("local/qwen2.5-1.5b")

    assert isinstance(provider, PromptedToolsProvider)
    assert provider.name == "local/qwen2.5-1.5b"
    assert isinstance(provider.inner, OpenAICompatProvider)
    assert provider.inner.base_url == "http://127.0.0.1:9/v1"


def test_unknown_local_model_names_are_refused(settings: Settings) -> None:
    settings.KGCHAT_MODEL = ""

    with pytest.raises(ModelUnavailable, match=r"local/qwen2\.5-1\.5b"):
        resolve_model("local/smollm2-135m")


def test_openai_models_flagged_without_native_tools_get_the_small_model_loop(settings: Settings) -> None:
    settings.KGCHAT_MODEL = ""
    settings.OPENAI_BASE_URL = "http://127.0.0.1:9/v1"
    settings.OPENAI_NATIVE_TOOLS = False

    flagged = resolve_model("openai/qwen")
    settings.OPENAI_NATIVE_TOOLS = True
    native = resolve_model("openai/qwen")

    assert isinstance(flagged, PromptedToolsProvider) and flagged.name == "openai/qwen"
    assert isinstance(native, OpenAICompatProvider)


async def test_a_stopped_local_server_ends_the_step_with_an_error_that_says_how_to_start_it(
    settings: Settings,
) -> None:
    settings.KGCHAT_MODEL = ""
    settings.KGCHAT_LOCAL_LLM_URL = f"http://127.0.0.1:{free_port()}/v1"
    provider = resolve_model("local/qwen2.5-1.5b")

    events = [
        e
        async for e in provider.stream(
            [ChatMessage(role="user", content="hi")], [], GenerationConfig(model="local/qwen2.5-1.5b")
        )
    ]

    assert len(events) == 1 and isinstance(events[0], ErrorEvent)
    assert "make run" in events[0].error


def _missing() -> str | None:
    if importlib.util.find_spec("xllamacpp") is None:
        return "xllamacpp is not installed (scripts/local_llm.sh install)"
    if not MODEL_FILE.is_file():
        return f"no model at {MODEL_FILE} (scripts/local_llm.sh install)"
    return None


@pytest.fixture
def local_server(settings: Settings) -> Iterator[str]:
    """The real model server on a free port, for this test only."""
    port = free_port()
    process = subprocess.Popen(
        [
            *(sys.executable, "-m", "apps.agents.llm.local_server", "--model", str(MODEL_FILE)),
            *("--alias", "qwen2.5-1.5b", "--port", str(port)),
        ],
        cwd=settings.BASE_DIR,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        while process.poll() is None:
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{port}/health", timeout=5) as answer:
                    if answer.status == 200:
                        break
            except OSError:
                time.sleep(0.5)
        assert process.poll() is None, "the model server exited"
        settings.KGCHAT_MODEL = ""
        settings.KGCHAT_LOCAL_LLM_URL = f"http://127.0.0.1:{port}/v1"
        yield settings.KGCHAT_LOCAL_LLM_URL
    finally:
        process.terminate()
        process.wait()


@pytest.mark.local_llm
@pytest.mark.skipif(_missing() is not None, reason=_missing() or "")
@pytest.mark.django_db(transaction=True)
async def test_real_agent_turn_through_the_offline_default_calls_a_tool_and_answers_from_it(
    local_server: str,
) -> None:
    from asgiref.sync import sync_to_async

    from apps.agents.events import TextDelta, ToolCallEnd, ToolCallStart
    from apps.agents.executor import AgentExecutor, ExecuteRequest
    from tests.factories import make_agent_definition, make_entity, make_project

    def arrange() -> Any:
        project = make_project()
        make_entity(
            project, "country:PT", type="Country", name="Portugal", description="Its capital is Lisbon."
        )
        make_entity(
            project, "city:lisbon", type="City", name="Lisbon", description="The capital of Portugal."
        )
        return make_agent_definition(
            project,
            name="graph-query-agent",
            system_prompt="You answer questions about the knowledge graph.",
            tools=["search_entities", "list_entity_types"],
            model={"name": "local/qwen2.5-1.5b", "temperature": 0.0},
            max_steps=5,
        )

    definition = await sync_to_async(arrange)()
    events: list[Any] = []

    result = await AgentExecutor().execute(
        ExecuteRequest(
            agent_definition=definition,
            message="What is the capital of Portugal?",
            stream_callback=events.append,
        )
    )

    assert result.status == "success", result.error
    assert result.model == "local/qwen2.5-1.5b"
    starts = [e for e in events if isinstance(e, ToolCallStart)]
    assert starts and starts[0].tool == "search_entities"
    assert any(isinstance(e, ToolCallEnd) and e.error is None for e in events)
    answer = "".join(e.text for e in events if isinstance(e, TextDelta))
    assert "Lisbon" in answer and "{" not in answer
    assert result.text == answer


def test_the_runtime_is_pinned_alike_in_pyproject_constraints_and_the_hashed_install_list() -> None:
    base = Path(settings.BASE_DIR)

    pins = [
        line.split()[0]
        for path in ("constraints.txt", "scripts/local_llm.requirements.txt")
        for line in (base / path).read_text().splitlines()
        if line.startswith("xllamacpp==")
    ]

    assert len(pins) == 2 and pins[0] == pins[1]
    assert f'local-llm = ["{pins[0]}"]' in (base / "pyproject.toml").read_text()
