"""Settings of the daphne processes that ``bench.stream_load`` measures: the app's own, plus two models.

- ``scripted/bench-paced`` streams like a served model (``Pace``): every request answers its first
  item after ``BENCH_FIRST_TOKEN_S`` (0.5 s), then ``BENCH_TOKENS_PER_S`` (50) items a second. For a
  new question it calls ``get_entity_edges`` once; after the tool's result it streams
  ``BENCH_TOKENS`` (200) one-word deltas ``t0 t1 …``, so a client knows which delta a frame holds.
- ``scripted/bench-instant`` answers at once (the same tool call, then 20 deltas) and notes when
  each question first reaches it (``FIRST_REQUEST``): ``bench._stream_load_asgi`` notes when the
  server received it (``RECEIVED``), which gives the delay kgchat adds before the model's first
  request, measured inside the server.

``BENCH_STREAM_MODEL`` (``bench-paced`` or ``bench-instant``) says which one serves every agent.
The model costs no I/O, so the figures measure kgchat around it. Everything else is as in
``config.settings.local``, with the per-user rate limit high enough for hundreds of turns in a row
(its query still runs on every turn).
"""

import gc
import itertools
import os
import time
from collections.abc import AsyncIterator, Iterable
from typing import Any

from apps.agents.llm.base import ChatMessage, Done, TextDelta, Usage
from apps.agents.llm.scripted import Pace, ScriptedProvider, ScriptItem, register_script, tool_call
from config.settings.local import *  # noqa: F403

PACED = "bench-paced"
INSTANT = "bench-instant"
ENTITY = "paris"
TOKENS = int(os.environ.get("BENCH_TOKENS") or 200)
PACE = Pace(
    first_token_seconds=float(os.environ.get("BENCH_FIRST_TOKEN_S") or 0.5),
    tokens_per_second=float(os.environ.get("BENCH_TOKENS_PER_S") or 50),
)
INSTANT_TOKENS = 20

DEBUG = False
KGCHAT_MODEL = "scripted/" + (os.environ.get("BENCH_STREAM_MODEL") or PACED)
KGCHAT_TURNS_PER_MINUTE = 1_000_000
LOGGING = {"version": 1, "disable_existing_loggers": False, "root": {"level": "WARNING"}}

# question text -> time.perf_counter() in this process (read and cleared by bench._stream_load_asgi)
RECEIVED: dict[str, float] = {}
FIRST_REQUEST: dict[str, float] = {}

# ``BENCH_TRACE=1`` (``bench.capacity --trace``): each question's way to its first token in this
# process, and the garbage collector's pauses, read and cleared at ``/bench/trace/``. Times are
# ``time.perf_counter()``: CLOCK_MONOTONIC on Linux, one clock for every process of the machine,
# so the bench lines them up with its clients' own.
TRACE = os.environ.get("BENCH_TRACE") == "1"
REQUESTS: dict[str, list[float]] = {}  # each model request of the question
FIRST_TEXT: dict[str, float] = {}  # the model's first text delta handed to kgchat
FIRST_SENT: dict[str, float] = {}  # the first token frame handed to the socket
PAUSES: list[tuple[float, float, int]] = []  # (start, seconds, generation) of each collection


_collecting_since = [0.0]


def _collection(phase: str, info: dict[str, Any]) -> None:
    now = time.perf_counter()
    if phase == "start":
        _collecting_since[0] = now
    else:
        PAUSES.append((_collecting_since[0], now - _collecting_since[0], info["generation"]))


if TRACE:
    gc.callbacks.append(_collection)


def _question(messages: list[ChatMessage]) -> str:
    return next((m.content for m in reversed(messages) if m.role == "user"), "")


def _responder(tokens: int) -> Any:
    def respond(messages: list[ChatMessage], tools: list[Any]) -> Iterable[ScriptItem]:
        if messages and messages[-1].role == "tool":
            # Made as they are streamed, like a served model's deltas: a list of all of them, made
            # at the request, kept hundreds of objects per running turn for the collector to walk.
            return itertools.chain(
                (TextDelta(text=f"t{i} ") for i in range(tokens)),
                [Done(usage=Usage(input_tokens=500, output_tokens=tokens))],
            )
        return [
            tool_call("get_entity_edges", {"entity_id": ENTITY}),
            Done(usage=Usage(input_tokens=400, output_tokens=10)),
        ]

    return respond


class _Provider(ScriptedProvider):
    """The scripted provider without its call log (a long run would keep every request alive);
    notes when each question first reaches the model."""

    def stream(self, messages: Any, tools: Any, config: Any) -> Any:
        question = _question(messages)
        FIRST_REQUEST.setdefault(question, time.perf_counter())
        self.calls.clear()
        if not TRACE:
            return super().stream(messages, tools, config)
        REQUESTS.setdefault(question, []).append(time.perf_counter())
        return _noting_first_text(question, super().stream(messages, tools, config))


async def _noting_first_text(question: str, items: AsyncIterator[Any]) -> AsyncIterator[Any]:
    async for item in items:
        if isinstance(item, TextDelta) and question not in FIRST_TEXT:
            FIRST_TEXT[question] = time.perf_counter()
        yield item


register_script(PACED, _Provider(responder=_responder(TOKENS), pace=PACE))
register_script(INSTANT, _Provider(responder=_responder(INSTANT_TOKENS)))
