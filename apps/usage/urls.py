"""Page routes of the usage statistics."""

from django.urls import path

from apps.usage import views

app_name = "usage"

urlpatterns = [
    path("projects/<uuid:project_id>/usage", views.usage_page, name="page"),
]
