"""Passages in answers (issue 26 item 2): plain RAG retrieves passages as well as entities, an answer
cites a passage as ``passage:<id>``, and a cited passage no tool returned is removed."""

from __future__ import annotations

import pytest
from asgiref.sync import sync_to_async

from apps.agents.llm.scripted import text, tool_call
from apps.chat.models import Conversation, Message
from apps.documents.models import Passage
from apps.documents.services import document_upload
from tests.chat.conftest import agent_request, sse_turn, tokens
from tests.factories import make_project

pytestmark = pytest.mark.django_db(transaction=True)

GUIDE = (
    "# Paris guide\n\n"
    "The Eiffel Tower in Paris was finished in 1889 for the World's Fair.\n\n"
    "The Louvre is the most visited museum in the world.\n"
)
MADE_UP = "99999999-9999-9999-9999-999999999999"


@pytest.fixture
def guide(world):
    document_upload(project=world["project"], name="paris-guide.md", data=GUIDE.encode())
    return Passage.objects.get(project=world["project"], text__startswith="The Eiffel Tower")


async def test_a_plain_answer_cites_an_entity_and_a_passage_and_loses_an_invented_passage(
    world, guide, scripted
):
    paris = world["paris"]
    scripted.turns.append(
        text(
            f"[Paris](entity:{paris.id}) has the Eiffel Tower, finished in 1889 ",
            f"[paris-guide.md](passage:{guide.id}). It has ",
            f"[no moon](passage:{MADE_UP}) passage:{MADE_UP}.",
        )
    )

    status, frames = await sse_turn(
        world["client"],
        {"message": "When was the Eiffel Tower in Paris finished?", "projectId": str(world["project"].id)},
    )

    assert status == 200
    system = scripted.calls[0].messages[0].content
    assert f"[paris-guide.md](passage:{guide.id})" in system and "finished in 1889" in system
    answer = await Message.objects.aget(id=frames[-1]["messageId"])
    assert answer.content == (
        f"[Paris](entity:{paris.id}) has the Eiffel Tower, finished in 1889 "
        f"[paris-guide.md](passage:{guide.id}). It has no moon ."
    )
    assert tokens(frames) == answer.content
    citations = frames[-1]["citations"]
    assert [(c["type"], c["name"]) for c in citations] == [("City", "Paris"), ("passage", "paris-guide.md")]
    passage = citations[1]
    assert (passage["id"], passage["kind"], passage["documentId"]) == (
        str(guide.id),
        "passage",
        str(guide.document_id),
    )
    assert passage["snippet"].startswith("The Eiffel Tower in Paris")
    assert answer.citations == citations
    assert answer.retrieval_context["passage_ids"][0] == str(guide.id)
    assert str(guide.id) not in answer.retrieval_context["entity_ids"]


async def test_a_plain_turn_without_documents_keeps_its_prompt(world, scripted):
    scripted.turns.append(text("ok"))

    await sse_turn(world["client"], {"message": "Paris", "projectId": str(world["project"].id)})

    assert "passage" not in scripted.calls[0].messages[0].content


async def test_a_plain_turn_over_documents_alone_shows_each_passage_headed_by_its_link(world, scripted):
    # A project with a document and no graph: the prompt is the passages, each under the Markdown
    # link that cites it, and no "no entities found" section for the model to repeat.
    project = await sync_to_async(make_project)(owner=world["user"], name="Notes")
    await sync_to_async(document_upload)(project=project, name="paris-guide.md", data=GUIDE.encode())
    guide = await Passage.objects.aget(project=project, text__startswith="The Eiffel Tower")
    scripted.turns.append(text(f"In 1889 [paris-guide.md](passage:{guide.id})."))

    status, frames = await sse_turn(
        world["client"], {"message": "When was the Eiffel Tower finished?", "projectId": str(project.id)}
    )

    assert status == 200
    system = scripted.calls[0].messages[0].content
    assert "Answer the user's question from the passages below" in system
    assert f"- [paris-guide.md](passage:{guide.id}):\n  The Eiffel Tower in Paris was finished" in system
    assert "Entities found" not in system and "No matching entities" not in system
    answer = await Message.objects.aget(id=frames[-1]["messageId"])
    assert [c["key"] for c in answer.citations] == [f"passage:{guide.id}"]


async def test_a_plain_answer_that_cites_no_passage_is_given_the_passages_holding_its_facts(
    world, guide, scripted
):
    scripted.turns.append(text("The tower was finished in 1889."))

    status, frames = await sse_turn(
        world["client"],
        {"message": "When was the Eiffel Tower finished?", "projectId": str(world["project"].id)},
    )

    assert status == 200
    answer = await Message.objects.aget(id=frames[-1]["messageId"])
    assert (
        answer.content == f"The tower was finished in 1889.\n\nSources: [paris-guide.md](passage:{guide.id})"
    )
    assert tokens(frames).endswith(f"Sources: [paris-guide.md](passage:{guide.id})")
    assert [c["key"] for c in answer.citations] == [f"passage:{guide.id}"]


async def test_a_passage_cited_in_an_earlier_answer_stays_citable(world, guide, scripted):
    scripted.turns += [text("First."), text(f"Again [the guide](passage:{guide.id}).")]
    _, frames = await sse_turn(
        world["client"], {"message": "Eiffel Tower", "projectId": str(world["project"].id)}
    )

    _, again = await sse_turn(
        world["client"], {"message": "unrelated words", "conversationId": frames[0]["conversationId"]}
    )

    assert tokens(again) == f"Again [the guide](passage:{guide.id})."
    conversation = await Conversation.objects.aget(id=frames[0]["conversationId"])
    assert conversation.known_entities[str(guide.id)]["kind"] == "passage"


async def test_an_agent_answer_cites_a_passage_its_search_passages_call_returned(
    world, agent, guide, scripted
):
    agent.tools = [*agent.tools, "search_passages"]
    await sync_to_async(agent.save)()
    scripted.turns += [
        [tool_call("search_passages", {"query": "Eiffel Tower finished"}, id="call-1")],
        text(f"In 1889 [paris-guide.md](passage:{guide.id}); not [this](passage:{MADE_UP})."),
    ]

    status, frames = await sse_turn(
        world["client"], agent_request(world, agent, "When was the tower finished?")
    )

    assert status == 200
    result = next(f for f in frames if f["type"] == "mcp_tool" and f["status"] == "completed")["result"]
    assert result["results"][0]["id"] == str(guide.id)
    answer = await Message.objects.aget(id=frames[-1]["messageId"])
    assert answer.content == f"In 1889 [paris-guide.md](passage:{guide.id}); not this."
    assert [c["id"] for c in frames[-1]["citations"]] == [str(guide.id)]
    assert answer.retrieval_context["entity_ids"] == []
