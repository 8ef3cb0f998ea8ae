"""Disable agent definitions whose MCP servers a user could have chosen (issue #11).

Before this, ``mcp_servers`` entries could carry any command (run on the server) or any URL
(reached from the server). Definitions with such an entry, or with a URL the operator's
``KGCHAT_MCP_URL_ALLOWLIST`` does not allow at migration time, are disabled: their entries are
kept for the operator to see and fix in the admin, and turns with them answer an error.
"""

from django.db import migrations, models


def disable_unsafe_mcp_servers(apps, schema_editor):
    from apps.agents.mcp_servers import mcp_servers_problem

    AgentDefinition = apps.get_model("agents", "AgentDefinition")
    for definition in AgentDefinition.objects.exclude(mcp_servers=[]).filter(disabled_reason=""):
        problem = mcp_servers_problem(definition.mcp_servers)
        if problem is None:
            continue
        definition.disabled_reason = (
            f"Disabled by migration agents.0002: {problem}. MCP servers are now an operator's choice: "
            "fix mcp_servers in the admin, then clear this field to enable the definition again."
        )
        definition.save(update_fields=["disabled_reason"])


class Migration(migrations.Migration):
    dependencies = [("agents", "0001_initial")]

    operations = [
        migrations.AddField(
            model_name="agentdefinition",
            name="disabled_reason",
            field=models.TextField(
                blank=True,
                default="",
                help_text="Why this definition may not run. Clear it to enable the definition again.",
            ),
        ),
        migrations.RunPython(disable_unsafe_mcp_servers, migrations.RunPython.noop),
    ]
