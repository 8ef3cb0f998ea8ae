"""Page routes of a project's graph (#51)."""

from django.urls import URLPattern, path

from apps.curation import ontology_views

app_name = "curation"

urlpatterns: list[URLPattern] = [
    path("projects/<uuid:project_id>/ontology", ontology_views.ontology_page, name="ontology"),
]
