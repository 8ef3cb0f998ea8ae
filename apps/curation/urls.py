"""Page routes of a project's graph (#51)."""

from django.urls import URLPattern

app_name = "curation"

urlpatterns: list[URLPattern] = []
