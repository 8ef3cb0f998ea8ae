"""The default agents installed before ``query_paths`` existed get it, if nobody changed their tools.

``default_agents_install`` never changes an existing definition, so without this the projects that
have ``graph-query-agent`` and ``graph-curator-agent`` would never be offered the path query. Only a
definition whose tools are exactly a former default list gets it (after ``list_relationships``, where
the defaults list it now); a definition someone edited is left as it is. When to use it is said by the
tool's own description, so no prompt changes.
"""

from django.db import migrations

OLD_READ_TOOLS = [
    "hybrid_search", "query_entities", "search_entities", "semantic_search", "find_similar",
    "get_entity_edges", "traverse_graph", "list_entity_types", "schema_version", "list_relationships",
]  # fmt: skip
NEW_READ_TOOLS = [*OLD_READ_TOOLS, "query_paths"]
WRITE_TOOLS_BEFORE = [
    "create_entity",
    "update_entity",
    "delete_entity",
    "create_relationship",
    "delete_relationship",
]
# update_relationship joined the write tools later, so curators installed since list it too.
WRITE_TOOLS = [
    "create_entity",
    "update_entity",
    "delete_entity",
    "create_relationship",
    "update_relationship",
    "delete_relationship",
]
FORMER = {
    "graph-query-agent": [OLD_READ_TOOLS],
    "graph-curator-agent": [[*OLD_READ_TOOLS, *WRITE_TOOLS_BEFORE], [*OLD_READ_TOOLS, *WRITE_TOOLS]],
}


def _with_paths(tools):
    return [*NEW_READ_TOOLS, *tools[len(OLD_READ_TOOLS) :]]


def _without_paths(tools):
    return [*OLD_READ_TOOLS, *tools[len(NEW_READ_TOOLS) :]]


def forward(apps, schema_editor):
    AgentDefinition = apps.get_model("agents", "AgentDefinition")
    for name, lists in FORMER.items():
        for definition in AgentDefinition.objects.filter(name=name):
            if list(definition.tools or []) in lists:
                definition.tools = _with_paths(definition.tools)
                definition.save(update_fields=["tools"])


def backward(apps, schema_editor):
    AgentDefinition = apps.get_model("agents", "AgentDefinition")
    for name, lists in FORMER.items():
        for definition in AgentDefinition.objects.filter(name=name):
            if list(definition.tools or []) in [_with_paths(t) for t in lists]:
                definition.tools = _without_paths(definition.tools)
                definition.save(update_fields=["tools"])


class Migration(migrations.Migration):
    dependencies = [
        ("agents", "0004_agentrun_graph_version"),
    ]

    operations = [migrations.RunPython(forward, backward)]
