"""Page routes of a project's graph (#51)."""

from django.urls import path

from apps.curation import ontology_views, views

app_name = "curation"

urlpatterns = [
    path("projects/<uuid:project_id>/graph", views.graph_page, name="graph"),
    path("projects/<uuid:project_id>/graph/entities/<uuid:entity_id>", views.entity_page, name="entity"),
    path("projects/<uuid:project_id>/graph/queues", views.queues_page, name="queues"),
    path("projects/<uuid:project_id>/graph/change-sets", views.change_sets_page, name="change_sets"),
    path("projects/<uuid:project_id>/ontology", ontology_views.ontology_page, name="ontology"),
]
