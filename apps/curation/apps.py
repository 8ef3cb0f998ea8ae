from django.apps import AppConfig


class CurationConfig(AppConfig):
    """Curating a project's graph by hand (#51): its pages, the queues of what needs care, and edits,
    merges and undos proposed as reviewed change sets. Reads chat (the answers that cite an entity)
    and documents (the passages that mention it, the change sets it proposes)."""

    name = "apps.curation"
    label = "curation"

    def ready(self) -> None:
        from apps.curation.review import curation_decide
        from apps.documents.models import ChangeSetKind
        from apps.documents.review import change_set_decider_register

        change_set_decider_register(ChangeSetKind.CURATION, curation_decide)
