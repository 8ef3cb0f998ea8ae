"""The extraction worker asks the model about two passages at once: a slot answered takes the next
passage, and one passage's failure, expected or not, leaves the other's answer stored."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from apps.agents.llm.base import Done, ToolCall
from apps.agents.llm.scripted import ScriptedProvider, error
from apps.documents.extraction.spec import TOOL_NAME
from apps.documents.extraction.step import extraction_step
from apps.documents.models import ChangeSet, Passage
from apps.documents.services import document_upload
from tests.documents.extraction.atlas import (
    P1,
    P2,
    P3,
    TEXT,
    TRUTH,
    passage_of,
    perfect_extractor,
    start,
)

pytestmark = pytest.mark.django_db


class Overlapping:
    """``inner``, counting the calls open at once (each waits a moment before it answers)."""

    name = "scripted"

    def __init__(self, inner: ScriptedProvider) -> None:
        self.inner = inner
        self.open = self.most = 0

    def stream(self, messages: list[Any], tools: list[Any], config: Any) -> Any:
        return self._stream(messages, tools, config)

    async def _stream(self, messages: list[Any], tools: list[Any], config: Any) -> Any:
        self.open += 1
        self.most = max(self.most, self.open)
        await asyncio.sleep(0.05)
        async for event in self.inner.stream(messages, tools, config):
            if isinstance(event, Done):  # the caller stops reading here
                self.open -= 1
            yield event


def test_the_worker_asks_the_model_about_two_passages_at_once(project, owner_client, settings):
    settings.KGCHAT_EXTRACTION_CONCURRENCY = 2  # the default, said here
    document = document_upload(project=project, name="atlas.md", data=TEXT.encode()).document
    start(owner_client, project, document)
    model = Overlapping(perfect_extractor())

    steps = [extraction_step(provider=model), extraction_step(provider=model)]

    assert steps == [3, 0] and model.most == 2
    assert sorted(passage_of(c.messages) for c in model.inner.calls) == sorted([P1, P2, P3])
    assert set(Passage.objects.values_list("extraction_state", flat=True)) == {"done"}
    assert ChangeSet.objects.get(document=document).status == "review"


def test_a_slot_answered_takes_the_next_passage_while_the_other_is_still_asked(
    project, owner_client, settings
):
    settings.KGCHAT_EXTRACTION_CONCURRENCY = 2  # the default, said here
    document = document_upload(project=project, name="atlas.md", data=TEXT.encode()).document
    start(owner_client, project, document)
    inner = perfect_extractor()
    asked: list[str] = []
    others_asked = asyncio.Event()

    class OneSlow:
        """The first passage asked answers only once the other two were asked (or after 5 s)."""

        name = "scripted"

        def stream(self, messages: list[Any], tools: list[Any], config: Any) -> Any:
            return self._stream(messages, tools, config)

        async def _stream(self, messages: list[Any], tools: list[Any], config: Any) -> Any:
            asked.append(passage_of(messages))
            if len(asked) == 1:
                try:
                    await asyncio.wait_for(others_asked.wait(), timeout=5)
                except TimeoutError:
                    asked.append("timed out")
            elif len(asked) == 3:
                others_asked.set()
            async for event in inner.stream(messages, tools, config):
                yield event

    claimed = extraction_step(provider=OneSlow())

    assert claimed == 3 and "timed out" not in asked and sorted(asked) == sorted([P1, P2, P3])
    assert set(Passage.objects.values_list("extraction_state", flat=True)) == {"done"}
    assert ChangeSet.objects.get(document=document).status == "review"


def test_one_failing_passage_of_those_asked_together_leaves_the_other_stored(project, owner_client, settings):
    settings.KGCHAT_EXTRACTION_CONCURRENCY = 2  # the default, said here
    document = document_upload(project=project, name="atlas.md", data=TEXT.encode()).document
    start(owner_client, project, document)

    def respond(messages: list[Any], tools: list[Any]) -> list[Any]:
        if passage_of(messages) == P1:
            return error("model overloaded", status=503)
        return [ToolCall(id="x", name=TOOL_NAME, arguments=TRUTH[passage_of(messages)])]

    extraction_step(provider=ScriptedProvider(responder=respond))

    states = {
        text.strip(): (state, error)
        for text, state, error in Passage.objects.values_list("text", "extraction_state", "extraction_error")
    }
    assert states[P1] == ("pending", "model overloaded")  # asked, failed, retried after its backoff
    assert ("done", "") in {states[P2], states[P3]}


def test_a_passage_whose_call_breaks_unexpectedly_leaves_the_other_stored_and_ends_the_step(
    project, owner_client, settings
):
    settings.KGCHAT_EXTRACTION_CONCURRENCY = 2
    document = document_upload(project=project, name="atlas.md", data=TEXT.encode()).document
    start(owner_client, project, document)

    def respond(messages: list[Any], tools: list[Any]) -> list[Any]:
        if passage_of(messages) == P1:
            raise RuntimeError("a bug, not the model")
        return [ToolCall(id="x", name=TOOL_NAME, arguments=TRUTH[passage_of(messages)])]

    with pytest.raises(RuntimeError, match="a bug"):
        extraction_step(provider=ScriptedProvider(responder=respond))

    states = {text.strip(): state for text, state in Passage.objects.values_list("text", "extraction_state")}
    assert states[P1] == "pending"  # its lease lapses, and it is tried again
    assert "done" in {states[P2], states[P3]}
