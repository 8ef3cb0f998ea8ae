"""Map a model name to a provider (PROTOCOL §7).

Names: ``gemini-…`` or ``gemini/<model>`` (needs ``GOOGLE_API_KEY`` or Vertex AI settings),
``openai/<model>`` (``OPENAI_BASE_URL``, ``OPENAI_API_KEY``; the OpenAI API when only a key is set),
``ollama/<model>`` (``OLLAMA_BASE_URL``), ``local/<model>`` (the offline default served on loopback,
from the module ``apps.agents.llm.local``, which must define ``provider(model: str) -> Provider``) and
``scripted/<name>`` (a script registered in-process with
``apps.agents.llm.scripted.register_script``; tests and benches only).

``settings.KGCHAT_MODEL``, when set, replaces every name. A name that cannot be served raises
``ModelUnavailable`` here, before any run starts. The provider's ``name`` is the served model name
(for the ``meta`` frame).

``openai/`` models call tools natively unless ``OPENAI_NATIVE_TOOLS`` is off: then their provider
says ``tool_calling="prompted"`` (as ``local/`` models' always does), and the agents layer runs
their turns as the small-model loop (``apps.agents.loop.turn.turn_steps``); nothing here knows it.
"""

from __future__ import annotations

import importlib
import os

from django.conf import settings

from apps.agents.llm.base import ModelUnavailable, Provider

OPENAI_DEFAULT_BASE_URL = "https://api.openai.com/v1"


def effective_model_name(name: str) -> str:
    """The name that will be served: ``KGCHAT_MODEL`` if set, else ``name``."""
    override = (getattr(settings, "KGCHAT_MODEL", "") or "").strip()
    return override or (name or "").strip()


def _vertex_configured() -> bool:
    flag = os.environ.get("GOOGLE_GENAI_USE_VERTEXAI", "").lower() in {"1", "true", "yes"}
    return flag and bool(os.environ.get("GOOGLE_CLOUD_PROJECT"))


def resolve_model(name: str) -> Provider:
    """Return the provider serving ``name`` (after the ``KGCHAT_MODEL`` override)."""
    served = effective_model_name(name)
    if not served:
        raise ModelUnavailable(
            "no model configured: the agent definition names none and KGCHAT_MODEL is unset"
        )
    prefix, _, rest = served.partition("/")
    if served.startswith("gemini-") or prefix == "gemini":
        model = rest if prefix == "gemini" else served
        return _gemini(model, served)
    if not rest:
        raise ModelUnavailable(
            f"unknown model name {served!r}: use gemini-…, gemini/<m>, openai/<m>, ollama/<m> or local/<m>"
        )
    if prefix == "openai":
        base_url = getattr(settings, "OPENAI_BASE_URL", "") or ""
        api_key = getattr(settings, "OPENAI_API_KEY", "") or ""
        if not base_url and not api_key:
            raise ModelUnavailable(
                f"model {served!r} needs OPENAI_BASE_URL (any OpenAI-compatible server) or OPENAI_API_KEY"
            )
        from apps.agents.llm.openai_compat import OpenAICompatProvider

        native = getattr(settings, "OPENAI_NATIVE_TOOLS", True)
        return OpenAICompatProvider(
            base_url=base_url or OPENAI_DEFAULT_BASE_URL,
            api_key=api_key,
            model=rest,
            name=served,
            tool_calling="native" if native else "prompted",
        )
    if prefix == "ollama":
        from apps.agents.llm.openai_compat import OpenAICompatProvider

        base_url = getattr(settings, "OLLAMA_BASE_URL", "") or "http://127.0.0.1:11434/v1"
        return OpenAICompatProvider(base_url=base_url, model=rest, name=served)
    if prefix == "local":
        try:
            local = importlib.import_module("apps.agents.llm.local")
        except ImportError as exc:
            raise ModelUnavailable(
                f"model {served!r} needs the embedded offline provider (apps.agents.llm.local), which is not "
                f"available here ({exc}); set KGCHAT_MODEL to a gemini-, openai/ or ollama/ model instead"
            ) from None
        provider: Provider = local.provider(rest)
        return provider
    if prefix == "scripted":
        from apps.agents.llm.scripted import get_script

        script = get_script(rest)
        if script is None:
            raise ModelUnavailable(f"no scripted model {rest!r} is registered in this process")
        return script
    raise ModelUnavailable(
        f"unknown model name {served!r}: use gemini-…, gemini/<m>, openai/<m>, ollama/<m> or local/<m>"
    )


def _gemini(model: str, served: str) -> Provider:
    api_key = getattr(settings, "GOOGLE_API_KEY", "") or os.environ.get("GOOGLE_API_KEY", "")
    if not api_key and not _vertex_configured():
        raise ModelUnavailable(
            f"model {served!r} needs GOOGLE_API_KEY (or GOOGLE_GENAI_USE_VERTEXAI with GOOGLE_CLOUD_PROJECT); "
            "or set KGCHAT_MODEL, e.g. KGCHAT_MODEL=ollama/llama3.2"
        )
    from apps.agents.llm.gemini import GeminiProvider

    return GeminiProvider(model=model, api_key=api_key, name=served)
