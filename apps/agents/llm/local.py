"""The offline default: ``local/<model>``, a small model on this machine's CPU.

``local/qwen2.5-1.5b`` is Qwen2.5-Coder-1.5B-Instruct (Q4_K_M GGUF, Apache-2.0) served by one
llama.cpp server process on loopback (``apps.agents.llm.local_server``, started by ``make run``
through ``scripts/local_llm.sh serve``), at ``settings.KGCHAT_LOCAL_LLM_URL``. Every app process
talks to that one server over HTTP, so the 2 GB of weights are loaded once per machine, not once per
process. A model this small calls tools well only under a JSON Schema, so its provider says so
(``tool_calling="prompted"``: the agents layer runs its turns as the small-model loop) and that the
server takes a schema as an llguidance grammar. It sends the server's key
(``settings.KGCHAT_LOCAL_LLM_KEY_FILE``, made by the script) as a Bearer token: the server refuses
requests without it, so that no web page open in the user's browser can make it work.
"""

from __future__ import annotations

from django.conf import settings

from apps.agents.llm.base import ModelUnavailable
from apps.agents.llm.local_server import api_key_read
from apps.agents.llm.openai_compat import OpenAICompatProvider

# The names ``scripts/local_llm.sh`` can install and serve (its ALIAS).
MODELS = ("qwen2.5-1.5b",)

INSTALL_HINT = (
    "start it with `make run` (installs and serves it when no other model is configured) or "
    "`scripts/local_llm.sh serve`; or configure another model: GOOGLE_API_KEY=… (Gemini), "
    "OPENAI_BASE_URL=… with KGCHAT_MODEL=openai/<model>, or KGCHAT_MODEL=ollama/<model>"
)


def provider(model: str) -> OpenAICompatProvider:
    """The provider for ``local/<model>``; ``ModelUnavailable`` for a name that is not served here."""
    if model not in MODELS:
        known = ", ".join(f"local/{name}" for name in MODELS)
        raise ModelUnavailable(f"unknown offline model local/{model}: use {known}")
    return OpenAICompatProvider(
        base_url=settings.KGCHAT_LOCAL_LLM_URL,
        # Read at every turn: a server restarted with a new key is followed without restarting kgchat.
        api_key=api_key_read(settings.KGCHAT_LOCAL_LLM_KEY_FILE),
        model=model,
        name=f"local/{model}",
        max_retries=0,
        timeout=300.0,
        unreachable_hint=f"the offline model server is not running: {INSTALL_HINT}",
        tool_calling="prompted",
        # llama.cpp's server: its JSON Schemas as llguidance grammars, with no room for pretty-printing.
        json_constraint="llguidance",
    )
