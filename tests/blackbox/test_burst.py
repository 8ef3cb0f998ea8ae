"""A burst of new conversations (issue #23 item 6): 50 started at once by 10 users over SSE, half
plain and half with the default agent ``graph-query-agent``, the scripted model answering at
once, the server at ``make run``'s defaults (30 messages a minute per user: 5 each is well under).
Every one must be answered: no refusal, no ``error`` frame, a stored answer. The figures are
printed (``-s``); ``bench/burst.py`` runs the same with 200."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.blackbox.burst import Burst, burst_async, crowd_make
from tests.blackbox.clients import Api
from tests.blackbox.covers import covers
from tests.blackbox.world import World

USERS, PER_USER = 10, 5


@pytest.fixture(scope="module")
def crowd(world: World, admin: Api) -> Iterator[tuple[list[Api], str, str]]:
    """10 users, viewers of ada's project "Burst" with the default agents."""
    users, project, agent = crowd_make(admin, world.api("ada"), USERS)
    yield users, project, agent
    for api in users:
        api.close()


@covers("POST /api/chat/stream", "200")
async def test_fifty_new_conversations_started_at_once_by_ten_users_are_all_answered(
    crowd: tuple[list[Api], str, str],
) -> None:
    users, project, agent = crowd

    burst: Burst = await burst_async(users, project, agent, per_user=PER_USER)

    print("\n" + burst.report())
    assert len(burst.outcomes) == USERS * PER_USER
    assert all(o.answered for o in burst.outcomes), burst.report()
    for outcome in burst.outcomes:
        api = next(u for u in users if u.username == outcome.user)
        conversation = api.call(
            "GET /api/chat/conversations/{conversation_id}", 200, conversation_id=outcome.conversation_id
        ).json()
        assert conversation["messages"][-1]["id"] == outcome.frames[-1]["messageId"]
        assert conversation["messages"][-1]["content"] == "".join(
            f["token"] for f in outcome.frames if f["type"] == "token"
        )
