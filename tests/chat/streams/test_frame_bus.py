"""The frame bus: replay from any seq, follow live, cancel — in process and across processes (Redis)."""

import asyncio
import gc
import json
import weakref

import pytest
import redis.asyncio as redis

from apps.chat.streams.bus import InProcessFrameBus
from apps.chat.streams.frames import ApprovalDecidedFrame, DoneFrame, MetaFrame, TokenFrame
from apps.chat.streams.redis_bus import RedisFrameBus
from tests.support.redis_server import redis_server


@pytest.fixture(scope="module")
def redis_url():
    with redis_server() as url:
        yield url


def meta(seq: int) -> MetaFrame:
    return MetaFrame(
        seq=seq, conversationId="c", messageId="m", agentDefinitionId=None, runId=None, model="x"
    )


async def drive(publisher, conversation: str, *, with_meta: bool = True) -> None:
    if with_meta:
        await publisher.publish(conversation, meta(1))
    for i, token in enumerate(["a", "b", "c"], start=2):
        await asyncio.sleep(0.01)
        await publisher.publish(conversation, TokenFrame(seq=i, token=token))
    await publisher.publish(conversation, DoneFrame(seq=5, messageId=None, runId=None))
    await publisher.finish(conversation)


async def collect(bus, conversation: str, after_seq: int = 0) -> list[int]:
    return [f.seq async for f in bus.subscribe(conversation, after_seq=after_seq)]


@pytest.mark.parametrize("kind", ["memory", "redis"])
async def test_subscriber_replays_then_follows_live_in_order(kind, request):
    if kind == "memory":
        publisher = reader = InProcessFrameBus()
    else:
        url = request.getfixturevalue("redis_url")
        publisher, reader = RedisFrameBus(url), RedisFrameBus(url)
    await publisher.begin("conv-1", "turn-1")
    await publisher.publish("conv-1", meta(1))

    early = asyncio.create_task(collect(reader, "conv-1"))
    resumed = asyncio.create_task(collect(reader, "conv-1", after_seq=3))
    await asyncio.sleep(0.05)
    await drive(publisher, "conv-1", with_meta=False)

    assert await asyncio.wait_for(early, 10) == [1, 2, 3, 4, 5]
    assert await asyncio.wait_for(resumed, 10) == [4, 5]


@pytest.mark.parametrize("kind", ["memory", "redis"])
async def test_frames_of_a_turn_arrive_once_and_in_order(kind, request):
    if kind == "memory":
        publisher = reader = InProcessFrameBus()
    else:
        url = request.getfixturevalue("redis_url")
        publisher, reader = RedisFrameBus(url), RedisFrameBus(url)
    await publisher.begin("conv-2", "turn-1")

    task = asyncio.create_task(collect(reader, "conv-2"))
    await asyncio.sleep(0.05)
    await drive(publisher, "conv-2")

    assert await asyncio.wait_for(task, 10) == [1, 2, 3, 4, 5]


async def test_the_running_process_follows_its_own_turn_from_memory_and_others_from_redis(redis_url):
    runner, other = RedisFrameBus(redis_url), RedisFrameBus(redis_url)
    await runner.begin("conv-local", "turn-1")
    await runner.publish("conv-local", meta(1))

    local = asyncio.create_task(collect(runner, "conv-local"))
    remote = asyncio.create_task(collect(other, "conv-local"))
    await asyncio.sleep(0.05)
    await drive(runner, "conv-local", with_meta=False)
    replayed_after_the_end = await asyncio.wait_for(collect(other, "conv-local", after_seq=2), 10)

    assert await asyncio.wait_for(local, 10) == [1, 2, 3, 4, 5]
    assert await asyncio.wait_for(remote, 10) == [1, 2, 3, 4, 5]
    assert replayed_after_the_end == [3, 4, 5]
    assert runner._local.is_running("conv-local") is False


async def test_a_turn_ended_without_done_is_ended_in_redis_with_every_frame_written(redis_url):
    runner, other = RedisFrameBus(redis_url), RedisFrameBus(redis_url)
    await runner.begin("conv-cut", "turn-1")
    remote = asyncio.create_task(collect(other, "conv-cut"))
    await asyncio.sleep(0.05)

    for seq in range(1, 51):
        await runner.publish("conv-cut", TokenFrame(seq=seq, token=f"t{seq}"))
    await runner.finish("conv-cut")

    assert await asyncio.wait_for(remote, 10) == list(range(1, 51))
    assert await other.cancel("conv-cut") is False


async def test_the_tokens_of_turns_running_together_reach_redis_in_one_write(redis_url, monkeypatch):
    from redis.asyncio.client import Pipeline

    writes = []
    execute = Pipeline.execute

    async def counted(pipe, *args, **kwargs):
        writes.append(len(pipe.command_stack))
        return await execute(pipe, *args, **kwargs)

    monkeypatch.setattr(Pipeline, "execute", counted)
    runner, other = RedisFrameBus(redis_url), RedisFrameBus(redis_url)
    conversations = [f"conv-many-{n}" for n in range(8)]
    for conversation in conversations:
        await runner.begin(conversation, "turn-1")
        await runner.publish(conversation, meta(1))
        await runner.publish(conversation, TokenFrame(seq=2, token="first"))
    await asyncio.sleep(0.1)  # the metas and first tokens, written at once
    writes.clear()

    for seq in range(3, 23):  # the turns' next tokens, as a busy process publishes them
        for conversation in conversations:
            await runner.publish(conversation, TokenFrame(seq=seq, token=f"t{seq}"))
    for conversation in conversations:
        await runner.publish(conversation, DoneFrame(seq=23, messageId=None, runId=None))
        await runner.finish(conversation)

    # 160 tokens: one write for all of them, then one for each turn's end.
    assert writes[0] >= 160
    assert len(writes) <= 1 + 2 * len(conversations)
    for conversation in conversations:
        assert await asyncio.wait_for(collect(other, conversation), 10) == list(range(1, 24))


async def test_a_frame_reaches_the_running_process_s_sockets_once_it_is_in_redis(redis_url):
    runner = RedisFrameBus(redis_url)
    client = runner._client()
    await runner.begin("conv-durable", "turn-1")
    in_redis_when_seen: list[tuple[int, bool]] = []

    async def follow() -> None:
        async for frame in runner.subscribe("conv-durable"):
            stored = await client.xrange("kgchat:turn:conv-durable")
            seqs = {json.loads(fields["frame"])["seq"] for _, fields in stored if "frame" in fields}
            in_redis_when_seen.append((frame.seq, frame.seq in seqs))

    follower = asyncio.create_task(follow())
    await asyncio.sleep(0.05)
    await runner.publish("conv-durable", meta(1))
    for seq in range(2, 12):
        await runner.publish("conv-durable", TokenFrame(seq=seq, token=f"t{seq}"))
        await asyncio.sleep(0.005)
    await runner.publish("conv-durable", DoneFrame(seq=12, messageId=None, runId=None))
    await runner.finish("conv-durable")
    await asyncio.wait_for(follower, 10)

    assert in_redis_when_seen == [(seq, True) for seq in range(1, 13)]


async def test_a_turn_whose_redis_write_fails_is_told_and_the_others_are_written(redis_url):
    runner, other = RedisFrameBus(redis_url), RedisFrameBus(redis_url)
    await runner.begin("conv-fine", "turn-1")
    await runner.begin("conv-broken", "turn-1")
    await runner._client().set("kgchat:turn:conv-broken", "not a stream")  # its XADDs fail

    for conversation in ("conv-fine", "conv-broken"):
        await runner.publish(conversation, meta(1))
    await asyncio.sleep(0.1)

    with pytest.raises(redis.ResponseError):
        await runner.publish("conv-broken", TokenFrame(seq=2, token="lost"))
    await runner.publish("conv-fine", TokenFrame(seq=2, token="kept"))
    await runner.publish("conv-fine", DoneFrame(seq=3, messageId=None, runId=None))
    await runner.finish("conv-fine")
    await runner.abandon("conv-broken")

    assert await asyncio.wait_for(collect(other, "conv-fine"), 10) == [1, 2, 3]


async def test_cancel_from_another_process_reaches_the_running_turn(redis_url):
    runner, other = RedisFrameBus(redis_url), RedisFrameBus(redis_url)
    await runner.begin("conv-3", "turn-1")
    signal = runner.cancel_signal("conv-3")

    accepted = await other.cancel("conv-3")

    await asyncio.wait_for(signal.wait(), 5)
    assert accepted
    await runner.finish("conv-3")
    assert await other.cancel("conv-3") is False


async def test_subscribing_to_a_conversation_without_a_turn_ends_at_once(redis_url):
    bus = RedisFrameBus(redis_url)

    frames = await asyncio.wait_for(collect(bus, "never-ran"), 2)

    assert frames == []


def decided(approval_id: str) -> ApprovalDecidedFrame:
    return ApprovalDecidedFrame(
        approvalId=approval_id, conversationId="c", status="approved", decidedBy="ada", reason=""
    )


@pytest.mark.parametrize("kind", ["memory", "redis"])
async def test_an_announcement_reaches_every_watcher_of_its_conversation_in_every_process(kind, request):
    if kind == "memory":
        announcer = first = second = InProcessFrameBus()
    else:
        url = request.getfixturevalue("redis_url")
        announcer, first, second = RedisFrameBus(url), RedisFrameBus(url), RedisFrameBus(url)
    watches = [await first.watch("c"), await second.watch("c"), await first.watch("elsewhere")]

    await announcer.announce("c", decided("a1"))
    await announcer.announce("elsewhere", decided("a2"))
    got = [await asyncio.wait_for(anext(w), timeout=10) for w in watches]
    for watch in watches:
        await watch.aclose()

    assert [e.approvalId for e in got] == ["a1", "a1", "a2"]
    assert got[0].wire() == decided("a1").wire() and "seq" not in got[0].wire()


async def test_a_closed_watch_leaves_no_watcher_behind():
    bus = InProcessFrameBus()
    watch = await bus.watch("c")

    await watch.aclose()
    await bus.announce("c", decided("a1"))

    assert bus._watchers == {}


async def test_a_finished_turn_replays_its_frames_as_they_were_sent_and_keeps_only_their_text():
    bus = InProcessFrameBus()
    await bus.begin("conv-r", "turn-1")
    sent = [
        meta(1),
        TokenFrame(seq=2, token="a\u00e9"),
        TokenFrame(seq=3, token="b"),
        DoneFrame(seq=4, messageId="m", runId="r"),
    ]
    reader = asyncio.create_task(collect_frames(bus, "conv-r"))
    await asyncio.sleep(0.01)
    for frame in sent:
        await bus.publish("conv-r", frame)
    live = await asyncio.wait_for(reader, 10)
    published = weakref.ref(sent[1])
    texts = [frame.text() for frame in sent]
    del sent, live, reader, frame
    gc.collect()

    replayed = await collect_frames(bus, "conv-r")
    resumed = await collect_frames(bus, "conv-r", after_seq=2)

    assert [frame.text() for frame in replayed] == texts
    assert [(frame.type, frame.seq) for frame in replayed] == [
        ("meta", 1),
        ("token", 2),
        ("token", 3),
        ("done", 4),
    ]
    assert replayed[3].messageId == "m"
    assert [frame.seq for frame in resumed] == [3, 4]
    # Kept for late subscribers as text: the frame objects themselves are gone (a few hundred
    # per turn, kept RETENTION_SECONDS, were most of what the garbage collector walked).
    assert published() is None


async def collect_frames(bus, conversation: str, after_seq: int = 0) -> list:
    return [f async for f in bus.subscribe(conversation, after_seq=after_seq)]


async def test_a_running_turn_keeps_only_its_latest_frames_as_objects_and_a_late_subscriber_gets_every_frame():
    from apps.chat.streams.local_bus import LIVE_FRAMES

    bus = InProcessFrameBus()
    await bus.begin("conv-l", "turn-1")
    # The subscribers keep what a socket would have sent, not the frames.
    following = asyncio.create_task(collect_sent(bus, "conv-l"))
    await asyncio.sleep(0.01)
    await bus.publish("conv-l", meta(1))
    published = []
    for seq in range(2, 302):
        frame = TokenFrame(seq=seq, token=f"w{seq} ")
        published.append(weakref.ref(frame))
        await bus.publish("conv-l", frame)
        if seq % 50 == 0:
            await asyncio.sleep(0)  # the live subscriber reads as the turn goes
    del frame
    gc.collect()

    # While the turn runs: its earlier frames are kept as text, only the latest as objects.
    alive = [ref for ref in published if ref() is not None]
    late = asyncio.create_task(collect_sent(bus, "conv-l"))
    resumed = asyncio.create_task(collect_sent(bus, "conv-l", after_seq=290))
    await asyncio.sleep(0.01)
    await bus.publish("conv-l", DoneFrame(seq=302, messageId="m", runId=None))

    assert 0 < len(alive) <= 2 * LIVE_FRAMES
    expected = [("meta", 1), *(("token", seq) for seq in range(2, 302)), ("done", 302)]
    for reader in (following, late):
        sent = [json.loads(text) for text in await asyncio.wait_for(reader, 10)]
        assert [(f["type"], f["seq"]) for f in sent] == expected
        assert "".join(f.get("token", "") for f in sent) == "".join(f"w{s} " for s in range(2, 302))
    assert [json.loads(t)["seq"] for t in await asyncio.wait_for(resumed, 10)] == list(range(291, 303))


async def collect_sent(bus, conversation: str, after_seq: int = 0) -> list[str]:
    return [f.text() async for f in bus.subscribe(conversation, after_seq=after_seq)]


async def test_a_subscriber_on_another_thread_reads_every_frame_once_while_the_log_folds():
    import threading

    bus = InProcessFrameBus()
    await bus.begin("conv-t", "turn-1")
    seen: list[int] = []

    def follow() -> None:
        async def read() -> None:
            seen.extend([f.seq async for f in bus.subscribe("conv-t")])

        asyncio.run(read())

    reader = threading.Thread(target=follow)
    reader.start()
    await asyncio.sleep(0.05)
    for seq in range(1, 2001):
        await bus.publish("conv-t", TokenFrame(seq=seq, token="x"))
        if seq % 7 == 0:
            await asyncio.sleep(0)
    await bus.publish("conv-t", DoneFrame(seq=2001, messageId=None, runId=None))
    await asyncio.to_thread(reader.join, 10)

    assert seen == list(range(1, 2002))
