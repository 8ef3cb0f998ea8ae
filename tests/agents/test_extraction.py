"""Extraction as a proposal (issue 26 item 3): a scripted perfect extractor proves the pipeline loses
nothing; review approves, rejects and edits items, written with one graph version bump and one
audit row per change naming the document and passage; failures are retried and skipped; a changed
paragraph re-extracts only its passage; a deleted document stops its job; a restart resumes."""

from __future__ import annotations

import asyncio
import re
from typing import Any

import pytest
from django.test import Client

from apps.agents.llm.base import Done, ToolCall
from apps.agents.llm.scripted import ScriptedProvider, error
from apps.documents import resolution
from apps.documents.extraction import queue as graph_extraction
from apps.documents.extraction.answers import extraction_output_clean
from apps.documents.extraction.spec import TOOL_NAME, extraction_spec
from apps.documents.extraction.step import extraction_run_until_idle, extraction_step
from apps.documents.models import ChangeSet, ChangeSetItem, Document, ExtractionSettings, Passage
from apps.documents.review import change_set_apply
from apps.documents.services import document_upload
from apps.graph_tools.models import GraphChange, GraphObject, GraphRelationship
from apps.graph_tools.versions import graph_version_current
from tests.factories import make_entity, make_project, make_relationship, make_user

pytestmark = pytest.mark.django_db

P1 = "Freedonia is a country whose capital is Fredville. Its currency is the Freedonian crown."
P2 = "Fredville lies on the river Fred, and the city also borders the town of Nortown."
P3 = "Nortown uses the Freedonian crown as well."
TEXT = "\n\n".join([P1, P2, P3]) + "\n"
# The truth per passage: what a perfect extractor says.
TRUTH: dict[str, dict[str, list[dict[str, str]]]] = {
    P1: {
        "entities": [
            {"name": "Freedonia", "type": "Country", "description": "A country."},
            {"name": "Fredville", "type": "City", "description": "The capital of Freedonia."},
            {"name": "Freedonian crown", "type": "Currency", "description": "Freedonia's currency."},
        ],
        "relationships": [
            {"source": "Fredville", "type": "CAPITAL_OF", "target": "Freedonia"},
            {"source": "Freedonia", "type": "USES_CURRENCY", "target": "Freedonian crown"},
        ],
    },
    P2: {
        "entities": [
            {"name": "Fredville", "type": "City", "description": "A city on the river Fred."},
            {"name": "Nortown", "type": "City", "description": "A town."},
        ],
        "relationships": [{"source": "Fredville", "type": "BORDERS", "target": "Nortown"}],
    },
    P3: {
        "entities": [
            {"name": "Nortown", "type": "City", "description": "A town."},
            {"name": "Freedonian crown", "type": "Currency", "description": "A currency."},
        ],
        "relationships": [{"source": "Nortown", "type": "USES_CURRENCY", "target": "Freedonian crown"}],
    },
}
TRUE_RELATIONSHIPS = {
    ("Fredville", "CAPITAL_OF", "Freedonia"),
    ("Freedonia", "USES_CURRENCY", "Freedonian crown"),
    ("Fredville", "BORDERS", "Nortown"),
    ("Nortown", "USES_CURRENCY", "Freedonian crown"),
}


def passage_of(messages: list[Any]) -> str:
    return re.search(r"Passage:\n(.*)$", messages[-1].content, re.DOTALL).group(1)  # type: ignore[union-attr]


def perfect_extractor(truth: dict[str, Any] = TRUTH) -> ScriptedProvider:
    """Answers every passage with exactly its facts, through the one tool it is offered."""

    def respond(messages: list[Any], tools: list[Any]) -> list[Any]:
        assert [t.name for t in tools] == [TOOL_NAME]
        return [ToolCall(id="x", name=TOOL_NAME, arguments=truth[passage_of(messages)])]

    return ScriptedProvider(responder=respond)


@pytest.fixture
def project():
    owner = make_user("owner")
    project = make_project(owner=owner, name="Atlas")
    # The project's types: the schema's enums come from them.
    a = make_entity(project, "country:x", type="Country", name="Xland")
    b = make_entity(project, "city:y", type="City", name="Yburg")
    c = make_entity(project, "currency:z", type="Currency", name="Zed")
    make_relationship(project, b, "CAPITAL_OF", a)
    make_relationship(project, a, "USES_CURRENCY", c)
    make_relationship(project, b, "USES_CURRENCY", c)  # a city may pay with a currency too
    make_relationship(project, b, "BORDERS", b)
    make_entity(project, "country:freedonia", type="Country", name="Freedonia", description="Already known.")
    return project


@pytest.fixture
def owner_client(project):
    client = Client()
    client.force_login(project.memberships.get().user)
    return client


def start(client, project, document) -> dict[str, Any]:
    response = client.post(f"/api/projects/{project.id}/documents/{document.id}/extraction")
    assert response.status_code == 202, response.json()
    return response.json()


def graph_relationships(project) -> set[tuple[str, str, str]]:
    return {
        (r.src.name, r.type, r.dst.name)
        for r in GraphRelationship.objects.filter(project=project).select_related("src", "dst")
    }


def test_the_perfect_extractor_loses_nothing(project, owner_client):
    document = document_upload(project=project, name="atlas.md", data=TEXT.encode()).document
    before = set(graph_relationships(project))
    version = graph_version_current(project_id=project.id)

    started = start(owner_client, project, document)
    extracted = extraction_run_until_idle(provider=perfect_extractor())
    review = owner_client.get(f"/api/projects/{project.id}/documents/{document.id}/extraction").json()
    decided = owner_client.post(
        f"/api/change-sets/{review['id']}/decision", {"approve": "all"}, content_type="application/json"
    )

    assert started["status"] == "running" and started["progress"] == {
        "total": 3,
        "done": 0,
        "failed": 0,
        "pending": 3,
    }
    assert extracted == 3
    assert review["status"] == "review" and review["progress"]["done"] == 3
    actions = {
        (i["action"], i["values"].get("name"))
        for i in review["items"]
        if i["action"] != "create_relationship"
    }
    assert actions == {
        ("link_entity", "Freedonia"),
        ("create_entity", "Fredville"),
        ("create_entity", "Freedonian crown"),
        ("create_entity", "Nortown"),
    }
    link = next(i for i in review["items"] if i["action"] == "link_entity")
    assert link["evidence"]["method"] == "name" and link["evidence"]["entity"]["name"] == "Freedonia"
    assert decided.status_code == 200, decided.json()
    assert decided.json()["status"] == "applied"
    assert graph_relationships(project) - before == TRUE_RELATIONSHIPS
    assert GraphObject.objects.filter(project=project, name="Freedonia").count() == 1
    assert graph_version_current(project_id=project.id) == version + 1
    changes = list(GraphChange.objects.filter(project=project, version=version + 1))
    assert len(changes) == 3 + 4
    assert {c.authority for c in changes} == {"extraction"}
    passages = {p.id: p.text for p in Passage.objects.filter(document=document)}
    for change in changes:
        assert change.document_id == document.id
        text = passages[change.passage_id]
        if change.action == "create_relationship":
            src = GraphObject.objects.get(id=change.src_id).name
            dst = GraphObject.objects.get(id=change.dst_id).name
            triple = {"source": src, "type": change.after["type"], "target": dst}
            assert triple in TRUTH[text]["relationships"]
        else:
            assert change.after["name"] in [e["name"] for e in TRUTH[text]["entities"]]


def test_review_approves_some_rejects_one_and_edits_one(project, owner_client):
    document = document_upload(project=project, name="atlas.md", data=TEXT.encode()).document
    start(owner_client, project, document)
    extraction_run_until_idle(provider=perfect_extractor())
    review = owner_client.get(f"/api/projects/{project.id}/documents/{document.id}/extraction").json()
    items = {
        i["values"].get("name") or (i["values"]["sourceName"], i["values"]["targetName"]): i
        for i in review["items"]
    }
    version = graph_version_current(project_id=project.id)

    first = owner_client.post(
        f"/api/change-sets/{review['id']}/decision",
        {
            "approve": [
                items["Fredville"]["id"],
                items["Nortown"]["id"],
                items[("Fredville", "Nortown")]["id"],
            ],
            "reject": [items["Freedonian crown"]["id"]],
            "edits": {str(items["Nortown"]["id"]): {"name": "Nortown-on-Fred"}},
        },
        content_type="application/json",
    ).json()
    rest = owner_client.post(
        f"/api/change-sets/{review['id']}/decision", {"approve": "all"}, content_type="application/json"
    ).json()
    again = owner_client.post(
        f"/api/change-sets/{review['id']}/decision", {"approve": "all"}, content_type="application/json"
    )

    assert first["status"] == "review"
    assert GraphObject.objects.filter(project=project, name="Nortown-on-Fred").exists()
    assert not GraphObject.objects.filter(project=project, name="Freedonian crown").exists()
    assert ("Fredville", "BORDERS", "Nortown-on-Fred") in graph_relationships(project)
    assert graph_version_current(project_id=project.id) == version + 2
    statuses = {
        i["values"].get("type"): i["status"] for i in rest["items"] if i["action"] == "create_relationship"
    }
    assert statuses["CAPITAL_OF"] == "applied"
    assert statuses["USES_CURRENCY"] == "failed"  # its currency was rejected
    assert rest["status"] == "applied"
    assert (again.status_code, again.json()["code"]) == (409, "change_set_not_pending")


def test_a_viewer_cannot_start_or_decide_and_outsiders_see_nothing(project, owner_client):
    document = document_upload(project=project, name="atlas.md", data=TEXT.encode()).document
    review = start(owner_client, project, document)
    viewer, outsider = make_user(), make_user()
    from tests.factories import add_member

    add_member(project, viewer, role="viewer")
    as_viewer, as_outsider = Client(), Client()
    as_viewer.force_login(viewer)
    as_outsider.force_login(outsider)

    refused = as_viewer.post(f"/api/projects/{project.id}/documents/{document.id}/extraction")
    decide = as_viewer.post(
        f"/api/change-sets/{review['id']}/decision", {"approve": "all"}, content_type="application/json"
    )
    hidden = as_outsider.get(f"/api/change-sets/{review['id']}")

    assert (refused.status_code, decide.status_code) == (403, 403)
    assert (hidden.status_code, hidden.json()["code"]) == (404, "change_set_not_found")
    assert as_viewer.get(f"/api/change-sets/{review['id']}").status_code == 200


def test_model_errors_are_retried_with_backoff_and_a_passage_that_keeps_failing_is_skipped(
    project, owner_client, monkeypatch
):
    monkeypatch.setattr(graph_extraction, "BACKOFF_SECONDS", 0.0)
    document = document_upload(project=project, name="atlas.md", data=TEXT.encode()).document
    start(owner_client, project, document)
    perfect = perfect_extractor()
    calls: list[str] = []

    def flaky(messages: list[Any], tools: list[Any]) -> list[Any]:
        text = passage_of(messages)
        calls.append(text)
        if text == P2 or (text == P1 and calls.count(P1) == 1):
            return error("rate limited", status=429)
        return perfect.responder(messages, tools)  # type: ignore[misc]

    extraction_run_until_idle(provider=ScriptedProvider(responder=flaky))
    review = owner_client.get(f"/api/projects/{project.id}/documents/{document.id}/extraction").json()

    assert calls.count(P1) == 2 and calls.count(P2) == graph_extraction.EXTRACTION_ATTEMPTS
    failed = Passage.objects.get(document=document, text=P2)
    assert (failed.extraction_state, failed.extraction_error) == ("failed", "rate limited")
    assert review["status"] == "review"
    assert review["progress"] == {"total": 3, "done": 2, "failed": 1, "pending": 0}
    assert "Nortown" in {i["values"].get("name") for i in review["items"]}


def test_a_changed_paragraph_re_extracts_only_its_passage(project, owner_client):
    document = document_upload(project=project, name="atlas.md", data=TEXT.encode()).document
    start(owner_client, project, document)
    extraction_run_until_idle(provider=perfect_extractor())
    first = owner_client.get(f"/api/projects/{project.id}/documents/{document.id}/extraction").json()
    owner_client.post(
        f"/api/change-sets/{first['id']}/decision", {"approve": "all"}, content_type="application/json"
    )
    changed = P3.replace("as well", "too")
    truth = {
        **TRUTH,
        changed: {
            "entities": [{"name": "Nortown", "type": "City", "description": "A town."}],
            "relationships": [],
        },
    }
    document_upload(project=project, name="atlas.md", data=TEXT.replace(P3, changed).encode())
    model = perfect_extractor(truth)

    second = start(owner_client, project, document)
    extraction_run_until_idle(provider=model)

    assert second["progress"]["total"] == 1
    assert [passage_of(c.messages) for c in model.calls] == [changed]
    latest = ChangeSet.objects.filter(document=document).first()
    assert latest is not None and latest.status == "empty"  # Nortown is in the graph now: only a link


def test_a_deleted_document_stops_its_job(project, owner_client, settings):
    settings.KGCHAT_EXTRACTION_CONCURRENCY = 2  # the default, said here
    document = document_upload(project=project, name="atlas.md", data=TEXT.encode()).document
    start(owner_client, project, document)
    model = perfect_extractor()

    def delete_the_document() -> None:  # after the first answer is stored, the second still asked
        Document.objects.filter(id=document.id).delete()

    first = extraction_step(provider=model, after_each=delete_the_document)
    more = extraction_run_until_idle(provider=model)

    assert first == 2 and more == 0 and len(model.calls) == 2  # two asked at once, the third never
    assert not ChangeSet.objects.exists() and not Passage.objects.exists()


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


def test_a_restarted_worker_resumes_a_passage_whose_claim_lapsed(project, owner_client):
    document = document_upload(project=project, name="atlas.md", data=TEXT.encode()).document
    start(owner_client, project, document)
    claimed = graph_extraction.extraction_claim()  # a worker took it, then died
    assert claimed is not None

    before = extraction_run_until_idle(provider=perfect_extractor())
    Passage.objects.filter(id=claimed.id).update(extraction_not_before=None)  # its lease ran out
    after = extraction_run_until_idle(provider=perfect_extractor())

    assert (before, after) == (2, 1)
    assert ChangeSet.objects.get(document=document).status == "review"


def test_the_schema_names_the_project_types_and_new_types_need_the_setting(project):
    spec = extraction_spec(project_id=project.id)
    answer = {
        "entities": [{"name": "Ann", "type": "Person", "description": ""}, {"name": "Oz", "type": "Country"}],
        "relationships": [{"source": "Ann", "type": "LIVES_IN", "target": "Oz"}],
    }

    cleaned = extraction_output_clean(answer, spec)
    ExtractionSettings.objects.create(project=project, allow_new_types=True)
    free = extraction_spec(project_id=project.id)

    entity_type = spec.schema["properties"]["entities"]["items"]["properties"]["type"]
    assert entity_type["enum"] == ["City", "Country", "Currency"]
    assert spec.schema["properties"]["relationships"]["items"]["properties"]["type"]["enum"] == [
        "BORDERS",
        "CAPITAL_OF",
        "USES_CURRENCY",
    ]
    assert cleaned == {
        "entities": [{"name": "Oz", "type": "Country", "description": ""}],
        "relationships": [],
    }
    assert "enum" not in free.schema["properties"]["entities"]["items"]["properties"]["type"]
    assert len(extraction_output_clean(answer, free)["entities"]) == 2


def test_the_answer_is_checked_against_the_passage_it_was_read_from(project):
    spec = extraction_spec(project_id=project.id)
    text = "Freedonia is a country, and its capital is Fredville. The country pays with the Freedonian crown."
    answer = {
        "entities": [
            {"name": "Freedonia", "type": "Country"},
            {"name": "Fredvile", "type": "City"},  # misspelt
            {"name": "Freedonian crown", "type": "Currency"},
            {"name": "Sylvania", "type": "Country"},  # not in the passage
            {"name": "its capital", "type": "City"},  # a reference, not a name
            {"name": "Country", "type": "Country"},  # the passage's common noun: a type, not a name
        ],
        "relationships": [
            {"source": "Fredvile", "type": "CAPITAL_OF", "target": "Freedonia"},
            {"source": "the country", "type": "USES_CURRENCY", "target": "Freedonian crown"},
            {"source": "Sylvania", "type": "BORDERS", "target": "Freedonia"},
            {"source": "Freedonia", "type": "BORDERS", "target": "Country"},
        ],
    }

    cleaned = extraction_output_clean(answer, spec, text=text)

    assert [(e["name"], e["type"]) for e in cleaned["entities"]] == [
        ("Freedonia", "Country"),
        ("Fredville", "City"),
        ("Freedonian crown", "Currency"),
    ]
    assert cleaned["relationships"] == [
        {"source": "Fredville", "type": "CAPITAL_OF", "target": "Freedonia"},
        {"source": "Freedonia", "type": "USES_CURRENCY", "target": "Freedonian crown"},
    ]


def test_a_relationship_joining_types_the_graph_never_joins_needs_new_types_allowed(project, owner_client):
    truth = {
        P1: {
            "entities": [
                {"name": "Freedonia", "type": "Country"},
                {"name": "Freedonian crown", "type": "Currency"},
            ],
            # BORDERS joins two cities in the graph, never a country and a currency.
            "relationships": [{"source": "Freedonia", "type": "BORDERS", "target": "Freedonian crown"}],
        },
        P2: {"entities": [], "relationships": []},
        P3: {"entities": [], "relationships": []},
    }
    strict = document_upload(project=project, name="strict.md", data=TEXT.encode()).document
    start(owner_client, project, strict)
    extraction_run_until_idle(provider=perfect_extractor(truth))
    ExtractionSettings.objects.create(project=project, allow_new_types=True)
    free = document_upload(project=project, name="free.md", data=TEXT.encode()).document
    start(owner_client, project, free)
    extraction_run_until_idle(provider=perfect_extractor(truth))

    def relationship_items(document: Document) -> list[dict[str, Any]]:
        change_set = ChangeSet.objects.get(document=document)
        items = ChangeSetItem.objects.filter(change_set=change_set, action="create_relationship")
        return [i.values for i in items]

    assert relationship_items(strict) == []
    assert [v["type"] for v in relationship_items(free)] == ["BORDERS"]


def test_a_name_typed_differently_in_two_passages_takes_the_type_its_passages_and_relationships_agree_on(
    project, owner_client
):
    # The first passage types Fredville as a country; the second, and every relationship of it
    # (the capital of a country, bordering a city), as a city.
    mistyped = {
        **TRUTH,
        P1: {
            **TRUTH[P1],
            "entities": [
                {"name": "Freedonia", "type": "Country"},
                {"name": "Fredville", "type": "Country"},
                {"name": "Freedonian crown", "type": "Currency"},
            ],
        },
    }
    document = document_upload(project=project, name="atlas.md", data=TEXT.encode()).document
    start(owner_client, project, document)
    extraction_run_until_idle(provider=perfect_extractor(mistyped))
    before = graph_relationships(project)

    change_set = ChangeSet.objects.get(document=document)
    change_set_apply(change_set_id=change_set.id, approve=None, reject=[], edits={}, user_id=None)

    fredville = ChangeSetItem.objects.get(change_set=change_set, values__name="Fredville")
    assert fredville.values["type"] == "City"
    assert graph_relationships(project) - before == TRUE_RELATIONSHIPS


def test_a_near_name_is_proposed_as_a_merge_with_its_evidence(project):
    make_entity(project, "city:porto-velho", type="City", name="Porto Velho")

    action, evidence = resolution.entity_match(project_id=project.id, name="Porto Velhos", type_="City")

    assert action == "merge"
    assert evidence["method"] == "trigram" and evidence["entity"]["name"] == "Porto Velho"
    assert evidence["score"] >= resolution.TRIGRAM_MERGE


def test_an_owner_s_upload_is_applied_at_once_when_the_project_says_so(project):
    ExtractionSettings.objects.create(project=project, owners_auto_approve=True)
    owner = project.memberships.get().user
    document = document_upload(project=project, name="atlas.md", data=TEXT.encode()).document

    graph_extraction.extraction_start(document=document, model="scripted/x", user_id=owner.pk)
    extraction_run_until_idle(provider=perfect_extractor())

    assert ChangeSet.objects.get(document=document).status == "applied"
    assert {c.authority for c in GraphChange.objects.filter(project=project, document_id=document.id)} == {
        "extraction_auto"
    }


def test_the_command_extracts_the_passages_showing_its_progress(project, settings):
    import io

    from django.core.management import call_command

    from apps.agents.llm.scripted import register_script, unregister_script

    register_script("perfect-extractor", perfect_extractor())
    settings.KGCHAT_MODEL = "scripted/perfect-extractor"
    document_upload(project=project, name="atlas.md", data=TEXT.encode())
    out = io.StringIO()
    try:
        call_command("extract_document", "atlas.md", project=project.slug, run=True, stdout=out)
    finally:
        unregister_script("perfect-extractor")

    lines = out.getvalue().splitlines()
    # After each passage answered (two asked at a time, KGCHAT_EXTRACTION_CONCURRENCY's default).
    assert lines[:3] == [f"atlas.md: {n}/3 passages (0 failed)" for n in (1, 2, 3)]
    assert " review; passages 3 done, 0 failed, 0 waiting; 8 items" in lines[-1]


def test_the_command_shows_its_progress_when_the_model_cannot_be_had(project, settings):
    """A passage whose model cannot be resolved has its failure recorded without a call, and the
    command still shows the progress after it (it is tried again after its backoff)."""
    import io

    from django.core.management import call_command

    settings.KGCHAT_MODEL = "scripted/no-such-script"
    document_upload(project=project, name="atlas.md", data=TEXT.encode())
    out = io.StringIO()

    call_command("extract_document", "atlas.md", project=project.slug, run=True, stdout=out)

    lines = out.getvalue().splitlines()
    assert lines[:3] == ["atlas.md: 0/3 passages (0 failed)"] * 3
    assert " running; passages 0 done, 0 failed, 3 waiting; 0 items" in lines[-1]
    assert len(lines) == 4


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


def test_a_relationship_turned_round_or_naming_an_unlisted_end_is_read_by_the_graph_s_types(project):
    sloppy = {
        P1: {
            "entities": [
                {"name": "Freedonia", "type": "Country", "description": ""},
                {"name": "Fredville", "type": "City", "description": ""},
            ],
            "relationships": [
                {"source": "Freedonia", "type": "CAPITAL_OF", "target": "Fredville"},
                {"source": "Freedonia", "type": "USES_CURRENCY", "target": "Freedonian crown"},
            ],
        },
        P2: {"entities": [], "relationships": []},
        P3: {"entities": [], "relationships": []},
    }
    document = document_upload(project=project, name="atlas.md", data=TEXT.encode()).document

    graph_extraction.extraction_start(document=document, model="scripted/x", user_id=None)
    extraction_run_until_idle(provider=perfect_extractor(sloppy))

    items = list(ChangeSet.objects.get(document=document).items.order_by("ordinal"))
    names = {i.ordinal: i.values.get("name") for i in items}
    relationships = {
        (names[i.values["source"]], i.values["type"], names[i.values["target"]])
        for i in items
        if i.action == "create_relationship"
    }
    assert relationships == {
        ("Fredville", "CAPITAL_OF", "Freedonia"),
        ("Freedonia", "USES_CURRENCY", "Freedonian crown"),
    }
    crown = next(i for i in items if i.values.get("name") == "Freedonian crown")
    assert (crown.action, crown.values["type"]) == ("create_entity", "Currency")


MISSPELT = "Fredonia's capital is Fredville."
MISSPELT_TRUTH = {
    MISSPELT: {
        "entities": [
            {"name": "Fredonia", "type": "Country", "description": "A country."},
            {"name": "Fredville", "type": "City", "description": "Its capital."},
        ],
        "relationships": [{"source": "Fredville", "type": "CAPITAL_OF", "target": "Fredonia"}],
    }
}


def test_a_merged_mention_s_name_is_kept_as_an_alias_and_the_next_mention_of_it_is_linked(
    project, owner_client
):
    document = document_upload(project=project, name="fredonia.md", data=MISSPELT.encode()).document
    start(owner_client, project, document)
    extraction_run_until_idle(provider=perfect_extractor(MISSPELT_TRUTH))
    review = owner_client.get(f"/api/projects/{project.id}/documents/{document.id}/extraction").json()
    version = graph_version_current(project_id=project.id)

    decided = owner_client.post(
        f"/api/change-sets/{review['id']}/decision", {"approve": "all"}, content_type="application/json"
    )

    merge = next(i for i in review["items"] if i["action"] == "merge_entity")
    assert merge["values"]["name"] == "Fredonia" and merge["evidence"]["entity"]["name"] == "Freedonia"
    assert decided.status_code == 200, decided.json()
    freedonia = GraphObject.objects.get(project=project, key="country:freedonia")
    assert freedonia.name == "Freedonia" and freedonia.properties["aliases"] == ["Fredonia"]
    assert (
        GraphObject.objects.filter(project=project, type="Country", name__icontains="fredonia").count() == 0
    )
    (alias_change,) = GraphChange.objects.filter(project=project, version=version + 1, action="update_entity")
    assert alias_change.entity_id == freedonia.id and alias_change.document_id == document.id
    assert alias_change.passage_id == Passage.objects.get(document=document).id
    assert alias_change.after["properties"]["aliases"] == ["Fredonia"]

    action, evidence = resolution.entity_match(project_id=project.id, name="Fredonia", type_="Country")
    assert (action, evidence["method"], evidence["entity"]["name"]) == ("link", "alias", "Freedonia")


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
