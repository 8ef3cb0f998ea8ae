from django.contrib import admin
from django.urls import include, path

from config.api import api

urlpatterns = [
    path("admin/", admin.site.urls),
    path("accounts/", include("django.contrib.auth.urls")),
    path("api/", api.urls),
    path("", include("apps.projects.urls")),
    path("", include("apps.chat.urls")),
    path("", include("apps.usage.urls")),
    path("", include("apps.documents.urls")),
]
