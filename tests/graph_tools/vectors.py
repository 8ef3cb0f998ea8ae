"""What the graph tests read about stored vectors (they live in kb.graph_object_embeddings)."""

from apps.graph_tools.models import GraphObject, GraphObjectEmbedding
from apps.projects.models import Project


def vector_models(project: Project, key: str) -> list[str]:
    """The models an entity has a stored vector of ([] while it waits for the embedding worker)."""
    entity = GraphObject.objects.get(project=project, key=key)
    return list(
        GraphObjectEmbedding.objects.filter(object=entity).order_by("model").values_list("model", flat=True)
    )
