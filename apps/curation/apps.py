from django.apps import AppConfig


class CurationConfig(AppConfig):
    """Curating a project's graph by hand (#51): its pages, the queues of what needs care, and edits,
    merges and undos proposed as reviewed change sets. Reads chat (the answers that cite an entity)
    and documents (the passages that mention it, the change sets it proposes).

    At start-up it adds its queues (``queues.queue_register``) and the read-only tool
    ``curation_queue`` to the one registry of graph tools, so agents and MCP clients read them too."""

    name = "apps.curation"
    label = "curation"

    def ready(self) -> None:
        from apps.curation.duplicates import duplicates_read
        from apps.curation.queues import orphans_read, queue_register, unsupported_read
        from apps.curation.review import curation_decide
        from apps.curation.tools import tools_register
        from apps.documents.models import ChangeSetKind
        from apps.documents.review import change_set_decider_register

        change_set_decider_register(ChangeSetKind.CURATION, curation_decide)
        queue_register("orphans", orphans_read)
        queue_register("duplicates", duplicates_read)
        queue_register("unsupported", unsupported_read)
        tools_register()
