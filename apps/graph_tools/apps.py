from django.apps import AppConfig


class GraphToolsConfig(AppConfig):
    name = "apps.graph_tools"
    label = "graph_tools"
    verbose_name = "Knowledge graph"

    def ready(self) -> None:
        from apps.core.jobs import batch_step_register
        from apps.graph_tools.embeddings import pending_batch_embed
        from apps.graph_tools.ontology.tools import ontology_tools_register
        from apps.graph_tools.tools import tools_register

        tools_register()
        ontology_tools_register()
        # The background worker embeds the entities waiting for a vector first (apps.core.jobs).
        batch_step_register("entity_embedding", pending_batch_embed)
