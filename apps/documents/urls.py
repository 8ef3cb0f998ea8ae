"""Page routes of a project's documents."""

from django.urls import path

from apps.documents import views

app_name = "documents"

urlpatterns = [
    path(
        "projects/<uuid:project_id>/documents/<uuid:document_id>/mentions",
        views.mentions_page,
        name="mentions",
    ),
]
