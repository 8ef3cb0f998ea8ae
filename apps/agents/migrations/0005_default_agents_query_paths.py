"""The default agents installed before ``query_paths`` existed get it, if nobody changed them.

``default_agents_install`` never changes an existing definition, so without this the projects that
have ``graph-query-agent`` and ``graph-curator-agent`` would never be offered the path query. Only a
definition whose tools are exactly the former default list gets it (appended), and only one whose
system prompt is exactly the former default gets the new one (which says when to use it); a
definition someone edited is left as it is.
"""

from django.db import migrations

OLD_READ_TOOLS = [
    "hybrid_search", "query_entities", "search_entities", "semantic_search", "find_similar",
    "get_entity_edges", "traverse_graph", "list_entity_types", "schema_version", "list_relationships",
]  # fmt: skip
WRITE_TOOLS = ["create_entity", "update_entity", "delete_entity", "create_relationship", "delete_relationship"]
OLD_TOOLS = {
    "graph-query-agent": OLD_READ_TOOLS,
    "graph-curator-agent": [*OLD_READ_TOOLS, *WRITE_TOOLS],
}
NEW_TOOLS = {
    "graph-query-agent": [*OLD_READ_TOOLS, "query_paths"],
    "graph-curator-agent": [*OLD_READ_TOOLS, "query_paths", *WRITE_TOOLS],
}
OLD_PROMPT = (
    "You are a knowledge graph assistant for this project. Use the available tools to answer "
    "questions about the knowledge graph -- its entities, relationships, schema, and structure. "
    "Always use tools to look up real data rather than guessing. When presenting results, cite "
    "the entities and relationships you found. If a search returns no results, say so clearly "
    "rather than fabricating an answer."
)
NEW_PROMPT = OLD_PROMPT + (
    " When a question follows relationships -- a fact of a related entity (the capital of the country a "
    "city lies in), an inverse fact (which country has X as its capital), entities related to two others "
    "at once, a list with a condition, each item's own facts, a count, a yes/no or a comparison -- prefer "
    "one query_paths call: the start entities, the hops (relationship types and directions from its "
    "schema) and the result shape; answer from its results and cite the entities on their paths."
)


def _swap(apps, tools_from, tools_to, prompt_from, prompt_to):
    AgentDefinition = apps.get_model("agents", "AgentDefinition")
    for name, tools in tools_from.items():
        for definition in AgentDefinition.objects.filter(name=name):
            fields = []
            if list(definition.tools or []) == tools:
                definition.tools = tools_to[name]
                fields.append("tools")
            if name == "graph-query-agent" and definition.system_prompt == prompt_from:
                definition.system_prompt = prompt_to
                fields.append("system_prompt")
            if fields:
                definition.save(update_fields=fields)


def forward(apps, schema_editor):
    _swap(apps, OLD_TOOLS, NEW_TOOLS, OLD_PROMPT, NEW_PROMPT)


def backward(apps, schema_editor):
    _swap(apps, NEW_TOOLS, OLD_TOOLS, NEW_PROMPT, OLD_PROMPT)


class Migration(migrations.Migration):
    dependencies = [
        ("agents", "0004_agentrun_graph_version"),
    ]

    operations = [migrations.RunPython(forward, backward)]
