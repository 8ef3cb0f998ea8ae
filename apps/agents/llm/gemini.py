"""Gemini through ``google-genai`` (an API key, or Vertex AI from the environment).

Built only by ``resolve_model`` when ``GOOGLE_API_KEY`` or Vertex settings are present; the
client reads ``GOOGLE_GENAI_USE_VERTEXAI``, ``GOOGLE_CLOUD_PROJECT`` and ``GOOGLE_CLOUD_LOCATION``
itself when no key is given.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Any

from google import genai
from google.genai import types

from apps.agents.llm.base import (
    ChatMessage,
    Done,
    ErrorEvent,
    GenerationConfig,
    StreamEvent,
    TextDelta,
    ToolCall,
    ToolSpec,
    Usage,
)


def to_gemini_contents(messages: list[ChatMessage]) -> tuple[str, list[types.Content]]:
    """Split off the system text and map the rest to Gemini contents (tool results as function parts)."""
    system: list[str] = []
    contents: list[types.Content] = []
    for m in messages:
        if m.role == "system":
            system.append(m.content)
        elif m.role == "user":
            contents.append(types.Content(role="user", parts=[types.Part(text=m.content)]))
        elif m.role == "assistant":
            parts = [types.Part(text=m.content)] if m.content else []
            parts += [
                types.Part(function_call=types.FunctionCall(id=tc.id, name=tc.name, args=tc.arguments))
                for tc in m.tool_calls
            ]
            contents.append(types.Content(role="model", parts=parts or [types.Part(text="")]))
        else:
            try:
                response = json.loads(m.content)
            except ValueError:
                response = m.content
            if not isinstance(response, dict):
                response = {"result": response}
            part = types.Part(
                function_response=types.FunctionResponse(
                    id=m.tool_call_id, name=m.name or "", response=response
                )
            )
            if (
                contents
                and contents[-1].role == "user"
                and contents[-1].parts
                and contents[-1].parts[0].function_response
            ):
                contents[-1].parts.append(part)
            else:
                contents.append(types.Content(role="user", parts=[part]))
    return "\n".join(system), contents


@dataclass
class GeminiProvider:
    model: str
    api_key: str = ""
    name: str = ""

    def __post_init__(self) -> None:
        if not self.name:
            self.name = self.model
        self._client = genai.Client(api_key=self.api_key) if self.api_key else genai.Client()

    def stream(
        self, messages: list[ChatMessage], tools: list[ToolSpec], config: GenerationConfig
    ) -> AsyncIterator[StreamEvent]:
        return self._run(messages, tools, config)

    async def _run(
        self, messages: list[ChatMessage], tools: list[ToolSpec], config: GenerationConfig
    ) -> AsyncIterator[StreamEvent]:
        system, contents = to_gemini_contents(messages)
        kwargs: dict[str, Any] = {}
        if system:
            kwargs["system_instruction"] = system
        if tools:
            kwargs["tools"] = [
                types.Tool(
                    function_declarations=[
                        types.FunctionDeclaration(
                            name=t.name, description=t.description, parameters_json_schema=t.parameters
                        )
                        for t in tools
                    ]
                )
            ]
            kwargs["automatic_function_calling"] = types.AutomaticFunctionCallingConfig(disable=True)
        if config.temperature is not None:
            kwargs["temperature"] = config.temperature
        if config.max_output_tokens is not None:
            kwargs["max_output_tokens"] = config.max_output_tokens
        gen_config = types.GenerateContentConfig(**kwargs)
        usage = Usage()
        calls: list[ToolCall] = []
        try:
            if config.stream:
                responses = await self._client.aio.models.generate_content_stream(
                    model=self.model, contents=contents, config=gen_config
                )
                async for response in responses:
                    for event in self._events(response, calls):
                        yield event
                    usage = self._usage(response) or usage
            else:
                response = await self._client.aio.models.generate_content(
                    model=self.model, contents=contents, config=gen_config
                )
                for event in self._events(response, calls):
                    yield event
                usage = self._usage(response) or usage
        except Exception as exc:  # the SDK raises many types; every one is a failed model call
            yield ErrorEvent(error=f"Gemini {self.model}: {exc}", status=getattr(exc, "code", None))
            return
        for call in calls:
            yield call
        yield Done(usage=usage)

    @staticmethod
    def _events(response: types.GenerateContentResponse, calls: list[ToolCall]) -> list[StreamEvent]:
        out: list[StreamEvent] = []
        for candidate in response.candidates or []:
            for part in (candidate.content.parts if candidate.content else None) or []:
                if part.thought:
                    continue
                if part.text:
                    out.append(TextDelta(text=part.text))
                if part.function_call and part.function_call.name:
                    fc = part.function_call
                    calls.append(
                        ToolCall(id=fc.id or f"call_{fc.name}", name=fc.name or "", arguments=fc.args or {})
                    )
        return out

    @staticmethod
    def _usage(response: types.GenerateContentResponse) -> Usage | None:
        meta = response.usage_metadata
        if meta is None:
            return None
        return Usage(
            input_tokens=meta.prompt_token_count or 0, output_tokens=meta.candidates_token_count or 0
        )
