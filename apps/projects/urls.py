"""Page routes of the projects app: the invitation link (PROTOCOL §5)."""

from django.urls import path

from apps.projects import views

app_name = "projects"

urlpatterns = [
    path("invite/<str:token>", views.invitation_page, name="invitation"),
]
