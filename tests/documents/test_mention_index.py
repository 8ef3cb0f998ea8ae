"""The mention index (issue #48): what each passage names, stored at upload without a model, and
the walk over it that ``search_passages`` ranks by."""

from __future__ import annotations

import pytest

from apps.documents.models import MentionName, PassageMention
from apps.documents.search import passages_search
from apps.documents.services import document_delete_as_member, document_upload
from apps.graph_tools.recognizer import mentions_find, normalise
from apps.projects.selectors import Principal
from tests.factories import make_entity, make_project, make_user
from tests.graph_tools.conftest import call_tool

pytestmark = pytest.mark.django_db


def _upload(project, name, text):
    return document_upload(project=project, name=name, data=text.encode())


def _mentions(project, document_name):
    return {
        (m.surface, m.kind, m.mention_name.normalised, m.mention_name.entity_id)
        for m in PassageMention.objects.filter(
            passage__document__project=project, passage__document__name=document_name
        ).select_related("mention_name")
    }


def test_the_recognizer_finds_names_titles_quoted_titles_and_dates_without_a_model():
    text = (
        'Palo Alto (2013 film): Palo Alto is a drama directed by Gia Coppola, based on "Palo Alto '
        'Stories" by James Franco. It premiered on 30 August 2013. The Battle of Hastings is not in it.'
    )

    found = {(m.surface, m.kind, m.normalised) for m in mentions_find(text, title=True)}

    assert ("Palo Alto (2013 film)", "title", "palo alto") in found
    assert ("Gia Coppola", "name", "gia coppola") in found
    assert ("Palo Alto Stories", "quoted", "palo alto stories") in found
    assert ("30 August 2013", "date", "30 august 2013") in found
    assert ("Battle of Hastings", "name", "battle of hastings") in found
    assert not {s for s, _, _ in found} & {"It", "The", "August"}


def test_two_spellings_of_one_name_have_one_key():
    assert normalise("Arrête ton cinéma") == normalise("Arrete Ton Cinema") == "arrete ton cinema"
    assert normalise("The Beatles'") == normalise("Beatles") == "beatles"


def test_a_passage_naming_an_existing_entity_by_its_alias_links_the_entity():
    project = make_project()
    lisbon = make_entity(project, "lisbon", "City", "Lisbon", properties={"aliases": ["Lisboa"]})

    _upload(project, "trip.txt", "We flew to Lisboa in spring and met Ana Teixeira there.")

    mentions = _mentions(project, "trip.txt")
    assert ("Lisboa", "name", "lisboa", lisbon.id) in mentions
    assert ("Ana Teixeira", "name", "ana teixeira", None) in mentions


def test_a_new_name_in_two_documents_is_one_candidate_of_the_project():
    project = make_project()

    _upload(project, "a.txt", "Denys Desjardins directed the film.")
    _upload(project, "b.md", "# Denys Desjardins\n\nA Canadian director born in Montreal.")

    names = MentionName.objects.filter(project=project, normalised="denys desjardins")
    assert names.count() == 1
    assert names.get().entity_id is None
    assert names.get().mentions.count() == 2
    assert {m.kind for m in names.get().mentions.all()} == {"name", "title"}


def test_a_changed_reupload_indexes_only_its_changed_passages():
    project = make_project()
    _upload(project, "notes.txt", "Ada Lovelace wrote notes.\n\nCharles Babbage built engines.")
    kept = PassageMention.objects.get(project=project, surface="Ada Lovelace")

    _upload(project, "notes.txt", "Ada Lovelace wrote notes.\n\nAlan Turing wrote papers.")

    assert PassageMention.objects.get(project=project, surface="Ada Lovelace").id == kept.id
    assert PassageMention.objects.filter(project=project, surface="Alan Turing").exists()
    assert not PassageMention.objects.filter(project=project, surface="Charles Babbage").exists()
    assert not MentionName.objects.filter(project=project, normalised="charles babbage").exists()


def test_deleting_a_document_removes_its_mentions_and_the_names_only_it_mentioned():
    owner = make_user()
    project = make_project(owner=owner)
    _upload(project, "a.txt", "Grace Hopper met Alan Turing.")
    kept = _upload(project, "b.txt", "Alan Turing lived in Wilmslow.").document
    gone = _upload(project, "c.txt", "Grace Hopper wrote COBOL.").document
    document_delete_as_member(
        principal=Principal(user=owner), project_ref=str(project.id), document_id=str(gone.id)
    )

    document_delete_as_member(
        principal=Principal(user=owner), project_ref=str(project.id), document_id=str(kept.id)
    )

    assert not PassageMention.objects.filter(passage__document_id__in=[kept.id, gone.id]).exists()
    assert set(MentionName.objects.filter(project=project).values_list("normalised", flat=True)) == {
        "grace hopper",
        "alan turing",
    }


BRIDGE_CORPUS = {
    # The film's passage names its director; the director's own passage never names the film.
    "film.txt": "The Quiet Harbour (1961 film): The Quiet Harbour is a drama film directed by Maren Voss.",
    "director.txt": "Maren Voss: Maren Voss was a painter and director, born in the town of Kestel.",
}
# Passages full text ranks above the bridge for the question's words ("born", "director", "film").
DISTRACTORS = [
    f"Film {i}: A film whose director was born in a harbour town; the director of film {i} was born there."
    for i in range(8)
]


def test_the_walk_ranks_a_bridge_passage_that_full_text_alone_ranks_below_five():
    project = make_project()
    for name, text in BRIDGE_CORPUS.items():
        _upload(project, name, text)
    for i, text in enumerate(DISTRACTORS):
        _upload(project, f"distractor-{i}.txt", text)
    question = "Where was the director of film The Quiet Harbour born?"
    by_text = [
        r["document_name"]
        for r in passages_search(project_id=project.id, query=question, limit=10, walk=False)
    ]
    assert "director.txt" not in by_text[:5]

    walked = call_tool(project, "search_passages", query=question, limit=5)["results"]

    assert {r["document_name"] for r in walked[:2]} == {"film.txt", "director.txt"}
    assert next(r for r in walked if r["document_name"] == "film.txt")["mentions"] == ["Quiet Harbour"]
