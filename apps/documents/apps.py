from django.apps import AppConfig


class DocumentsConfig(AppConfig):
    """Uploaded documents, their passages, the mention index and extraction's change sets (#48: an
    app of their own, formerly ``graph_tools.documents``; the ``kb.`` tables kept their names).

    It sits above ``agents`` and ``graph_tools`` and plugs into them at start-up, so neither imports
    it: ``search_passages`` joins the one tool registry, and the background worker
    (``apps.core.jobs``) embeds passages when no entity waits for a vector and runs a step of
    extraction each round. It reaches a model only through ``apps.agents.structured``."""

    name = "apps.documents"
    label = "documents"
    verbose_name = "Documents"

    def ready(self) -> None:
        from apps.core.jobs import batch_step_register, job_step_register
        from apps.documents.embeddings import PASSAGE_VECTOR_TABLE, pending_passages_embed
        from apps.documents.extraction.step import extraction_step
        from apps.documents.mention_index import MENTION_NAMES_FOLLOW_MERGES
        from apps.documents.tools import tools_register
        from apps.graph_tools.embeddings import vector_table_register
        from apps.graph_tools.merges import merge_follower_register

        tools_register()
        batch_step_register("passage_embedding", pending_passages_embed)
        vector_table_register(PASSAGE_VECTOR_TABLE)
        job_step_register("document_extraction", extraction_step)
        merge_follower_register(MENTION_NAMES_FOLLOW_MERGES)
