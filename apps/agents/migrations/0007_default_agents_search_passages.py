"""The default agents installed before ``search_passages`` existed get it, if nobody changed their tools.

As 0005 did for ``query_paths``: ``default_agents_install`` never changes an existing definition, so
the projects that have ``graph-query-agent`` and ``graph-curator-agent`` would never be offered the
passage search. Only a definition whose tools are exactly a former default list gets it (after
``query_paths``, where the defaults list it now); a definition someone edited is left as it is. The
tool is offered only in a project that has documents (its availability check, evaluated each turn),
so a graph-only project's agents see the same tools as before.
"""

from django.db import migrations

OLD_READ_TOOLS = [
    "hybrid_search", "query_entities", "search_entities", "semantic_search", "find_similar",
    "get_entity_edges", "traverse_graph", "list_entity_types", "schema_version", "list_relationships",
    "query_paths",
]  # fmt: skip
NEW_READ_TOOLS = [*OLD_READ_TOOLS, "search_passages"]
# update_relationship joined the write tools later: curators installed before it lack it.
WRITE_TOOLS_BEFORE = [
    "create_entity",
    "update_entity",
    "delete_entity",
    "create_relationship",
    "delete_relationship",
]
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


def _with_passages(tools):
    return [*NEW_READ_TOOLS, *tools[len(OLD_READ_TOOLS) :]]


def _without_passages(tools):
    return [*OLD_READ_TOOLS, *tools[len(NEW_READ_TOOLS) :]]


def forward(apps, schema_editor):
    AgentDefinition = apps.get_model("agents", "AgentDefinition")
    for name, lists in FORMER.items():
        for definition in AgentDefinition.objects.filter(name=name):
            if list(definition.tools or []) in lists:
                definition.tools = _with_passages(definition.tools)
                definition.save(update_fields=["tools"])


def backward(apps, schema_editor):
    AgentDefinition = apps.get_model("agents", "AgentDefinition")
    for name, lists in FORMER.items():
        for definition in AgentDefinition.objects.filter(name=name):
            if list(definition.tools or []) in [_with_passages(t) for t in lists]:
                definition.tools = _without_passages(definition.tools)
                definition.save(update_fields=["tools"])


class Migration(migrations.Migration):
    dependencies = [
        ("agents", "0006_resumable_turns"),
    ]

    operations = [migrations.RunPython(forward, backward)]
