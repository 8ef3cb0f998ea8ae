"""The ADK runner's RunState: text is collected from partial events or the final one, never both."""

from __future__ import annotations

from google.adk.events.event import Event
from google.genai import types

from apps.agents.adk.runner import RunState


def model_event(words: str, *, partial: bool) -> Event:
    return Event(
        author="agent", partial=partial, content=types.Content(role="model", parts=[types.Part(text=words)])
    )


async def test_streaming_mode_collects_from_partial_events_only() -> None:
    state = RunState(callback=None, max_steps=5)

    for event in (
        model_event("Hello ", partial=True),
        model_event("world", partial=True),
        model_event("Hello world", partial=False),
    ):
        await state.on_event(event)

    assert "".join(state.text) == "Hello world"


async def test_non_streaming_mode_collects_from_final_event() -> None:
    state = RunState(callback=None, max_steps=5)

    await state.on_event(model_event("Hello world", partial=False))

    assert "".join(state.text) == "Hello world"
