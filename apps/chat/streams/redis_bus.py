"""The frame bus over Redis, for several server processes (``REDIS_URL``).

Each conversation's running turn is a Redis stream ``kgchat:turn:<conversation>``: frames are
appended with ``XADD`` and read with blocking ``XREAD`` by any process, so a client connected to
process A follows a turn running on process B, in order, from any ``seq``. The end of a turn is
an entry ``{"end": "1"}``; the stream then expires. ``cancel`` publishes on
``kgchat:cancel:<conversation>``; the process running the turn listens there and sets the
turn's local cancel event. Conversation events (``announce``) are published on
``kgchat:conversation:<conversation>``; each watcher holds its own subscription there.

The sockets of the process that runs a turn (the one that started it, as a rule) read it from an
in-process log, as with one process: a token frame through Redis cost an ``XADD``, a blocking
``XREAD`` wake-up and a parse per socket, about three times the process's CPU per streaming turn
(``bench.stream_load --two-processes``). A frame enters that log once it is in the turn's Redis
stream, so whatever a socket was shown, a turn resumed by another process after this one dies
finds there (``resume``). One task per process writes every running turn's frames, in order: the
tokens it gathers for ``BATCH_SECONDS`` go in one pipeline, and a turn's other frames and first
token go at once; ``done`` waits until all of a turn's frames and its end are in Redis.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
from collections.abc import AsyncIterator, Callable
from typing import Any, TypeVar

import redis.asyncio as redis

from apps.chat.streams.frames import (
    RETENTION_SECONDS,
    AnyFrame,
    ConversationEvent,
    McpToolFrame,
    TokenFrame,
    event_from_wire,
    frame_from_text,
)
from apps.chat.streams.local_bus import InProcessFrameBus, Resumed

log = logging.getLogger("kgchat.bus")
T = TypeVar("T")

MAX_FRAMES = 100_000
BLOCK_MS = 5_000
# Longer than a blocking XREAD: redis-py's default (5 s) would time the read out before Redis answers.
SOCKET_TIMEOUT = BLOCK_MS / 1000 + 10
# Connections of one process's pool. A running turn holds about three at once (its cancel
# listener, each follower's blocking read, each watcher's subscription); redis-py's default of 100
# refused turns beyond ~30 at once per process with MaxConnectionsError (bench.stream_load).
MAX_CONNECTIONS = 10_000


def _stream(conversation_id: str) -> str:
    return f"kgchat:turn:{conversation_id}"


def _state(conversation_id: str) -> str:
    return f"kgchat:turn:{conversation_id}:state"


def _cancel_channel(conversation_id: str) -> str:
    return f"kgchat:cancel:{conversation_id}"


def _events_channel(conversation_id: str) -> str:
    return f"kgchat:conversation:{conversation_id}"


class _RedisWatch:
    def __init__(self, pubsub: Any) -> None:
        self._pubsub = pubsub

    def __aiter__(self) -> _RedisWatch:
        return self

    async def __anext__(self) -> ConversationEvent:
        while True:
            message = await self._pubsub.get_message(ignore_subscribe_messages=True, timeout=BLOCK_MS / 1000)
            if message is not None and message.get("type") == "message":
                return event_from_wire(json.loads(message["data"]))

    async def aclose(self) -> None:
        with contextlib.suppress(Exception):
            await self._pubsub.aclose()


# How long the process's writer gathers the running turns' tokens before it sends them to Redis in
# one pipeline (a turn's other frames and its first token go at once, with whatever waits). Each
# round trip (a connection from the pool, the socket written, the replies read) cost the event loop
# more than the frames in it: with one round trip per turn and frame, two processes behind Redis
# spent ~2x one process's CPU per turn (``bench.capacity``; docs/benchmarks.md). Every
# socket sees a frame once it is in Redis, so a token reaches the user up to this much later.
BATCH_SECONDS = 0.025


class _StreamWriter:
    """One running turn's frames on their way to its Redis stream, through the process's
    ``_Batcher``: in publication order, behind the frames published before them. ``close`` waits
    until they, the turn's ``last`` frame (if any) and its end are written, those two in one
    transaction."""

    def __init__(self, batcher: _Batcher, conversation_id: str) -> None:
        self.batcher = batcher
        self.key = _stream(conversation_id)
        self.conversation_id = conversation_id
        self.last: str | None = None
        self.abandoned = False
        self.error: BaseException | None = None
        self.closed: asyncio.Future[None] | None = None
        self.tokens = False  # whether a token of the turn was put

    def put(self, frame: AnyFrame, data: str) -> None:
        # Only a token after the turn's first waits for the batch: the others (the turn's meta,
        # its tool chips, its first token) are what a user waits on, and they are few.
        waits = isinstance(frame, TokenFrame) and self.tokens
        self.tokens = self.tokens or isinstance(frame, TokenFrame)
        self.batcher.put(self, frame, data, now=not waits)

    def abandon(self) -> None:
        """Write nothing more of this turn (what is waiting is dropped)."""
        self.abandoned = True

    async def close(self, *, last: str | None = None) -> None:
        self.last = last
        self.closed = asyncio.get_running_loop().create_future()
        self.batcher.close(self)
        await self.closed  # the write's error, if Redis failed, is the caller's


class _Batcher:
    """Writes the frames of every turn this process (this event loop) runs to their Redis streams:
    ``BATCH_SECONDS`` after a frame comes (at once when a turn is closing), all that came is sent
    in one pipeline, in the order it came. A command that fails fails its turn's writer; the other
    turns' frames are written."""

    def __init__(self, bus: RedisFrameBus) -> None:
        self.bus = bus
        # (writer, frame, its text); a frame of None: the writer's close
        self.pending: list[tuple[_StreamWriter, AnyFrame | None, str]] = []
        self.due = asyncio.Event()
        self.timer: asyncio.TimerHandle | None = None
        self.task = asyncio.create_task(self._run())

    def put(self, writer: _StreamWriter, frame: AnyFrame, data: str, *, now: bool) -> None:
        self.pending.append((writer, frame, data))
        if now:
            self.due.set()
        elif self.timer is None and not self.due.is_set():
            self.timer = asyncio.get_running_loop().call_later(BATCH_SECONDS, self.due.set)

    def close(self, writer: _StreamWriter) -> None:
        self.pending.append((writer, None, ""))
        self.due.set()

    async def _run(self) -> None:
        batch: list[tuple[_StreamWriter, AnyFrame | None, str]] = []
        try:
            while True:
                await self.due.wait()
                self.due.clear()
                if self.timer is not None:
                    self.timer.cancel()
                    self.timer = None
                batch, self.pending = self.pending, []
                await self._write(batch)
                batch = []
        finally:  # the event loop is closing: nobody waits for a close that will not be written
            for writer, frame, _ in [*batch, *self.pending]:
                if frame is None and writer.closed is not None and not writer.closed.done():
                    writer.closed.cancel()

    async def _write(self, batch: list[tuple[_StreamWriter, AnyFrame | None, str]]) -> None:
        owners: list[_StreamWriter] = []  # the writer of each command, in order
        # A transaction when a turn ends: its last frame and its end are seen together (nobody can
        # see the end and still cancel), and after every frame before them.
        transaction = any(frame is None for _, frame, _ in batch)
        try:
            async with self.bus._client().pipeline(transaction=transaction) as pipe:
                for writer, frame, data in batch:
                    if writer.abandoned or writer.error is not None:
                        continue
                    if frame is not None:
                        pipe.xadd(writer.key, {"frame": data}, maxlen=MAX_FRAMES, approximate=True)
                        owners.append(writer)
                        continue
                    if writer.last is not None:
                        pipe.xadd(writer.key, {"frame": writer.last})
                        owners.append(writer)
                    owners.extend([writer] * self.bus._end(pipe, writer.conversation_id))
                replies = await pipe.execute(raise_on_error=False) if owners else []
        except Exception as exc:  # Redis unreachable: every turn of the batch is told
            replies = [exc] * len(owners)
        for writer, reply in zip(owners, replies, strict=True):
            if isinstance(reply, Exception) and writer.error is None:
                writer.error = reply
        await self._written(batch)

    async def _written(self, batch: list[tuple[_StreamWriter, AnyFrame | None, str]]) -> None:
        """After ``batch``'s write: its frames to this process's sockets, its closes answered."""
        for writer, frame, _ in batch:
            if frame is not None:
                # Now in Redis, the frame is this process's sockets' to see: whatever a socket was
                # shown, a turn resumed elsewhere after this process dies finds in the stream.
                if not writer.abandoned and writer.error is None:
                    await self.bus._local.publish(writer.conversation_id, frame)
            elif writer.closed is not None and not writer.closed.done():
                if writer.error is not None:
                    writer.closed.set_exception(writer.error)
                else:
                    writer.closed.set_result(None)


def _of_this_loop(
    cache: dict[asyncio.AbstractEventLoop, T],
    make: Callable[[], T],
    alive: Callable[[T], bool] = lambda _: True,
) -> T:
    """The running event loop's object in ``cache`` (a client, a writer: they belong to one loop),
    made when it has none or its own is no longer ``alive``; the entries of closed loops go."""
    loop = asyncio.get_running_loop()
    value = cache.get(loop)
    if value is None or not alive(value):
        for old in [lp for lp in cache if lp.is_closed()]:
            del cache[old]
        value = cache[loop] = make()
    return value


class RedisFrameBus:
    def __init__(self, url: str, retention_seconds: float = RETENTION_SECONDS) -> None:
        self.url = url
        self.retention = int(retention_seconds)
        self._clients: dict[asyncio.AbstractEventLoop, redis.Redis] = {}
        self._cancels: dict[str, asyncio.Event] = {}
        self._listeners: dict[str, asyncio.Task[None]] = {}
        # The turns this process runs: their frames, for this process's sockets.
        self._local = InProcessFrameBus(retention_seconds)
        self._writers: dict[str, _StreamWriter] = {}
        self._batchers: dict[asyncio.AbstractEventLoop, _Batcher] = {}

    def _client(self) -> redis.Redis:
        return _of_this_loop(
            self._clients,
            lambda: redis.Redis.from_url(
                self.url,
                decode_responses=True,
                socket_timeout=SOCKET_TIMEOUT,
                max_connections=MAX_CONNECTIONS,
            ),
        )

    def _batcher(self) -> _Batcher:
        return _of_this_loop(self._batchers, lambda: _Batcher(self), alive=lambda b: not b.task.done())

    async def begin(self, conversation_id: str, turn_id: str) -> None:
        client = self._client()
        async with client.pipeline(transaction=True) as pipe:
            pipe.delete(_stream(conversation_id))
            pipe.set(_state(conversation_id), json.dumps({"turn": turn_id, "running": True}))
            await pipe.execute()
        event = asyncio.Event()
        self._cancels[conversation_id] = event
        ready = asyncio.Event()
        self._listeners[conversation_id] = asyncio.create_task(self._listen(conversation_id, event, ready))
        await ready.wait()
        await self._local.begin(conversation_id, turn_id)
        old = self._writers.pop(conversation_id, None)
        if old is not None:
            old.abandon()
        self._writers[conversation_id] = _StreamWriter(self._batcher(), conversation_id)

    async def resume(self, conversation_id: str, turn_id: str) -> Resumed:
        """Go on with a turn whose process died: its Redis stream is kept (and read for where it
        stopped); this process's frames of it go to Redis directly (no local log: its sockets read
        the stream like any other process's), so every follower sees one ``seq`` order."""
        client = self._client()
        seq, shown, completed = 0, [], set()
        entries: Any = await client.xrange(_stream(conversation_id), count=MAX_FRAMES)
        for _, fields in entries or []:
            if "frame" not in fields:
                continue
            frame = frame_from_text(fields["frame"])
            seq = max(seq, frame.seq)
            if isinstance(frame, TokenFrame):
                shown.append(frame.token)
            elif isinstance(frame, McpToolFrame) and frame.status != "started":
                completed.add(frame.callId)
        await client.set(_state(conversation_id), json.dumps({"turn": turn_id, "running": True}))
        event = asyncio.Event()
        self._cancels[conversation_id] = event
        ready = asyncio.Event()
        self._listeners[conversation_id] = asyncio.create_task(self._listen(conversation_id, event, ready))
        await ready.wait()
        return Resumed(seq=seq, shown="".join(shown), completed=frozenset(completed))

    async def opened(self, conversation_id: str, turn_id: str, within: float) -> bool:
        """At once: the turn's Redis stream is followed from any process, whichever runs it."""
        return True

    async def _listen(self, conversation_id: str, event: asyncio.Event, ready: asyncio.Event) -> None:
        pubsub = self._client().pubsub()
        try:
            await pubsub.subscribe(_cancel_channel(conversation_id))
            ready.set()
            async for message in pubsub.listen():
                if message.get("type") == "message":
                    event.set()
        except asyncio.CancelledError:
            pass
        except Exception:
            log.exception("cancel listener of %s failed", conversation_id)
        finally:
            ready.set()
            with contextlib.suppress(Exception):
                await pubsub.aclose()

    async def publish(self, conversation_id: str, frame: AnyFrame) -> None:
        data = frame.text()  # this process's sockets send the same text
        writer = self._writers.get(conversation_id)
        if writer is None:  # a turn this process did not begin (or one already ended): Redis only
            await self._append(conversation_id, data, done=frame.type == "done")
            return
        if writer.error is not None:
            raise writer.error
        if frame.type != "done":
            writer.put(frame, data)
            return
        del self._writers[conversation_id]
        await writer.close(last=data)
        await self._local.publish(conversation_id, frame)

    async def _append(self, conversation_id: str, data: str, *, done: bool) -> None:
        if not done:
            await self._client().xadd(
                _stream(conversation_id), {"frame": data}, maxlen=MAX_FRAMES, approximate=True
            )
            return
        # ``done`` ends the turn in the same transaction: nobody can see it and still cancel.
        async with self._client().pipeline(transaction=True) as pipe:
            pipe.xadd(_stream(conversation_id), {"frame": data})
            self._end(pipe, conversation_id)
            await pipe.execute()

    def _end(self, pipe: Any, conversation_id: str) -> int:
        """Queue the end of the turn on ``pipe``; how many commands that is."""
        pipe.xadd(_stream(conversation_id), {"end": "1"})
        pipe.expire(_stream(conversation_id), self.retention)
        pipe.set(_state(conversation_id), json.dumps({"running": False}), ex=self.retention)
        return 3

    async def abandon(self, conversation_id: str) -> None:
        writer = self._writers.pop(conversation_id, None)
        if writer is not None:
            writer.abandon()
        await self._local.finish(conversation_id)
        self._forget(conversation_id)

    async def finish(self, conversation_id: str) -> None:
        writer = self._writers.pop(conversation_id, None)
        if writer is not None:
            try:
                await writer.close()  # its frames reach this process's sockets first
            finally:
                await self._local.finish(conversation_id)
                self._forget(conversation_id)
            return
        await self._local.finish(conversation_id)
        if await self._running(conversation_id):
            async with self._client().pipeline(transaction=True) as pipe:
                self._end(pipe, conversation_id)
                await pipe.execute()
        self._forget(conversation_id)

    def _forget(self, conversation_id: str) -> None:
        listener = self._listeners.pop(conversation_id, None)
        if listener is not None:
            listener.cancel()
        self._cancels.pop(conversation_id, None)

    async def _running(self, conversation_id: str) -> bool:
        raw = await self._client().get(_state(conversation_id))
        return bool(raw and json.loads(raw).get("running"))

    async def subscribe(
        self, conversation_id: str, *, after_seq: int = 0, include_finished: bool = True
    ) -> AsyncIterator[AnyFrame]:
        if self._local.is_running(conversation_id):
            # A turn of this process: its frames from memory (they reach Redis a moment later).
            async for frame in self._local.subscribe(conversation_id, after_seq=after_seq):
                yield frame
            return
        client = self._client()
        key = _stream(conversation_id)
        running = await self._running(conversation_id)
        if not running and (not include_finished or not await client.exists(key)):
            return
        last_id = "0-0"
        while True:
            entries: Any = await client.xread({key: last_id}, block=BLOCK_MS, count=500)
            if not entries:
                if not await client.exists(key) and not await self._running(conversation_id):
                    return
                continue
            for _, items in entries:
                for entry_id, fields in items:
                    last_id = entry_id
                    if "end" in fields:
                        return
                    frame = frame_from_text(fields["frame"])
                    if frame.seq > after_seq:
                        yield frame

    async def cancel(self, conversation_id: str) -> bool:
        if not await self._running(conversation_id):
            return False
        local = self._cancels.get(conversation_id)
        if local is not None:
            local.set()
        await self._client().publish(_cancel_channel(conversation_id), "cancel")
        return True

    def cancel_signal(self, conversation_id: str) -> asyncio.Event:
        return self._cancels[conversation_id]

    async def announce(self, conversation_id: str, event: ConversationEvent) -> None:
        data = json.dumps(event.wire(), ensure_ascii=False)
        await self._client().publish(_events_channel(conversation_id), data)

    async def watch(self, conversation_id: str) -> _RedisWatch:
        pubsub = self._client().pubsub()
        await pubsub.subscribe(_events_channel(conversation_id))
        # Registered only once Redis confirms: an event announced after ``watch`` returns is seen.
        confirmed = await pubsub.get_message(timeout=SOCKET_TIMEOUT)
        if confirmed is None or confirmed.get("type") != "subscribe":
            await pubsub.aclose()
            raise ConnectionError(f"redis did not confirm the subscription to {conversation_id}")
        return _RedisWatch(pubsub)
