"""A project's own ontology (#51): import and its errors, export round trips, the write tools' checks
over REST (refused, or flagged for review), the schema tools, and the ontology-violations queue."""

from __future__ import annotations

import json

import pytest
import yaml
from django.test import Client

from apps.graph_tools.models import GraphChange, GraphRelationship
from tests.factories import add_member, make_user
from tests.graph_tools.conftest import SmallGraph, build_small_graph

ONTOLOGY = """
entity_types:
  Person: {description: A human being, properties: {city: string, retired: boolean}}
  Company: {properties: {country: string}}
  City: {properties: {country: string}}
relationship_types:
  KNOWS: {domain: [Person], range: [Person], properties: {since: integer}}
  WORKS_AT: {domain: [Person], range: [Company], properties: {since: integer}}
  LIVES_IN: {domain: Person, range: [City], properties: {since: integer}}
  LOCATED_IN: {domain: [Company, City], range: [City], properties: {since: integer}}
  FOUNDED: {domain: [Person], range: [Company]}
"""


@pytest.fixture
def graph(db: None) -> SmallGraph:
    return build_small_graph(embed=False)


def member_client(graph: SmallGraph, role: str = "editor") -> Client:
    user = make_user()
    add_member(graph.project, user, role)
    client = Client()
    client.force_login(user)
    return client


@pytest.fixture
def editor(graph: SmallGraph) -> Client:
    return member_client(graph)


def base(graph: SmallGraph) -> str:
    return f"/api/projects/{graph.project.id}"


def import_ontology(client: Client, graph: SmallGraph, text: str = ONTOLOGY, query: str = "", **kw):
    return client.post(
        f"{base(graph)}/ontology/import{query}", text, content_type=kw.pop("content_type", "application/yaml")
    )


def call(client: Client, graph: SmallGraph, tool: str, **arguments):
    return client.post(f"{base(graph)}/graph/tools/{tool}", arguments, content_type="application/json")


def test_import_stores_the_ontology_and_get_shows_it(graph: SmallGraph, editor: Client):
    response = import_ontology(editor, graph)
    got = editor.get(f"{base(graph)}/ontology")

    assert response.status_code == 200
    assert got.status_code == 200
    body = got.json()
    assert body["onViolation"] == "refuse"
    assert body["ontology"]["relationship_types"]["LIVES_IN"] == {
        "domain": ["Person"],
        "range": ["City"],
        "properties": {"since": "integer"},
    }
    assert body["ontology"]["entity_types"]["Person"]["description"] == "A human being"


def test_a_domain_violation_is_refused_through_the_graph_tools_rest_route_naming_the_rule(
    graph: SmallGraph, editor: Client, settings
):
    settings.KGCHAT_DIRECT_WRITES = True
    import_ontology(editor, graph)

    response = call(editor, graph, "create_relationship", src="lisbon", type="WORKS_AT", dst="acme")

    assert response.status_code == 400
    body = response.json()
    assert body["code"] == "ontology_violation"
    assert body["rule"] == "domain"
    assert "WORKS_AT from a City: its domain is Person" in body["error"]
    assert not GraphRelationship.objects.filter(type="WORKS_AT", src=graph.e["lisbon"]).exists()


def test_a_range_violation_and_a_wrong_datatype_are_refused_each_rule_named(
    graph: SmallGraph, editor: Client, settings
):
    settings.KGCHAT_DIRECT_WRITES = True
    import_ontology(editor, graph)

    response = call(
        editor,
        graph,
        "create_relationship",
        src="dave",
        type="KNOWS",
        dst="acme",
        properties={"since": "old"},
    )

    body = response.json()
    assert response.status_code == 400
    assert [v["rule"] for v in body["violations"]] == ["range", "datatype"]
    assert "since" in body["error"]


def test_unknown_entity_type_and_undeclared_property_are_refused(graph: SmallGraph, editor: Client, settings):
    settings.KGCHAT_DIRECT_WRITES = True
    import_ontology(editor, graph)

    unknown_type = call(editor, graph, "create_entity", key="x", type="Planet", name="Mars")
    undeclared = call(editor, graph, "update_entity", entity_id="dave", properties={"shoe_size": 44})
    fine = call(
        editor, graph, "create_entity", key="zoe", type="Person", name="Zoe", properties={"city": "Faro"}
    )

    assert (unknown_type.status_code, unknown_type.json()["rule"]) == (400, "entity_type")
    assert (undeclared.status_code, undeclared.json()["rule"]) == (400, "property")
    assert fine.status_code == 200 and fine.json()["changed"] is True


def test_a_project_that_flags_violations_applies_the_write_flags_it_and_queues_it(
    graph: SmallGraph, editor: Client, settings
):
    settings.KGCHAT_DIRECT_WRITES = True
    import_ontology(editor, graph)
    patched = editor.patch(
        f"{base(graph)}/ontology", {"onViolation": "flag"}, content_type="application/json"
    )

    response = call(editor, graph, "create_relationship", src="lisbon", type="WORKS_AT", dst="acme")
    queue = editor.get(f"{base(graph)}/curation/queues/ontology-violations")

    assert patched.json()["onViolation"] == "flag"
    assert response.status_code == 200
    assert response.json()["ontology_violations"][0]["rule"] == "domain"
    assert GraphChange.objects.filter(project=graph.project, action="create_relationship").count() == 1
    items = queue.json()["items"]
    assert [(i["source"]["key"], i["relationship"]["type"], i["target"]["key"]) for i in items] == [
        ("lisbon", "WORKS_AT", "acme")
    ]
    assert items[0]["violations"][0]["rule"] == "domain"


@pytest.mark.parametrize(
    ("text", "content_type", "fault"),
    [
        (
            "entity_types: {Person: {}}\nrelationship_types: {KNOWS: {domain: [Persn]}}",
            "application/yaml",
            "Persn",
        ),
        ("entity_types: {Person: {properties: {born: when}}}", "application/yaml", "unknown datatype"),
        ("entity_types: [Person]", "application/yaml", "mapping"),
        ("entity_types: {Person: {colour: red}}", "application/yaml", "unknown key"),
        ("entity_types: {Person: {}}\non_violation: shout", "application/yaml", "on_violation"),
        ("entity_types: {Person: &a {}}\nrelationship_types: {X: *a}", "application/yaml", "aliases"),
        ("entity_types: {Person: {}", "application/yaml", "not valid YAML"),
        ('{"entity_types": ', "application/json", "not valid JSON"),
        ("@prefix owl: <http://www.w3.org/2002/07/owl#> . <a> a", "text/turtle", "not valid Turtle"),
        ("", "application/yaml", "empty"),
    ],
)
def test_an_invalid_ontology_file_is_400_naming_the_fault_and_keeps_nothing(
    graph: SmallGraph, editor: Client, text: str, content_type: str, fault: str
):
    response = import_ontology(editor, graph, text, content_type=content_type)

    assert response.status_code == 400, response.content
    assert response.json()["code"] == "invalid_ontology"
    assert fault in response.json()["error"]
    assert editor.get(f"{base(graph)}/ontology").status_code == 404


def test_an_ontology_file_too_large_is_413_and_a_viewer_may_not_import(graph: SmallGraph, editor: Client):
    huge = "entity_types:\n" + "".join(f"  T{i}: {{description: {'x' * 500}}}\n" for i in range(2100))
    viewer = member_client(graph, "viewer")

    too_large = import_ontology(editor, graph, huge)
    refused = import_ontology(viewer, graph)
    refused_unread = import_ontology(viewer, graph, "entity_types: [not, a, mapping")

    assert too_large.status_code == 413
    assert refused.status_code == 403
    assert refused_unread.status_code == 403  # the role first: a viewer's file is never read
    assert viewer.get(f"{base(graph)}/ontology").status_code == 404


def test_export_writes_the_schema_the_graph_has_and_round_trips(graph: SmallGraph, editor: Client):
    exported = {
        fmt: editor.get(f"{base(graph)}/ontology/export?format={fmt}").content
        for fmt in ("yaml", "json", "turtle")
    }

    document = yaml.safe_load(exported["yaml"])
    assert document["relationship_types"]["LOCATED_IN"] == {
        "domain": ["Company"],
        "range": ["City"],
        "properties": {"since": "integer"},
    }
    assert document["entity_types"]["Person"]["properties"] == {"city": "string", "retired": "boolean"}
    assert json.loads(exported["json"]) == document
    for fmt, content_type in (("yaml", "application/yaml"), ("json", "application/json")):
        imported = import_ontology(editor, graph, exported[fmt].decode(), content_type=content_type)
        assert imported.status_code == 200, imported.content
        assert imported.json()["ontology"] == document
    turtle = import_ontology(editor, graph, exported["turtle"].decode(), content_type="text/turtle").json()
    without_relationship_properties = {
        **document,
        "relationship_types": {
            name: {k: v for k, v in d.items() if k != "properties"}
            for name, d in document["relationship_types"].items()
        },
    }
    assert turtle["ontology"] == without_relationship_properties


def test_an_owl_file_gives_entity_types_domains_ranges_and_datatypes(graph: SmallGraph, editor: Client):
    owl = """@prefix : <http://example.org/onto#> .
@prefix owl: <http://www.w3.org/2002/07/owl#> .
@prefix rdfs: <http://www.w3.org/2000/01/rdf-schema#> .
@prefix xsd: <http://www.w3.org/2001/XMLSchema#> .
:Agent a owl:Class . :Person a owl:Class ; rdfs:subClassOf :Agent ; rdfs:comment "A human" .
:Company a owl:Class ; rdfs:subClassOf :Agent . :City a owl:Class .
:LIVES_IN a owl:ObjectProperty ; rdfs:domain :Agent ; rdfs:range :City .
:born a owl:DatatypeProperty ; rdfs:domain :Person ; rdfs:range xsd:date .
"""

    response = import_ontology(editor, graph, owl, content_type="text/turtle")

    assert response.status_code == 200, response.content
    ontology = response.json()["ontology"]
    assert ontology["relationship_types"]["LIVES_IN"] == {
        "domain": ["Agent", "Company", "Person"],
        "range": ["City"],
    }
    assert ontology["entity_types"]["Person"] == {"description": "A human", "properties": {"born": "date"}}


def test_schema_tools_show_the_ontology_and_query_paths_enums_follow_it(graph: SmallGraph, editor: Client):
    import_ontology(editor, graph)

    schema = call(editor, graph, "schema_version").json()
    tools = {t["name"]: t for t in editor.get(f"{base(graph)}/graph/tools").json()["items"]}

    assert schema["ontology"]["relationship_types"]["FOUNDED"] == {"domain": ["Person"], "range": ["Company"]}
    assert schema["ontology"]["on_violation"] == "refuse"
    hop = tools["query_paths"]["inputSchema"]["$defs"]["Hop"]["properties"]
    relationship = next(b for b in hop["relationship"]["anyOf"] if b.get("type") == "string")
    assert relationship["enum"] == ["FOUNDED", "KNOWS", "LIVES_IN", "LOCATED_IN", "WORKS_AT"]
    assert "Person -FOUNDED-> Company" in hop["relationship"]["description"]


def test_the_violations_queue_pages_with_a_cursor(graph: SmallGraph, editor: Client):
    import_ontology(
        editor, graph, ONTOLOGY.replace("KNOWS: {domain: [Person], range: [Person]", "KNOWS: {range: [City]")
    )
    url = f"{base(graph)}/curation/queues/ontology-violations"

    first = editor.get(f"{url}?limit=3").json()
    second = editor.get(f"{url}?limit=3&cursor={first['nextCursor']}").json()
    bad = editor.get(f"{url}?cursor=not-a-cursor")

    assert first["count"] == 4 and len(first["items"]) == 3 and first["nextCursor"]
    assert len(second["items"]) == 1 and second["nextCursor"] is None
    ids = [i["relationship"]["id"] for i in first["items"] + second["items"]]
    assert len(set(ids)) == 4
    assert {i["violations"][0]["rule"] for i in first["items"]} == {"range"}
    assert (bad.status_code, bad.json()["code"]) == (400, "invalid_cursor")


def test_the_violations_queue_is_a_read_only_tool_of_the_registry(graph: SmallGraph, editor: Client):
    import_ontology(
        editor, graph, ONTOLOGY.replace("LIVES_IN: {domain: Person", "LIVES_IN: {domain: Company")
    )

    page = call(editor, graph, "ontology_violations", limit=10)

    assert page.status_code == 200
    assert [(i["source"]["key"], i["relationship"]["type"]) for i in page.json()["items"]] == [
        ("alice", "LIVES_IN")
    ]


def test_delete_removes_the_ontology_and_writes_are_free_again(graph: SmallGraph, editor: Client, settings):
    settings.KGCHAT_DIRECT_WRITES = True
    import_ontology(editor, graph)

    deleted = editor.delete(f"{base(graph)}/ontology")
    again = editor.delete(f"{base(graph)}/ontology")
    write = call(editor, graph, "create_relationship", src="lisbon", type="WORKS_AT", dst="acme")

    assert deleted.status_code == 204
    assert again.status_code == 404 and again.json()["code"] == "ontology_not_found"
    assert write.status_code == 200


def test_a_queue_page_looks_at_a_bounded_stretch_and_the_walk_reaches_every_violation(
    graph: SmallGraph, editor: Client, monkeypatch
):
    from apps.graph_tools.ontology import queue

    monkeypatch.setattr(queue, "SCAN_MAX", 2)
    # KNOWS may only reach a City: its 4 relationships break it, and WORKS_AT (1) is undeclared.
    import_ontology(
        editor,
        graph,
        ONTOLOGY.replace("KNOWS: {domain: [Person], range: [Person]", "KNOWS: {range: [City]").replace(
            "  WORKS_AT:", "  OTHER:"
        ),
    )
    url = f"{base(graph)}/curation/queues/ontology-violations"

    pages, cursor = [], ""
    while True:
        page = editor.get(f"{url}?limit=50{cursor}").json()
        pages.append(page)
        if page["nextCursor"] is None:
            break
        cursor = f"&cursor={page['nextCursor']}"

    assert all(len(p["items"]) <= 2 for p in pages)
    assert sum(len(p["items"]) for p in pages) == pages[0]["count"] == 5
    assert pages[0]["bounds"]["scanMax"] == 2


def test_a_merge_that_would_re_point_relationships_against_the_ontology_is_refused(
    graph: SmallGraph, editor: Client, settings
):
    """Alice's KNOWS, WORKS_AT and LIVES_IN would start at a City if she were merged into Lisbon."""
    settings.KGCHAT_DIRECT_WRITES = True
    import_ontology(editor, graph)

    refused = call(editor, graph, "merge_entities", keep="lisbon", merge="alice")
    same_type = call(editor, graph, "merge_entities", keep="eve", merge="bob")

    assert refused.status_code == 400
    assert refused.json()["code"] == "ontology_violation"
    assert {v["rule"] for v in refused.json()["violations"]} == {"domain", "range"}
    assert "KNOWS from a City" in refused.json()["error"]
    assert GraphRelationship.objects.filter(src=graph.e["alice"]).count() == 3
    assert same_type.status_code == 200, same_type.json()


def test_a_merge_copies_only_the_properties_the_kept_entitys_type_declares(
    graph: SmallGraph, editor: Client, settings
):
    """Eve (a Person) lacks Porto's country, which Person does not declare, and Dave's city and
    retired, which it does."""
    from tests.factories import make_entity

    settings.KGCHAT_DIRECT_WRITES = True
    import_ontology(editor, graph)
    make_entity(graph.project, "porto", type="City", name="Porto", properties={"country": "PT"})

    across = call(editor, graph, "merge_entities", keep="eve", merge="porto")
    same_type = call(editor, graph, "merge_entities", keep="eve", merge="dave")

    assert across.status_code == 200, across.json()
    assert "ontology_violations" not in across.json()
    assert same_type.status_code == 200, same_type.json()
    graph.e["eve"].refresh_from_db()
    assert graph.e["eve"].properties == {
        "aliases": ["Porto", "Dave Brown"],
        "city": "Faro",
        "retired": True,
    }


def test_a_curation_change_set_breaking_the_ontology_is_refused_with_the_rule_and_violations(
    graph: SmallGraph, editor: Client
):
    import_ontology(editor, graph)

    response = editor.post(
        f"{base(graph)}/curation/change-sets",
        {
            "changes": [
                {
                    "action": "create_relationship",
                    "args": {"src": "lisbon", "type": "WORKS_AT", "dst": "acme"},
                }
            ]
        },
        content_type="application/json",
    )

    assert response.status_code == 400
    body = response.json()
    assert body["code"] == "ontology_violation" and body["rule"] == "domain"
    assert body["violations"][0]["rule"] == "domain"
    assert body["error"].startswith("changes[0] (create_relationship): ")
