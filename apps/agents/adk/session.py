"""The session service and events adapter: ADK sessions over a ``HistoryStore``.

A session is a conversation; its messages are the events. ``get_session`` loads only the
history window (message limit and token budget), so a long conversation costs the same per turn
as a short one: nothing is deep-copied, and ``append_event`` appends to the live session in O(1)
after handing the message to the store. The executor's store is in memory, seeded with the
history the chat layer loaded; the chat layer writes ``kb.chat_messages`` itself when the turn
ends (see ``apps/agents/history.py``).
"""

from __future__ import annotations

import json
import logging
import uuid
from collections.abc import Sequence
from typing import Any

from google.adk.events.event import Event
from google.adk.sessions.base_session_service import (
    BaseSessionService,
    GetSessionConfig,
    ListSessionsResponse,
)
from google.adk.sessions.session import Session
from google.genai import types

from apps.agents.adk.model_adapter import call_id
from apps.agents.history import (
    DEFAULT_HISTORY_LIMIT,
    HistoryMessage,
    HistoryStore,
    HistoryToolCall,
    history_window,
)

logger = logging.getLogger(__name__)

FALLBACK_AGENT_NAME = "kgchat-agent"


def _parse(value: Any) -> Any:
    if isinstance(value, str):
        try:
            return json.loads(value)
        except ValueError:
            return value
    return value


def _as_response(value: Any) -> dict[str, Any]:
    parsed = _parse(value)
    if isinstance(parsed, dict):
        return parsed
    return {"result": parsed}


class EventsAdapter:
    """Stored messages as ADK events (spec: EventsAdapter)."""

    def __init__(self, messages: Sequence[HistoryMessage], *, agent_name: str = "") -> None:
        self.messages = messages
        self.agent_name = agent_name or FALLBACK_AGENT_NAME

    def author(self, message: HistoryMessage) -> str:
        if message.author:
            return message.author
        return "user" if message.role == "user" else self.agent_name

    def all(self) -> list[Event]:
        events: list[Event] = []
        last_calls: list[HistoryToolCall] = []
        position = 0
        for index, message in enumerate(self.messages):
            event = self._event(message, last_calls, position)
            if message.role in {"assistant", "model"}:
                last_calls = message.tool_calls
                position = 0
            elif message.role in {"tool", "function"}:
                position += 1
            else:
                last_calls, position = [], 0
            event.timestamp = float(index)
            events.append(event)
        return events

    def _event(self, message: HistoryMessage, last_calls: list[HistoryToolCall], position: int) -> Event:
        author = self.author(message)
        role = message.role
        if role == "user":
            return Event(
                author=author, content=types.Content(role="user", parts=[types.Part(text=message.content)])
            )
        if role in {"tool", "function"}:
            if message.tool_calls:
                parts = [
                    types.Part(
                        function_response=types.FunctionResponse(
                            id=tc.id,
                            name=tc.name,
                            response=_as_response(
                                tc.output if tc.output is not None else {"error": tc.error or ""}
                            ),
                        )
                    )
                    for tc in message.tool_calls
                ]
                return Event(author=author, content=types.Content(role="function", parts=parts))
            if position < len(last_calls):
                matched = last_calls[position]
                fr = types.FunctionResponse(
                    id=matched.id, name=matched.name, response=_as_response(message.content)
                )
                return Event(
                    author=author,
                    content=types.Content(role="function", parts=[types.Part(function_response=fr)]),
                )
            return Event(
                author=author, content=types.Content(role="user", parts=[types.Part(text=message.content)])
            )
        parts = [types.Part(text=message.content)] if message.content else []
        for tc in message.tool_calls:
            args = _parse(tc.input) if tc.input is not None else {}
            parts.append(
                types.Part(
                    function_call=types.FunctionCall(
                        id=tc.id or f"call_{tc.name}",
                        name=tc.name,
                        args=args if isinstance(args, dict) else {},
                    )
                )
            )
        return Event(author=author, content=types.Content(role="model", parts=parts or [types.Part(text="")]))


def event_to_message(
    event: Event, *, known_calls: dict[str, HistoryToolCall] | None = None
) -> HistoryMessage | None:
    """The message an event stores, or None for events without content (state-delta only)."""
    content = event.content
    if content is None or not content.parts:
        return None
    texts: list[str] = []
    calls: list[HistoryToolCall] = []
    results: list[HistoryToolCall] = []
    result_texts: list[str] = []
    for part in content.parts:
        if part.thought:
            continue
        if part.function_call is not None:
            fc = part.function_call
            calls.append(HistoryToolCall(id=call_id(fc), name=fc.name or "", input=dict(fc.args or {})))
        elif part.function_response is not None:
            fr = part.function_response
            response = fr.response if fr.response is not None else {}
            error = response.get("error") if isinstance(response, dict) else None
            known = (known_calls or {}).get(call_id(fr))
            results.append(
                HistoryToolCall(
                    id=call_id(fr),
                    name=fr.name or "",
                    input=known.input if known else None,
                    output=response,
                    error=str(error) if error is not None else None,
                )
            )
            result_texts.append(json.dumps(response, default=str, ensure_ascii=False))
        elif part.text:
            texts.append(part.text)
    if results:
        return HistoryMessage(
            role="tool", content="\n".join(result_texts), tool_calls=results, author=event.author
        )
    if not texts and not calls:
        return None
    role = "user" if event.author == "user" else "assistant"
    return HistoryMessage(role=role, content="".join(texts), tool_calls=calls, author=event.author)


class HistorySessionService(BaseSessionService):
    """ADK session service over a ``HistoryStore`` (spec: SessionServiceAdapter).

    ``appended`` keeps, per session, the messages persisted by this service instance, in order
    (what the executor hands back to the chat layer).
    """

    def __init__(
        self,
        store: HistoryStore,
        *,
        agent_name: str = "",
        history_limit: int = DEFAULT_HISTORY_LIMIT,
        token_budget: int = 0,
    ) -> None:
        self.store = store
        self.agent_name = agent_name or FALLBACK_AGENT_NAME
        self.history_limit = history_limit
        self.token_budget = token_budget
        self.appended: dict[str, list[HistoryMessage]] = {}
        self._calls: dict[str, dict[str, HistoryToolCall]] = {}
        self._sessions: dict[tuple[str, str, str], Session] = {}

    async def _load(
        self, app_name: str, user_id: str, session_id: str, state: dict[str, Any] | None
    ) -> Session:
        limit = self.history_limit or DEFAULT_HISTORY_LIMIT
        # One message more than the window: when the store has more, the window sees that it cut
        # the history and applies the sequence-safety rules (no leading tool result).
        messages = await self.store.load(session_id, limit=limit + 1)
        window = history_window(messages, limit=limit, token_budget=self.token_budget)
        calls = self._calls.setdefault(session_id, {})
        for message in window:
            for tc in message.tool_calls:
                calls.setdefault(tc.id, tc)
        session = Session(
            id=session_id,
            app_name=app_name,
            user_id=user_id,
            state=dict(state or {}),
            events=EventsAdapter(window, agent_name=self.agent_name).all(),
        )
        self._sessions[(app_name, user_id, session_id)] = session
        return session

    async def create_session(
        self,
        *,
        app_name: str,
        user_id: str,
        state: dict[str, Any] | None = None,
        session_id: str | None = None,
    ) -> Session:
        return await self._load(app_name, user_id, session_id or str(uuid.uuid4()), state)

    async def get_session(
        self,
        *,
        app_name: str,
        user_id: str,
        session_id: str,
        config: GetSessionConfig | None = None,
    ) -> Session | None:
        previous = self._sessions.get((app_name, user_id, session_id))
        session = await self._load(app_name, user_id, session_id, previous.state if previous else None)
        if config and config.num_recent_events is not None:
            session.events = session.events[-config.num_recent_events :] if config.num_recent_events else []
        return session

    async def list_sessions(self, *, app_name: str, user_id: str | None = None) -> ListSessionsResponse:
        sessions = [
            s.model_copy(update={"events": []})
            for (app, user, _), s in self._sessions.items()
            if app == app_name and (user_id is None or user == user_id)
        ]
        return ListSessionsResponse(sessions=sessions)

    async def delete_session(self, *, app_name: str, user_id: str, session_id: str) -> None:
        self._sessions.pop((app_name, user_id, session_id), None)

    async def append_event(self, session: Session, event: Event) -> Event:
        if event.partial:
            return event
        self._apply_temp_state(session, event)
        event = self._trim_temp_delta_state(event)
        message = event_to_message(event, known_calls=self._calls.get(session.id))
        if message is None:
            # State-delta-only (or empty) events change state but are not history.
            self._update_session_state(session, event)
            return event
        await self.store.append(session.id, message)
        calls = self._calls.setdefault(session.id, {})
        for tc in message.tool_calls:
            calls.setdefault(tc.id, tc)
        self.appended.setdefault(session.id, []).append(message)
        session.last_update_time = event.timestamp
        return self._commit_event_to_session(session, event)


def event_row(event: Event, *, position: int, seeded: bool = False) -> dict[str, Any]:
    """What ``kb.agent_run_events`` stores of an event: all of it, as ADK serialises it."""
    return {
        "position": position,
        "seeded": seeded,
        "invocation_id": (event.invocation_id or "")[:200],
        "author": (event.author or "")[:200],
        "branch": (event.branch or "")[:500],
        # Python's JSON mode keeps a lone surrogate a model wrote as a string (``storable`` replaces it).
        "event": event.model_dump(mode="json", exclude_none=True, by_alias=True),
    }


def event_from_row(data: dict[str, Any]) -> Event:
    return Event.model_validate(data)


class RunSessionService(BaseSessionService):
    """ADK's session of one agent run, stored in ``kb.agent_run_events`` as it goes.

    The session is the run (its id is the run's). A new run's session starts with the
    conversation's history window (``seed``) as its first events, stored with its first event
    (one statement); every later complete event is stored when ADK appends it, before the runner
    goes on, so a process that dies leaves the events ADK's resumption rebuilds the invocation from
    (``resume=True`` loads them instead of seeding). ``kb.chat_messages`` is never written here.

    ``appended`` holds, per session, the messages of the run's own events (earlier attempts'
    included), for the executor's trace; ``stored`` counts the rows this instance wrote.
    """

    def __init__(
        self,
        *,
        run_id: uuid.UUID,
        seed: Sequence[HistoryMessage] = (),
        resume: bool = False,
        agent_name: str = "",
        history_limit: int = DEFAULT_HISTORY_LIMIT,
        token_budget: int = 0,
        store: Any = None,
    ) -> None:
        from apps.agents import services

        self.run_id = run_id
        self.agent_name = agent_name or FALLBACK_AGENT_NAME
        self.resume = resume
        self.store = store or services
        limit = history_limit or DEFAULT_HISTORY_LIMIT
        window = history_window(list(seed), limit=limit, token_budget=token_budget)
        self._seed = EventsAdapter(window, agent_name=self.agent_name).all()
        self._unsaved_seed = bool(self._seed) and not resume
        self._position = 0
        self._calls: dict[str, HistoryToolCall] = {}
        for message in window:
            for tc in message.tool_calls:
                self._calls.setdefault(tc.id, tc)
        self.appended: dict[str, list[HistoryMessage]] = {}
        self.own_events: list[Event] = []
        self.stored = 0
        self._session: Session | None = None

    async def _load(self, app_name: str, user_id: str, session_id: str) -> Session:
        if self._session is not None:
            return self._session
        events: list[Event]
        if self.resume:
            rows = await self.store.agent_run_events_load(run_id=self.run_id)
            events = []
            for seeded, data in rows:
                event = event_from_row(data)
                events.append(event)
                if not seeded:
                    self._own(session_id, event)
            self._position = len(rows)
            if not rows:  # its process died before the run's first event: it starts afresh
                self.resume = False
                self._unsaved_seed = bool(self._seed)
                events = list(self._seed)
        else:
            events = list(self._seed)
        self._session = Session(id=session_id, app_name=app_name, user_id=user_id, state={}, events=events)
        return self._session

    def _own(self, session_id: str, event: Event) -> None:
        self.own_events.append(event)
        message = event_to_message(event, known_calls=self._calls)
        if message is None:
            return
        for tc in message.tool_calls:
            self._calls.setdefault(tc.id, tc)
        self.appended.setdefault(session_id, []).append(message)

    async def create_session(
        self,
        *,
        app_name: str,
        user_id: str,
        state: dict[str, Any] | None = None,
        session_id: str | None = None,
    ) -> Session:
        session = await self._load(app_name, user_id, session_id or str(self.run_id))
        session.state.update(state or {})
        return session

    async def get_session(
        self,
        *,
        app_name: str,
        user_id: str,
        session_id: str,
        config: GetSessionConfig | None = None,
    ) -> Session | None:
        return await self._load(app_name, user_id, session_id)

    async def list_sessions(self, *, app_name: str, user_id: str | None = None) -> ListSessionsResponse:
        sessions = [self._session.model_copy(update={"events": []})] if self._session is not None else []
        return ListSessionsResponse(sessions=sessions)

    async def delete_session(self, *, app_name: str, user_id: str, session_id: str) -> None:
        self._session = None

    async def append_event(self, session: Session, event: Event) -> Event:
        if event.partial:
            return event
        self._apply_temp_state(session, event)
        event = self._trim_temp_delta_state(event)
        rows = []
        if self._unsaved_seed:
            rows = [event_row(e, position=i, seeded=True) for i, e in enumerate(self._seed)]
            self._position = len(rows)
        rows.append(event_row(event, position=self._position))
        await self.store.agent_run_events_append(run_id=self.run_id, rows=rows)
        self._unsaved_seed = False
        self._position += 1
        self.stored += len(rows)
        self._own(session.id, event)
        session.last_update_time = event.timestamp
        return self._commit_event_to_session(session, event)
