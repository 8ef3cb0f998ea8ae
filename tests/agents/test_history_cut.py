"""A history cut at its message limit never starts with a tool result whose call was cut off."""

import pytest

from apps.agents.adk.session import HistorySessionService
from apps.agents.history import HistoryMessage, HistoryToolCall, InMemoryHistoryStore


def turns(n: int) -> list[HistoryMessage]:
    out: list[HistoryMessage] = []
    for i in range(n):
        call = HistoryToolCall(id=f"c{i}", name="list_entity_types", input={}, output={"types": []})
        out += [
            HistoryMessage(role="user", content=f"q{i}"),
            HistoryMessage(role="assistant", tool_calls=[call]),
            HistoryMessage(role="tool", content='{"types": []}', tool_calls=[call]),
            HistoryMessage(role="assistant", content=f"a{i}"),
        ]
    return out


@pytest.mark.parametrize("history_limit", [2, 6, 10])
async def test_truncation_cuts_before_tool_message_when_the_limit_lands_on_a_tool_result(history_limit):
    service = HistorySessionService(
        InMemoryHistoryStore({"s": turns(5)}), agent_name="agent", history_limit=history_limit
    )

    session = await service.get_session(app_name="kgchat", user_id="u", session_id="s")

    first = session.events[0].content
    assert first is not None and not any(p.function_response for p in first.parts or [])
    calls = {p.function_call.id for e in session.events for p in (e.content.parts or []) if p.function_call}
    answers = {
        p.function_response.id for e in session.events for p in (e.content.parts or []) if p.function_response
    }
    assert answers <= calls
