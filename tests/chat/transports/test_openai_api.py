"""The OpenAI-compatible endpoint (docs/protocol.md, "/v1"): models, completions streamed and not,
the conversation a thread maps to, approvals answered in the thread, and OpenAI's error shape."""

from __future__ import annotations

import json
from typing import Any

import pytest
from django.test import AsyncClient

from apps.agents.definitions import default_agents_install
from apps.agents.llm.base import Usage
from apps.agents.llm.scripted import error, text, tool_call
from apps.chat.conversations.openai_text import LinkRewriter, Pages, sources_text
from apps.chat.models import Conversation, Message
from apps.chat.streams.frames import Citation
from apps.chat.turns.service import turn_wait_all
from apps.graph_tools.models import GraphObject, WriteApproval
from apps.projects.services import api_token_create
from tests.chat.conftest import adb
from tests.factories import add_member, make_project, make_user

pytestmark = pytest.mark.django_db(transaction=True)

COMPLETIONS = "/v1/chat/completions"


@pytest.fixture
def key(world, agent) -> str:
    """An API token of the world's user bound to the world project (its agents installed)."""
    return api_token_create(user=world["user"], project=world["project"])[1]


def model_of(world, name: str = "graph-query-agent") -> str:
    return f"{world['project'].slug}/{name}"


def bearer(key: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {key}"}


async def post(key: str, body: Any, **headers: str) -> Any:
    raw = body if isinstance(body, str | bytes) else json.dumps(body)
    response = await AsyncClient().post(
        COMPLETIONS,
        raw,
        content_type="application/json",
        headers={"Authorization": f"Bearer {key}", **headers},
    )
    if isinstance(body, dict) and body.get("stream") and response.status_code == 200:
        response.chunks = b"".join([c async for c in response.streaming_content])
    await turn_wait_all()
    return response


def events(raw: bytes) -> list[Any]:
    out: list[Any] = []
    for block in raw.decode().split("\n\n"):
        if block.startswith("data: "):
            data = block[len("data: ") :]
            out.append(data if data == "[DONE]" else json.loads(data))
    return out


def ask(model: str, *messages: tuple[str, str], **extra: Any) -> dict[str, Any]:
    return {"model": model, "messages": [{"role": r, "content": c} for r, c in messages], **extra}


def content_of(answer: Any) -> str:
    return answer.json()["choices"][0]["message"]["content"]


async def test_models_list_the_token_projects_agents_and_plain_chat_only(world, agent, key):
    other = await adb(make_project)(owner=world["user"], name="Other")
    stranger = await adb(make_project)(owner=await adb(make_user)("stranger"), name="Hidden")
    unbound = (await adb(api_token_create)(user=world["user"]))[1]

    bound = await AsyncClient().get("/v1/models", headers=bearer(key))
    everything = await AsyncClient().get("/v1/models", headers=bearer(unbound))

    ids = [m["id"] for m in bound.json()["data"]]
    slug = world["project"].slug
    assert f"{slug}/graph-query-agent" in ids and ids[-1] == f"{slug}/plain"
    assert all(i.startswith(f"{slug}/") for i in ids)
    assert bound.json()["data"][0]["object"] == "model"
    all_ids = {m["id"] for m in everything.json()["data"]}
    assert f"{other.slug}/plain" in all_ids and f"{stranger.slug}/plain" not in all_ids


async def test_bad_or_missing_key_is_401_in_openai_shape(world):
    for headers in ({"Authorization": "Bearer nope"}, {}):
        answer = await AsyncClient().get("/v1/models", headers=headers)

        assert answer.status_code == 401
        assert answer.json() == {
            "error": {
                "message": answer.json()["error"]["message"],
                "type": "invalid_request_error",
                "param": None,
                "code": "invalid_api_key",
            }
        }


async def test_unknown_model_is_404_model_not_found_and_starts_nothing(world, key):
    answer = await post(key, ask("elsewhere/graph-query-agent", ("user", "Hi")))

    assert answer.status_code == 404
    assert answer.json()["error"]["code"] == "model_not_found"
    assert not await Conversation.objects.filter(project=world["project"]).aexists()


@pytest.mark.parametrize(
    ("body", "param"),
    [
        ("{not json", None),
        ({"model": "x"}, "messages"),
        ({"model": "x", "messages": "hello"}, "messages"),
        ({"model": "x", "messages": [{"role": "user", "content": "Hi"}], "stream": "often"}, "stream"),
        ([{"model": "x"}], None),
        ({"model": 5, "messages": [{"role": "user", "content": "Hi"}]}, "model"),
        ({"model": "x", "messages": [{"role": "user", "content": ["Hi"]}]}, "messages.0.content.str"),
    ],
)
async def test_bad_body_is_400_naming_the_field(world, key, body, param):
    answer = await post(key, body)

    assert answer.status_code == 400
    assert answer.json()["error"]["type"] == "invalid_request_error"
    assert answer.json()["error"]["param"] == param


async def test_last_message_must_be_the_users(world, agent, key):
    model = model_of(world)

    answer = await post(key, ask(model, ("user", "Hi"), ("assistant", "Hello")))

    assert answer.status_code == 400 and answer.json()["error"]["param"] == "messages"


async def test_empty_message_is_400_and_content_parts_are_read_as_text(world, agent, key, scripted):
    scripted.turns += [text("Parts read.")]

    empty = await post(key, ask(model_of(world), ("user", "  ")))
    parts = await post(
        key,
        {
            "model": model_of(world),
            "messages": [
                {
                    "role": "user",
                    "content": [{"type": "text", "text": "Where is "}, {"type": "text", "text": "Paris?"}],
                }
            ],
        },
    )

    assert empty.status_code == 400 and empty.json()["error"]["code"] == "invalid_request"
    assert parts.status_code == 200 and content_of(parts) == "Parts read."
    assert await Message.objects.filter(role="user", content="Where is Paris?").aexists()


async def test_other_routes_and_methods_answer_openai_errors(world, key):
    client = AsyncClient()

    missing = await client.post("/v1/embeddings", "{}", content_type="application/json", headers=bearer(key))
    wrong = await client.get(COMPLETIONS, headers=bearer(key))

    assert (missing.status_code, missing.json()["error"]["code"]) == (404, "unknown_url")
    assert (wrong.status_code, wrong.json()["error"]["code"]) == (405, "method_not_allowed")


async def test_agent_answer_has_citation_links_tool_reasoning_and_usage(world, agent, key, scripted):
    paris = world["paris"]
    scripted.turns += [
        [tool_call("get_entity_edges", {"entity_id": "paris"}, id="k1")],
        text("It is ", f"[Paris](entity:{paris.id}).", usage=Usage(input_tokens=30, output_tokens=7)),
    ]
    model = model_of(world)

    answer = await post(key, ask(model, ("system", "Be brief."), ("user", "Where is Paris?")))

    assert answer.status_code == 200
    body = answer.json()
    conversation = answer.headers["X-Kgchat-Conversation"]
    link = f"http://testserver/chat/{conversation}/#entity-{paris.id}"
    assert body["object"] == "chat.completion" and body["model"] == model
    assert body["choices"][0]["message"]["content"].startswith(f"It is [Paris]({link}).")
    assert "Sources:" not in content_of(answer)  # the text linked its one citation
    assert body["choices"][0]["message"]["reasoning_content"].startswith("Calling `get_entity_edges`")
    assert body["usage"]["completion_tokens"] >= 7
    assert (
        body["usage"]["total_tokens"] == body["usage"]["prompt_tokens"] + body["usage"]["completion_tokens"]
    )
    stored = await Message.objects.filter(conversation_id=conversation, role="assistant").alast()
    assert stored.content.endswith(f"It is [Paris](entity:{paris.id}).")


async def test_stream_sends_chunks_then_usage_then_done(world, agent, key, scripted):
    scripted.turns += [text("Hello ", "there.", usage=Usage(input_tokens=3, output_tokens=2))]
    model = model_of(world)

    answer = await post(key, ask(model, ("user", "Hi"), stream=True, stream_options={"include_usage": True}))

    assert answer.status_code == 200 and answer["Content-Type"] == "text/event-stream"
    sent = events(answer.chunks)
    assert sent[-1] == "[DONE]"
    chunks = sent[:-1]
    assert {c["object"] for c in chunks} == {"chat.completion.chunk"}
    assert chunks[0]["choices"][0]["delta"]["role"] == "assistant"
    text_sent = "".join(c["choices"][0]["delta"].get("content", "") for c in chunks if c["choices"])
    assert text_sent == "Hello there."
    assert chunks[-2]["choices"][0]["finish_reason"] == "stop"
    assert chunks[-1]["choices"] == [] and chunks[-1]["usage"]["prompt_tokens"] >= 3


async def test_a_plain_chat_answers_with_the_usage_its_model_reported_streamed_and_not(world, key, scripted):
    scripted.turns += [
        text("Paris.", usage=Usage(input_tokens=30, output_tokens=7)),
        text("France.", usage=Usage(input_tokens=45, output_tokens=3)),
    ]
    model = model_of(world, "plain")

    whole = await post(key, ask(model, ("user", "Capital?")))
    streamed = await post(
        key, ask(model, ("user", "Of?"), stream=True, stream_options={"include_usage": True})
    )

    assert content_of(whole).startswith("Paris.")
    assert whole.json()["usage"] == {"prompt_tokens": 30, "completion_tokens": 7, "total_tokens": 37}
    last = events(streamed.chunks)[-2]
    assert last["choices"] == [] and last["usage"] == {
        "prompt_tokens": 45,
        "completion_tokens": 3,
        "total_tokens": 48,
    }


async def test_follow_up_by_resent_history_goes_on_in_the_same_conversation(world, agent, key, scripted):
    scripted.turns += [text("First answer."), text("Second answer.")]
    model = model_of(world)
    first = await post(key, ask(model, ("user", "One?")))

    second = await post(
        key,
        ask(
            model,
            ("system", "A new system prompt"),
            ("user", "One?"),
            ("assistant", content_of(first)),
            ("user", "Two?"),
        ),
    )
    third = await post(key, ask(model, ("user", "One?")))

    conversation = first.headers["X-Kgchat-Conversation"]
    assert second.headers["X-Kgchat-Conversation"] == conversation
    assert third.headers["X-Kgchat-Conversation"] != conversation
    contents = [
        m.content async for m in Message.objects.filter(conversation_id=conversation).order_by("created_at")
    ]
    assert contents == ["One?", "First answer.", "Two?", "Second answer."]


async def test_named_thread_goes_on_in_its_conversation(world, agent, key, scripted):
    scripted.turns += [text("A."), text("B."), text("C.")]
    model = model_of(world)
    first = await post(key, ask(model, ("user", "One?")), **{"X-Kgchat-Conversation": "librechat-7"})

    by_name = await post(key, ask(model, ("user", "Two?")), **{"X-Kgchat-Conversation": "librechat-7"})
    by_id = await post(
        key,
        ask(model, ("user", "Three?")),
        **{"X-Kgchat-Conversation": first.headers["X-Kgchat-Conversation"]},
    )

    conversation = first.headers["X-Kgchat-Conversation"]
    assert by_name.headers["X-Kgchat-Conversation"] == by_id.headers["X-Kgchat-Conversation"] == conversation
    assert await Message.objects.filter(conversation_id=conversation, role="user").acount() == 3


async def test_a_header_that_names_no_thread_starts_new_conversations(world, agent, key, scripted):
    scripted.turns += [text("A."), text("B.")]

    first = await post(key, ask(model_of(world), ("user", "One?")), **{"X-Kgchat-Conversation": "new"})
    second = await post(
        key,
        ask(model_of(world), ("user", "Two?")),
        **{"X-Kgchat-Conversation": "{{LIBRECHAT_BODY_CONVERSATIONID}}"},
    )

    assert first.headers["X-Kgchat-Conversation"] != second.headers["X-Kgchat-Conversation"]


async def test_a_thread_key_not_recorded_loses_only_the_mapping(world, agent, key, scripted, monkeypatch):
    def fails(**kwargs: Any) -> None:
        raise RuntimeError("the database went away")

    monkeypatch.setattr("apps.chat.conversations.openai_turns.thread_remember", fails)
    scripted.turns += [text("Still answered.")]

    answer = await post(key, ask(model_of(world), ("user", "One?"), stream=True))

    sent = events(answer.chunks)
    assert sent[-1] == "[DONE]" and sent[-2]["choices"][0]["finish_reason"] == "stop"
    assert "".join(c["choices"][0]["delta"].get("content", "") for c in sent[:-1]) == "Still answered."


async def test_rate_limit_is_429_rate_limit_error(world, agent, key, scripted, settings):
    settings.KGCHAT_TURNS_PER_MINUTE = 1
    scripted.turns += [text("A.")]
    model = model_of(world)
    await post(key, ask(model, ("user", "One?")))

    answer = await post(key, ask(model, ("user", "Two?")))

    assert answer.status_code == 429
    assert (answer.json()["error"]["type"], answer.json()["error"]["code"]) == (
        "rate_limit_error",
        "rate_limited",
    )


async def test_failed_turn_is_an_error_not_a_500(world, agent, key, scripted):
    scripted.turns += [error("the model is down", status=500), error("the model is down", status=500)]
    model = model_of(world)

    answer = await post(key, ask(model, ("user", "Hi")))
    streamed = await post(key, ask(model, ("user", "Hi again"), stream=True))

    assert answer.status_code == 502 and answer.json()["error"]["code"] == "llm_error"
    sent = events(streamed.chunks)
    assert sent[-1] == "[DONE]" and sent[-2]["error"]["code"] == "llm_error"


async def test_approval_is_answered_by_an_approve_reply_in_the_thread(world, key, scripted):
    await adb(default_agents_install)(project=world["project"])
    model = f"{world['project'].slug}/graph-curator-agent"
    scripted.turns += [
        [
            text("I will rename it. ")[0],
            tool_call("update_entity", {"entity_id": "paris", "name": "Paris, France"}),
        ],
        text("Renamed."),
    ]
    asked = await post(key, ask(model, ("user", "Rename Paris")))
    assert "**Approval needed**" in content_of(asked) and "Reply **approve** or **reject**" in content_of(
        asked
    )
    assert (await GraphObject.objects.aget(id=world["paris"].id)).name == "Paris"

    approved = await post(
        key, ask(model, ("user", "Rename Paris"), ("assistant", content_of(asked)), ("user", "approve"))
    )

    assert approved.status_code == 200 and content_of(approved) == "Renamed."
    assert approved.headers["X-Kgchat-Conversation"] == asked.headers["X-Kgchat-Conversation"]
    assert (await GraphObject.objects.aget(id=world["paris"].id)).name == "Paris, France"
    assert (await WriteApproval.objects.aget()).status == "approved"


async def test_reject_reply_carries_its_reason(world, key, scripted):
    await adb(default_agents_install)(project=world["project"])
    model = f"{world['project'].slug}/graph-curator-agent"
    scripted.turns += [
        [tool_call("update_entity", {"entity_id": "paris", "name": "Lutetia"})],
        text("Left as it is."),
    ]
    asked = await post(key, ask(model, ("user", "Rename Paris")))

    rejected = await post(
        key,
        ask(model, ("user", "Rename Paris"), ("assistant", content_of(asked)), ("user", "reject: keep it")),
    )

    approval = await WriteApproval.objects.aget()
    assert (approval.status, approval.reason) == ("rejected", "keep it")
    assert content_of(rejected) == "Left as it is."


def test_link_rewriter_decides_links_split_anywhere_as_over_the_whole_text():
    text_in = "See [Ada](entity:ada-1), [the report](passage:p-9) and [x] (y) ](ent"
    pages = Pages("http://h/", conversation_id="c", project_id="p")
    whole = LinkRewriter(pages)
    expected = whole.feed(text_in) + whole.flush()

    for size in range(1, 8):
        rewriter = LinkRewriter(pages)
        pieces = [rewriter.feed(text_in[i : i + size]) for i in range(0, len(text_in), size)]

        assert "".join(pieces) + rewriter.flush() == expected
    assert expected == (
        "See [Ada](http://h/chat/c/#entity-ada-1), [the report](http://h/chat/c/#passage-p-9) and [x] (y) ](ent"
    )


async def test_links_use_the_public_address_when_one_is_set(world, agent, key, scripted, settings):
    settings.KGCHAT_PUBLIC_URL = "https://kg.example.org"
    paris = world["paris"]
    scripted.turns += [
        [tool_call("get_entity_edges", {"entity_id": "paris"})],
        text(f"[Paris](entity:{paris.id})"),
    ]

    answer = await post(key, ask(model_of(world), ("user", "Where is Paris?")))

    conversation = answer.headers["X-Kgchat-Conversation"]
    assert content_of(answer).startswith(
        f"[Paris](https://kg.example.org/chat/{conversation}/#entity-{paris.id})"
    )


async def test_a_viewer_is_told_who_decides_and_an_approve_reply_is_403(world, scripted):
    await adb(default_agents_install)(project=world["project"])
    viewer = await adb(make_user)("vic")
    await adb(add_member)(world["project"], viewer, "viewer")
    key = (await adb(api_token_create)(user=viewer, project=world["project"]))[1]
    model = model_of(world, "graph-curator-agent")
    scripted.turns += [[tool_call("update_entity", {"entity_id": "paris", "name": "Lutetia"})]]
    asked = await post(key, ask(model, ("user", "Rename Paris")))

    refused = await post(
        key, ask(model, ("user", "Rename Paris"), ("assistant", content_of(asked)), ("user", "approve"))
    )

    assert "An editor or owner of the project decides it in kgchat" in content_of(asked)
    assert refused.status_code == 403 and refused.json()["error"]["type"] == "permission_error"
    assert (await WriteApproval.objects.aget()).status == "pending"


def test_a_passage_a_tool_returned_links_to_its_documents_page_and_sources_list_only_unlinked_citations():
    pages = Pages("http://h", conversation_id="c", project_id="p")
    rewriter = LinkRewriter(pages)
    rewriter.learn({"results": [{"id": "p1", "document_id": "d1", "document_name": "r.pdf", "text": "…"}]})

    linked = rewriter.feed("As [r.pdf](passage:p1) and [Ada](entity:ada) say.") + rewriter.flush()
    sources = sources_text(
        [
            Citation(id="ada", key="ada", type="Person", name="Ada"),
            Citation(id="bob", key="bob", type="Person", name="Bob [II]"),
            Citation.model_validate(
                {
                    "id": "p2",
                    "key": "passage:p2",
                    "type": "passage",
                    "name": "s.pdf",
                    "kind": "passage",
                    "documentId": "d2",
                    "page": 3,
                }
            ),
        ],
        pages,
        linked=frozenset(rewriter.linked),
    )

    assert (
        linked
        == "As [r.pdf](http://h/projects/p/documents/d1/mentions) and [Ada](http://h/chat/c/#entity-ada) say."
    )
    assert sources == (
        "\n\nSources: [Bob (II)](http://h/chat/c/#entity-bob), [s.pdf, p. 3](http://h/projects/p/documents/d2/mentions)"
    )
