"""Session service and events adapter over the history store; token-budget history."""

from __future__ import annotations

from google.adk.events.event import Event
from google.adk.events.event_actions import EventActions
from google.genai import types

from apps.agents.adk.session import EventsAdapter, HistorySessionService
from apps.agents.history import (
    HistoryMessage,
    HistoryToolCall,
    InMemoryHistoryStore,
    estimate_tokens,
    history_window,
)

APP = "kgchat"


def user_event(text: str) -> Event:
    return Event(author="user", content=types.Content(role="user", parts=[types.Part(text=text)]))


async def open_session(store: InMemoryHistoryStore, **kwargs: object) -> tuple[HistorySessionService, object]:
    service = HistorySessionService(store, agent_name="graph-agent", **kwargs)  # type: ignore[arg-type]
    session = await service.get_session(app_name=APP, user_id="u1", session_id="conv-1")
    return service, session


def texts(events: list[Event]) -> list[str]:
    return ["".join(p.text or "" for p in (e.content.parts or [])) for e in events if e.content]


async def test_load_session() -> None:
    store = InMemoryHistoryStore(
        {
            "conv-1": [
                HistoryMessage(role="user", content="hi"),
                HistoryMessage(role="assistant", content="hello"),
            ]
        }
    )

    _service, session = await open_session(store)

    assert session.id == "conv-1"  # type: ignore[attr-defined]
    events = session.events  # type: ignore[attr-defined]
    assert [(e.author, e.content.role) for e in events] == [("user", "user"), ("graph-agent", "model")]
    assert texts(events) == ["hi", "hello"]


async def test_save_session() -> None:
    store = InMemoryHistoryStore()
    service, session = await open_session(store)
    event = Event(
        author="graph-agent", content=types.Content(role="model", parts=[types.Part(text="answer")])
    )

    await service.append_event(session, event)  # type: ignore[arg-type]

    assert store.messages("conv-1") == [
        HistoryMessage(role="assistant", content="answer", author="graph-agent")
    ]
    assert session.events[-1] is event  # type: ignore[attr-defined]


async def test_user_message_visible_after_appendevent() -> None:
    store = InMemoryHistoryStore()
    service, session = await open_session(store)

    await service.append_event(session, user_event("what is acme?"))  # type: ignore[arg-type]

    assert store.messages("conv-1") == [HistoryMessage(role="user", content="what is acme?", author="user")]
    assert texts(session.events) == ["what is acme?"]  # type: ignore[attr-defined]
    reloaded = await service.get_session(app_name=APP, user_id="u1", session_id="conv-1")
    assert reloaded is not None and texts(reloaded.events) == ["what is acme?"]


async def test_multiple_events_accumulate_in_memory() -> None:
    store = InMemoryHistoryStore()
    service, session = await open_session(store)

    for text in ("one", "two", "three"):
        await service.append_event(session, user_event(text))  # type: ignore[arg-type]

    assert texts(session.events) == ["one", "two", "three"]  # type: ignore[attr-defined]
    assert [m.content for m in service.appended["conv-1"]] == ["one", "two", "three"]


async def test_state_delta_only_events_skip_history() -> None:
    store = InMemoryHistoryStore()
    service, session = await open_session(store)

    await service.append_event(
        session, Event(author="graph-agent", actions=EventActions(state_delta={"k": 1}))
    )  # type: ignore[arg-type]

    assert session.events == []  # type: ignore[attr-defined]
    assert store.messages("conv-1") == []
    assert session.state["k"] == 1  # type: ignore[attr-defined]


async def test_partial_events_are_not_persisted() -> None:
    store = InMemoryHistoryStore()
    service, session = await open_session(store)
    partial = Event(
        author="graph-agent", partial=True, content=types.Content(role="model", parts=[types.Part(text="x")])
    )

    await service.append_event(session, partial)  # type: ignore[arg-type]

    assert store.messages("conv-1") == []


async def test_functioncall_with_original_id() -> None:
    store = InMemoryHistoryStore()
    service, session = await open_session(store)
    fc = types.FunctionCall(id="adk-uuid-123", name="exec", args={"cmd": "ls"})

    await service.append_event(
        session,
        Event(
            author="graph-agent", content=types.Content(role="model", parts=[types.Part(function_call=fc)])
        ),
    )  # type: ignore[arg-type]

    stored = store.messages("conv-1")[0]
    assert stored.role == "assistant"
    assert (stored.tool_calls[0].id, stored.tool_calls[0].name, stored.tool_calls[0].input) == (
        "adk-uuid-123",
        "exec",
        {"cmd": "ls"},
    )


async def test_functioncall_without_id() -> None:
    store = InMemoryHistoryStore()
    service, session = await open_session(store)
    fc = types.FunctionCall(name="search", args={})

    await service.append_event(
        session,
        Event(
            author="graph-agent", content=types.Content(role="model", parts=[types.Part(function_call=fc)])
        ),
    )  # type: ignore[arg-type]

    assert store.messages("conv-1")[0].tool_calls[0].id == "call_search"


async def test_functionresponse_with_full_metadata() -> None:
    store = InMemoryHistoryStore()
    service, session = await open_session(store)
    fc = types.FunctionCall(id="adk-uuid-123", name="exec", args={"cmd": "ls"})
    fr = types.FunctionResponse(id="adk-uuid-123", name="exec", response={"output": "file.txt"})

    await service.append_event(
        session,
        Event(
            author="graph-agent", content=types.Content(role="model", parts=[types.Part(function_call=fc)])
        ),
    )  # type: ignore[arg-type]
    await service.append_event(
        session,
        Event(
            author="graph-agent", content=types.Content(role="user", parts=[types.Part(function_response=fr)])
        ),
    )  # type: ignore[arg-type]

    stored = store.messages("conv-1")[1]
    assert stored.role == "tool"
    assert stored.tool_calls == [
        HistoryToolCall(id="adk-uuid-123", name="exec", input={"cmd": "ls"}, output={"output": "file.txt"})
    ]
    assert stored.content == '{"output": "file.txt"}'


async def test_tool_error_result_is_kept_in_error() -> None:
    store = InMemoryHistoryStore()
    service, session = await open_session(store)
    fr = types.FunctionResponse(id="c1", name="exec", response={"error": "no such entity"})

    await service.append_event(
        session,
        Event(
            author="graph-agent", content=types.Content(role="user", parts=[types.Part(function_response=fr)])
        ),
    )  # type: ignore[arg-type]

    assert store.messages("conv-1")[0].tool_calls[0].error == "no such entity"


def test_event_author_mapping() -> None:
    messages = [HistoryMessage(role="user", content="q"), HistoryMessage(role="assistant", content="a")]

    events = EventsAdapter(messages, agent_name="graph-agent").all()

    assert [e.author for e in events] == ["user", "graph-agent"]


def test_model_role_mapping() -> None:
    message = HistoryMessage(role="model", content="a")

    named = EventsAdapter([message], agent_name="graph-agent").all()[0]
    unnamed = EventsAdapter([message], agent_name="").all()[0]

    assert named.author == "graph-agent"
    assert unnamed.author == "kgchat-agent"
    assert "model" not in {named.author, unnamed.author}


def test_unknown_role_fallback(caplog: object) -> None:
    message = HistoryMessage(role="narrator", content="meanwhile")

    named = EventsAdapter([message], agent_name="graph-agent").all()[0]
    unnamed = EventsAdapter([message]).all()[0]

    assert (named.author, unnamed.author) == ("graph-agent", "kgchat-agent")


def test_assistant_message_with_functioncall_toolcalls() -> None:
    message = HistoryMessage(
        role="assistant", tool_calls=[HistoryToolCall(id="adk-uuid-123", name="exec", input='{"cmd":"ls"}')]
    )

    event = EventsAdapter([message], agent_name="graph-agent").all()[0]

    fc = event.get_function_calls()[0]
    assert (fc.id, fc.name, fc.args) == ("adk-uuid-123", "exec", {"cmd": "ls"})


def test_tool_message_with_functionresponse_metadata_in_toolcalls() -> None:
    message = HistoryMessage(
        role="tool",
        content="",
        tool_calls=[HistoryToolCall(id="adk-uuid-123", name="exec", output='{"result":"ok"}')],
    )

    event = EventsAdapter([message], agent_name="graph-agent").all()[0]

    fr = event.get_function_responses()[0]
    assert (fr.id, fr.name, fr.response) == ("adk-uuid-123", "exec", {"result": "ok"})
    assert event.content is not None and event.content.role == "function"


def test_tool_message_without_tool_calls_answers_the_preceding_assistant_call() -> None:
    messages = [
        HistoryMessage(role="assistant", tool_calls=[HistoryToolCall(id="call_exec", name="exec", input={})]),
        HistoryMessage(role="tool", content='{"result":"file.txt"}'),
    ]

    event = EventsAdapter(messages, agent_name="graph-agent").all()[1]

    fr = event.get_function_responses()[0]
    assert (fr.id, fr.name, fr.response) == ("call_exec", "exec", {"result": "file.txt"})


def test_tool_message_with_no_context_for_functionresponse() -> None:
    event = EventsAdapter(
        [HistoryMessage(role="tool", content="plain words")], agent_name="graph-agent"
    ).all()[0]

    assert event.get_function_responses() == []
    assert event.content is not None and event.content.parts is not None
    assert event.content.parts[0].text == "plain words"


def conversation(turns: int, size: int = 400) -> list[HistoryMessage]:
    out: list[HistoryMessage] = []
    for i in range(turns):
        out.append(HistoryMessage(role="user", content=f"q{i} " + "x" * size))
        out.append(HistoryMessage(role="assistant", content=f"a{i} " + "y" * size))
    return out


def test_history_truncation_with_explicit_budget() -> None:
    messages = conversation(10)
    per_message = estimate_tokens(messages[-1])

    window = history_window(messages, limit=100, token_budget=per_message * 3 + 1)

    assert window == messages[-3:]


def test_default_token_budget() -> None:
    messages = conversation(100, size=4000)  # ~1000 tokens each

    window = history_window(messages, limit=1000, token_budget=0)

    assert 28 <= len(window) <= 32
    assert sum(estimate_tokens(m) for m in window) <= 32000


def test_history_limited_by_message_count() -> None:
    messages = conversation(20, size=10)

    assert history_window(messages, limit=10) == messages[-10:]


def tool_round(i: int) -> list[HistoryMessage]:
    return [
        HistoryMessage(role="user", content=f"q{i}"),
        HistoryMessage(
            role="assistant", tool_calls=[HistoryToolCall(id=f"c{i}", name="search", input={"q": i})]
        ),
        HistoryMessage(
            role="tool",
            content="r" * 200,
            tool_calls=[HistoryToolCall(id=f"c{i}", name="search", output={"r": i})],
        ),
        HistoryMessage(role="assistant", content=f"a{i}"),
    ]


def test_truncation_cuts_before_tool_message() -> None:
    messages = tool_round(1) + tool_round(2)

    window = history_window(messages, limit=6)

    assert window[0].role not in {"tool", "function"}
    assert window == messages[3:]


def test_truncation_drops_orphaned_function_call_at_start() -> None:
    messages = [*tool_round(1), HistoryMessage(role="user", content="next")]
    budget = sum(estimate_tokens(m) for m in messages[2:])

    window = history_window(messages, limit=100, token_budget=budget)

    assert window == messages[3:]


def test_no_truncation_preserves_trailing_functioncall() -> None:
    messages = [
        HistoryMessage(role="user", content="q"),
        HistoryMessage(role="assistant", tool_calls=[HistoryToolCall(id="c1", name="search", input={})]),
    ]

    assert history_window(messages, limit=10) == messages


async def test_session_loads_only_the_window() -> None:
    store = InMemoryHistoryStore({"conv-1": conversation(200, size=10)})

    _, session = await open_session(store, history_limit=4)

    assert texts(session.events)[0].startswith("q198")  # type: ignore[attr-defined]
    assert len(session.events) == 4  # type: ignore[attr-defined]
