"""How each model is asked and its answer read: an OpenAI-compatible server under the schema as
``response_format``, the offline default for compact rows under a grammar of the schema (unguided:
guided, it writes the compact answer of ``test_compact_answers.py``), and an answer that lists an
entity again, loops, or is cut at the token cap keeps what it finished."""

from __future__ import annotations

from typing import Any

import pytest

from apps.documents.extraction import queue as graph_extraction
from apps.documents.extraction.spec import extraction_spec
from apps.documents.extraction.step import extraction_run_until_idle
from apps.documents.models import ChangeSet, ExtractionSettings, Passage
from apps.documents.services import document_upload
from tests.documents.extraction.atlas import (
    P1,
    P2,
    P3,
    TEXT,
    TRUTH,
)
from tests.factories import make_entity

pytestmark = pytest.mark.django_db


def test_an_openai_compatible_server_is_asked_under_the_schema_as_response_format(project, settings):
    from tests.llm_server import LLMTestServer, Stream, last_user_text, text_chunks

    def respond(request: dict[str, Any]) -> Any:
        text = last_user_text(request).split("Passage:\n", 1)[1]
        return Stream(text_chunks(__import__("json").dumps(TRUTH[text])))

    document = document_upload(project=project, name="atlas.md", data=TEXT.encode()).document
    with LLMTestServer(responder=respond) as server:
        settings.OPENAI_BASE_URL = server.base_url
        settings.OPENAI_API_KEY = "test-key"
        graph_extraction.extraction_start(document=document, model="openai/test-model", user_id=None)
        extraction_run_until_idle()

    formats = [r["response_format"] for r in server.requests]
    assert {f["json_schema"]["name"] for f in formats} == {"extraction"}
    assert formats[0]["json_schema"]["schema"]["properties"]["entities"]["items"]["properties"]["type"][
        "enum"
    ] == [
        "City",
        "Country",
        "Currency",
    ]
    change_set = ChangeSet.objects.get(document=document)
    assert change_set.status == "review"
    assert change_set.items.filter(action="create_relationship").count() == 4


def rows_of(answer: dict[str, list[dict[str, str]]]) -> str:
    """``answer`` as the offline default writes it under the compact grammar: each item a row."""
    import json

    return json.dumps(
        {
            "entities": [[e["name"], e["type"]] for e in answer["entities"]],
            "relationships": [[r["source"], r["type"], r["target"]] for r in answer["relationships"]],
        },
        separators=(",", ":"),
    )


def pieces(text: str, size: int = 9) -> list[str]:
    """``text`` as a model streams it: a few characters at a time."""
    return [text[i : i + size] for i in range(0, len(text), size)]


def test_the_offline_default_is_asked_for_compact_rows_under_a_grammar_of_the_schema(project, settings):
    from tests.llm_server import LLMTestServer, Stream, last_user_text, text_chunks

    def respond(request: dict[str, Any]) -> Any:
        return Stream(text_chunks(rows_of(TRUTH[last_user_text(request).split("Passage:\n", 1)[1]])))

    settings.KGCHAT_EXTRACTION_GUIDED = False  # the rows of entities and relationships
    document = document_upload(project=project, name="atlas.md", data=TEXT.encode()).document
    with LLMTestServer(responder=respond) as server:
        settings.KGCHAT_LOCAL_LLM_URL = server.base_url
        graph_extraction.extraction_start(document=document, model="local/qwen2.5-1.5b", user_id=None)
        extraction_run_until_idle()

    assert server.requests and all("response_format" not in r for r in server.requests)
    grammar = server.requests[0]["grammar"]
    # No rule lets the model write whitespace between the answer's tokens: every literal is compact,
    # and an item is a row of its values, without the keys.
    assert '"{\\"entities\\":"' in grammar and '",\\"relationships\\":"' in grammar
    assert '"\\"City\\"" | "\\"Country\\"" | "\\"Currency\\""' in grammar
    assert '"[" str ","' in grammar and "name" not in grammar and "source" not in grammar
    assert " space" not in grammar and '" "' not in grammar
    assert '[["name","type"],...]' in server.requests[0]["messages"][0]["content"]
    change_set = ChangeSet.objects.get(document=document)
    assert change_set.status == "review"
    assert change_set.items.filter(action="create_relationship").count() == 4
    first = Passage.objects.get(document=document, ordinal=0)
    assert first.extracted["relationships"][0] == {
        "source": "Fredville",
        "type": "CAPITAL_OF",
        "target": "Freedonia",
    }


def test_an_answer_that_lists_an_entity_again_is_resumed_with_its_relationships(project, settings):
    """The offline default now and then starts its entity list over and loops in it until the token
    cap; the answer is stopped at the first entity written again and the model is asked to go on
    from there with the relationships, its answer so far given as the start of its reply."""
    from tests.llm_server import LLMTestServer, Stream, last_user_text, text_chunks

    entities = '{"entities":[["Freedonia","Country"],["Fredville","City"],["Freedonian crown","Currency"]'
    relationships = '],"relationships":[["Fredville","CAPITAL_OF","Freedonia"],["Freedonia","USES_CURRENCY","Freedonian crown"]]}'

    def respond(request: dict[str, Any]) -> Any:
        text = last_user_text(request).split("Passage:\n", 1)[1]
        if text != P1:
            return Stream(text_chunks(rows_of(TRUTH[text])))
        if request["messages"][-1]["role"] == "assistant":
            return Stream(text_chunks(relationships))
        looping = ',["Freedonia","Country"],["Fredville","City"]' * 200
        return Stream(text_chunks(*pieces(entities + looping)), finish_reason="length")

    settings.KGCHAT_EXTRACTION_GUIDED = False  # the rows of entities and relationships
    document = document_upload(project=project, name="atlas.md", data=TEXT.encode()).document
    with LLMTestServer(responder=respond) as server:
        settings.KGCHAT_LOCAL_LLM_URL = server.base_url
        graph_extraction.extraction_start(document=document, model="local/qwen2.5-1.5b", user_id=None)
        extraction_run_until_idle()

    asked = [r for r in server.requests if last_user_text(r).endswith(P1)]
    assert len(asked) == 2
    assert asked[1]["messages"][-1] == {"role": "assistant", "content": entities}
    assert asked[1]["messages"][:-1] == asked[0]["messages"]
    # The rest of the answer only: the entity list's close, then the relationships.
    assert (
        asked[1]["grammar"].startswith("root ::= resume")
        and 'resume ::= "]" ",\\"relationships\\":"' in asked[1]["grammar"]
    )
    # At most twice as many relationships as the entities named before (at least 10).
    assert "{0,9}" in asked[1]["grammar"] and "{0,49}" in asked[0]["grammar"]
    first = Passage.objects.get(document=document, ordinal=0)
    assert first.extraction_state == "done"
    assert [e["name"] for e in first.extracted["entities"]] == ["Freedonia", "Fredville", "Freedonian crown"]
    assert first.extracted["relationships"] == [
        {"source": "Fredville", "type": "CAPITAL_OF", "target": "Freedonia"},
        {"source": "Freedonia", "type": "USES_CURRENCY", "target": "Freedonian crown"},
    ]
    change_set = ChangeSet.objects.get(document=document)
    assert change_set.items.filter(action="create_relationship").count() == 4


def test_an_answer_that_loops_in_its_relationships_keeps_those_before_the_loop(project, settings):
    from tests.llm_server import LLMTestServer, Stream, last_user_text, text_chunks

    def respond(request: dict[str, Any]) -> Any:
        text = last_user_text(request).split("Passage:\n", 1)[1]
        answer = rows_of(TRUTH[text])
        if text != P1:
            return Stream(text_chunks(answer))
        # Once again is a slip and the list goes on; the third time, it is a loop.
        looping = (
            answer[:-2]
            + ',["Fredville","CAPITAL_OF","Freedonia"]'
            + ',["Freedonia","USES_CURRENCY","Freedonian crown"]' * 100
        )
        return Stream(text_chunks(*pieces(looping)), finish_reason="length")

    settings.KGCHAT_EXTRACTION_GUIDED = False  # the rows of entities and relationships
    document = document_upload(project=project, name="atlas.md", data=TEXT.encode()).document
    with LLMTestServer(responder=respond) as server:
        settings.KGCHAT_LOCAL_LLM_URL = server.base_url
        graph_extraction.extraction_start(document=document, model="local/qwen2.5-1.5b", user_id=None)
        extraction_run_until_idle()

    assert len([r for r in server.requests if last_user_text(r).endswith(P1)]) == 1  # not resumed
    first = Passage.objects.get(document=document, ordinal=0)
    assert first.extraction_state == "done"
    capital = {"source": "Fredville", "type": "CAPITAL_OF", "target": "Freedonia"}
    currency = {"source": "Freedonia", "type": "USES_CURRENCY", "target": "Freedonian crown"}
    assert first.extracted["relationships"] == [capital, currency, capital]
    assert ChangeSet.objects.get(document=document).items.filter(action="create_relationship").count() == 4


def test_an_answer_cut_at_the_token_cap_keeps_its_finished_items_and_is_not_asked_again(project, settings):
    import json

    from apps.documents.extraction.spec import ANSWER_TOKENS_BASE
    from tests.llm_server import LLMTestServer, Stream, last_user_text, text_chunks

    def respond(request: dict[str, Any]) -> Any:
        text = last_user_text(request).split("Passage:\n", 1)[1]
        answer = json.dumps(TRUTH[text], separators=(",", ":"))
        if text == P1:  # cut in the middle of its second relationship
            cut = answer.index('{"source":"Freedonia"') + 12
            return Stream(text_chunks(answer[:cut]), finish_reason="length")
        return Stream(text_chunks(answer))

    settings.KGCHAT_EXTRACTION_GUIDED = False  # the rows of entities and relationships
    document = document_upload(project=project, name="atlas.md", data=TEXT.encode()).document
    with LLMTestServer(responder=respond) as server:
        settings.KGCHAT_LOCAL_LLM_URL = server.base_url
        graph_extraction.extraction_start(document=document, model="local/qwen2.5-1.5b", user_id=None)
        extraction_run_until_idle()

    assert len(server.requests) == 3  # one a passage: none asked again
    caps = {last_user_text(r).split("Passage:\n", 1)[1]: r["max_tokens"] for r in server.requests}
    assert caps == {p: ANSWER_TOKENS_BASE + len(p) for p in (P1, P2, P3)}
    first = Passage.objects.get(document=document, ordinal=0)
    assert first.extraction_state == "done"
    assert [e["name"] for e in first.extracted["entities"]] == ["Freedonia", "Fredville", "Freedonian crown"]
    assert first.extracted["relationships"] == [
        {"source": "Fredville", "type": "CAPITAL_OF", "target": "Freedonia"}
    ]


def test_the_compact_grammar_spells_a_type_as_the_project_does_and_free_types_are_strings(project):
    from apps.agents.json_answers import compact_json_grammar

    make_entity(project, key="s1", type="Città", name="Roma")
    typed = compact_json_grammar(extraction_spec(project_id=project.id).schema)
    assert '"\\"Città\\""' in typed  # the model writes the letter, not an escape of it

    ExtractionSettings.objects.create(project=project, allow_new_types=True)
    free = compact_json_grammar(extraction_spec(project_id=project.id).schema)
    assert 'r0 ::= "[" str "," str "]"' in free and "Città" not in free  # an entity's row: name, type
