from django.apps import AppConfig


class DocumentsConfig(AppConfig):
    """Uploaded documents, their passages, the mention index and extraction's change sets (#48: an
    app of their own, formerly ``graph_tools.documents``; the ``kb.`` tables kept their names).

    It sits above ``graph_tools`` and plugs into it at start-up, so ``graph_tools`` never imports it:
    ``search_passages`` joins the one tool registry, and the background worker embeds passages
    when no entity waits for a vector, and extraction's step when nothing does. It reaches a model
    only through ``apps.agents.structured``."""

    name = "apps.documents"
    label = "documents"
    verbose_name = "Documents"

    def ready(self) -> None:
        from apps.documents.embeddings import PASSAGE_VECTOR_TABLE, pending_passages_embed
        from apps.documents.extraction.step import extraction_step
        from apps.documents.tools import tools_register
        from apps.graph_tools.embeddings import vector_table_register
        from apps.graph_tools.jobs import job_step_register, vector_step_register

        tools_register()
        vector_step_register("passage_embedding", pending_passages_embed)
        vector_table_register(PASSAGE_VECTOR_TABLE)
        # Document extraction runs in the one background worker (manage.py embed_worker).
        job_step_register("document_extraction", extraction_step)
