"""The offline default ``local/qwen2.5-1.5b``: how it is resolved, and one real turn through it.

The test marked ``local_llm`` starts the real llama.cpp server (xllamacpp) on a free loopback port
and runs an agent turn through the small-model loop. It is skipped where ``make run`` (or
``scripts/local_llm.sh install``) has not installed the runtime and the 1.1 GB model, as on CI:
``make test`` never needs them, and the loop itself is tested against a scripted HTTP server in
tests/agents/loop/test_turn.py.
"""

from __future__ import annotations

import importlib.util
import json
import os
import secrets
import stat
import subprocess
import sys
import time
import urllib.error
import urllib.request
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from asgiref.sync import async_to_sync
from django.conf import settings
from pytest_django import Settings

from apps.agents.llm.base import ChatMessage, ErrorEvent, GenerationConfig, ModelUnavailable
from apps.agents.llm.local_server import main as local_server_main
from apps.agents.llm.openai_compat import OpenAICompatProvider
from apps.agents.llm.resolve import resolve_model
from apps.agents.loop.turn import SmallModelTurn, turn_steps
from bench.support import free_port
from tests.llm_server import LLMTestServer, Stream, text_chunks

MODEL_FILE = Path(settings.BASE_DIR) / ".data" / "models" / "qwen2.5-coder-1.5b-instruct-q4_k_m.gguf"


def test_local_models_turns_run_as_the_small_model_loop_over_the_local_server(settings: Settings) -> None:
    settings.KGCHAT_MODEL = ""
    settings.KGCHAT_LOCAL_LLM_URL = "http://127.0.0.1:9/v1"
    project_id = uuid.uuid4()

    provider = resolve_model("local/qwen2.5-1.5b")
    turn = turn_steps(provider, project_id=project_id, graph_version=3)

    assert isinstance(provider, OpenAICompatProvider)  # the vendor wrapper: it knows no loop
    assert provider.base_url == "http://127.0.0.1:9/v1"
    assert provider.tool_calling == "prompted"
    assert isinstance(turn, SmallModelTurn) and turn.inner is provider
    assert turn.name == "local/qwen2.5-1.5b"
    assert (turn.project_id, turn.graph_version) == (project_id, 3)
    assert turn.constrain == "llguidance"  # llama.cpp's grammar field, not response_format


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

    assert isinstance(flagged, OpenAICompatProvider) and flagged.tool_calling == "prompted"
    loop = turn_steps(flagged, project_id=None, graph_version=None)
    assert isinstance(loop, SmallModelTurn) and loop.name == "openai/qwen"
    assert loop.constrain == "response_format"
    assert isinstance(native, OpenAICompatProvider)
    assert turn_steps(native, project_id=None, graph_version=None) is native


async def test_a_stopped_local_server_ends_the_step_with_an_error_that_says_how_to_start_it(
    settings: Settings,
) -> None:
    settings.KGCHAT_MODEL = ""
    settings.KGCHAT_LOCAL_LLM_URL = f"http://127.0.0.1:{free_port()}/v1"
    provider = turn_steps(resolve_model("local/qwen2.5-1.5b"), project_id=None, graph_version=None)

    events = [
        e
        async for e in provider.stream(
            [ChatMessage(role="user", content="hi")], [], GenerationConfig(model="local/qwen2.5-1.5b")
        )
    ]

    assert len(events) == 1 and isinstance(events[0], ErrorEvent)
    assert "make run" in events[0].error


def test_the_local_provider_sends_the_servers_key_as_a_bearer_token(
    settings: Settings, tmp_path: Path
) -> None:
    key_file = tmp_path / "api_key"
    key_file.write_text("k3y-only-kgchat-knows\n")
    with LLMTestServer() as server:
        server.enqueue(Stream(text_chunks("Hi.")))
        settings.KGCHAT_MODEL = ""
        settings.KGCHAT_LOCAL_LLM_URL = server.base_url
        settings.KGCHAT_LOCAL_LLM_KEY_FILE = str(key_file)
        provider = resolve_model("local/qwen2.5-1.5b")

        async_to_sync(_drain)(provider)

    assert server.headers[0]["Authorization"] == "Bearer k3y-only-kgchat-knows"


async def _drain(provider: Any) -> None:
    config = GenerationConfig(model="local/qwen2.5-1.5b")
    async for _ in provider.stream([ChatMessage(role="user", content="hi")], [], config):
        pass


def test_the_model_server_will_not_start_without_a_key(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    model, empty = tmp_path / "model.gguf", tmp_path / "api_key"
    model.write_bytes(b"")
    empty.write_text("")

    code = local_server_main(["--model", str(model), "--alias", "x", "--api-key-file", str(empty)])

    assert code == 2
    assert f"no API key in {empty}" in capsys.readouterr().err


def _script_key(key_file: Path) -> subprocess.Popen[bytes]:
    return subprocess.Popen(
        ["bash", "scripts/local_llm.sh", "key"],
        cwd=settings.BASE_DIR,
        env={**os.environ, "KGCHAT_LOCAL_LLM_KEY_FILE": str(key_file)},
    )


def test_the_script_makes_the_key_once_readable_by_its_owner_only(tmp_path: Path) -> None:
    key_file = tmp_path / "llm" / "api_key"

    together = [_script_key(key_file) for _ in range(4)]
    codes = [process.wait() for process in together]
    first = key_file.read_text()
    again = _script_key(key_file).wait()

    assert codes == [0, 0, 0, 0] and again == 0
    assert stat.S_IMODE(key_file.stat().st_mode) == 0o600
    assert len(first.strip()) >= 43, "32 random bytes, URL-safe base64"
    assert key_file.read_text() == first, "made once: a later run (or a concurrent one) keeps it"
    assert [p.name for p in key_file.parent.iterdir()] == ["api_key"], "no temporary file left"


def _missing() -> str | None:
    if importlib.util.find_spec("xllamacpp") is None:
        return "xllamacpp is not installed (scripts/local_llm.sh install)"
    if not MODEL_FILE.is_file():
        return f"no model at {MODEL_FILE} (scripts/local_llm.sh install)"
    return None


@pytest.fixture
def local_server(settings: Settings, tmp_path: Path) -> Iterator[str]:
    """The real model server on a free port with its own key, for this test only."""
    port = free_port()
    key_file = tmp_path / "api_key"
    key_file.write_text(secrets.token_urlsafe(32) + "\n")
    process = subprocess.Popen(
        [
            *(sys.executable, "-m", "apps.agents.llm.local_server", "--model", str(MODEL_FILE)),
            *("--alias", "qwen2.5-1.5b", "--port", str(port), "--api-key-file", str(key_file)),
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
        settings.KGCHAT_LOCAL_LLM_KEY_FILE = str(key_file)
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


def _post_status(url: str, headers: dict[str, str]) -> int:
    body = json.dumps({"messages": [{"role": "user", "content": "hi"}], "max_tokens": 1}).encode()
    # text/plain: the "simple" request a web page may send cross-origin without a CORS preflight.
    request = urllib.request.Request(url, data=body, headers={"Content-Type": "text/plain", **headers})
    try:
        with urllib.request.urlopen(request, timeout=120) as answer:
            return int(answer.status)
    except urllib.error.HTTPError as refused:
        return refused.code


@pytest.mark.local_llm
@pytest.mark.skipif(_missing() is not None, reason=_missing() or "")
def test_the_real_model_server_answers_401_to_a_request_without_its_key(local_server: str) -> None:
    key = Path(settings.KGCHAT_LOCAL_LLM_KEY_FILE).read_text().strip()
    url = f"{local_server}/chat/completions"

    without = _post_status(url, {})
    wrong = _post_status(url, {"Authorization": "Bearer not-the-key"})
    with_key = _post_status(url, {"Authorization": f"Bearer {key}"})

    assert (without, wrong, with_key) == (401, 401, 200)


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
