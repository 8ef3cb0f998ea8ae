"""The default curators installed before ``merge_entities`` existed get it and its undo, if nobody
changed their tools (as 0005 and 0007 did for read tools): ``default_agents_install`` never changes an
existing definition. Each call still waits for a member's approval (no tool policy entry)."""

from django.db import migrations

READ_TOOLS = [
    "hybrid_search", "query_entities", "search_entities", "semantic_search", "find_similar",
    "get_entity_edges", "traverse_graph", "list_entity_types", "schema_version", "list_relationships",
    "query_paths", "search_passages",
]  # fmt: skip
WRITE_TOOLS = [
    "create_entity",
    "update_entity",
    "delete_entity",
    "create_relationship",
    "update_relationship",
    "delete_relationship",
]
FORMER = [*READ_TOOLS, *WRITE_TOOLS]
MERGES = ["merge_entities", "unmerge_entities"]


def forward(apps, schema_editor):
    AgentDefinition = apps.get_model("agents", "AgentDefinition")
    for definition in AgentDefinition.objects.filter(name="graph-curator-agent"):
        if list(definition.tools or []) == FORMER:
            definition.tools = [*FORMER, *MERGES]
            definition.save(update_fields=["tools"])


def backward(apps, schema_editor):
    AgentDefinition = apps.get_model("agents", "AgentDefinition")
    for definition in AgentDefinition.objects.filter(name="graph-curator-agent"):
        if list(definition.tools or []) == [*FORMER, *MERGES]:
            definition.tools = FORMER
            definition.save(update_fields=["tools"])


class Migration(migrations.Migration):
    dependencies = [
        ("agents", "0007_default_agents_search_passages"),
    ]

    operations = [migrations.RunPython(forward, backward)]
