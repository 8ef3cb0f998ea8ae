"""The provider protocol: every LLM backend streams the same typed events.

``stream(messages, tools, config)`` yields ``TextDelta``, ``ToolCall``, then one ``Done`` (with
usage) — or an ``ErrorEvent`` and nothing after it. Nothing above this package sees a vendor SDK.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any, Literal, Protocol, runtime_checkable

from pydantic import BaseModel, Field

from apps.core.errors import ServiceError


class LLMError(ServiceError):
    """A model call failed (HTTP error, malformed stream, timeout, refused request).

    Its text is the model server's answer or ours about it, shown to the user as ``llm_error``;
    ``upstream_status`` is the model server's HTTP status, when it answered one."""

    status = 502
    code = "llm_error"

    def __init__(self, message: str, *, upstream_status: int | None = None, retryable: bool = False) -> None:
        super().__init__(message)
        self.upstream_status = upstream_status
        self.retryable = retryable


class ModelUnavailable(LLMError):
    """A model name cannot be served here (unknown prefix, missing key or base URL, absent backend)."""


class ToolCallRequest(BaseModel):
    """A tool call inside a message (assistant side)."""

    id: str
    name: str
    arguments: dict[str, Any] = Field(default_factory=dict)


class ChatMessage(BaseModel):
    """One message sent to a provider. ``tool`` messages answer the call ``tool_call_id``."""

    role: Literal["system", "user", "assistant", "tool"]
    content: str = ""
    tool_calls: list[ToolCallRequest] = Field(default_factory=list)
    tool_call_id: str | None = None
    name: str | None = None


class ToolSpec(BaseModel):
    """A tool offered to the model: its name, description and JSON Schema of its arguments."""

    name: str
    description: str
    parameters: dict[str, Any]


class GenerationConfig(BaseModel):
    model: str
    temperature: float | None = None
    max_output_tokens: int | None = None
    stream: bool = True


class Usage(BaseModel):
    input_tokens: int = 0
    output_tokens: int = 0


class TextDelta(BaseModel):
    type: Literal["text_delta"] = "text_delta"
    text: str


class ToolCall(BaseModel):
    type: Literal["tool_call"] = "tool_call"
    id: str
    name: str
    arguments: dict[str, Any] = Field(default_factory=dict)


class Done(BaseModel):
    type: Literal["done"] = "done"
    usage: Usage = Field(default_factory=Usage)
    finish_reason: str = "stop"


class ErrorEvent(BaseModel):
    type: Literal["error"] = "error"
    error: str
    status: int | None = None


StreamEvent = TextDelta | ToolCall | Done | ErrorEvent


@runtime_checkable
class Provider(Protocol):
    """An LLM backend. ``name`` is the served model name reported in the ``meta`` frame."""

    name: str

    def stream(
        self, messages: list[ChatMessage], tools: list[ToolSpec], config: GenerationConfig
    ) -> AsyncIterator[StreamEvent]: ...


# How a model calls tools: in the API's own format ("native"), or only when a JSON Schema constrains
# its answer ("prompted": small models; the agents layer runs their turns as ``apps.agents.loop``).
ToolCalling = Literal["native", "prompted"]
# How a JSON Schema reaches an OpenAI-compatible server: OpenAI's ``response_format`` (any such
# server), or llama.cpp's own ``grammar`` field holding an llguidance JSON grammar.
JsonConstraint = Literal["response_format", "llguidance"]


@runtime_checkable
class CompatModel(Protocol):
    """A provider that takes extra request fields (``response_format``, ``grammar``, …) and says how
    its model calls tools and how its server constrains an answer to a JSON Schema."""

    name: str
    tool_calling: ToolCalling
    json_constraint: JsonConstraint

    def stream(
        self,
        messages: list[ChatMessage],
        tools: list[ToolSpec],
        config: GenerationConfig,
        *,
        extra_body: dict[str, Any] | None = None,
    ) -> AsyncIterator[StreamEvent]: ...
