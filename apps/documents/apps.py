from django.apps import AppConfig


class DocumentsConfig(AppConfig):
    """Uploaded documents, their passages, the mention index and extraction's change sets (#48: an
    app of their own, formerly ``graph_tools.documents``; the ``kb.`` tables kept their names).

    It sits above ``graph_tools`` and plugs into it at start-up, so ``graph_tools`` never imports it:
    ``search_passages`` joins the one tool registry, and the background worker embeds passages
    when no entity waits for a vector."""

    name = "apps.documents"
    label = "documents"
    verbose_name = "Documents"

    def ready(self) -> None:
        from apps.documents.embeddings import PASSAGE_VECTOR_TABLE, pending_passages_embed
        from apps.documents.tools import tools_register
        from apps.graph_tools.embeddings import vector_table_register
        from apps.graph_tools.jobs import vector_step_register

        tools_register()
        vector_step_register("passage_embedding", pending_passages_embed)
        vector_table_register(PASSAGE_VECTOR_TABLE)
