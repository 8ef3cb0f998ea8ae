from django.contrib import admin
from django.urls import include, path, re_path

from apps.chat.transports import openai_api
from config.api import api

urlpatterns = [
    path("admin/", admin.site.urls),
    path("accounts/", include("django.contrib.auth.urls")),
    path("api/", api.urls),
    # The OpenAI-compatible endpoint (docs/protocol.md, "/v1"); anything else under /v1 answers
    # OpenAI's error shape too.
    path("v1/models", openai_api.models),
    path("v1/models/<path:model_id>", openai_api.model),
    path("v1/chat/completions", openai_api.chat_completions),
    re_path(r"^v1(?:/.*)?$", openai_api.unknown),
    path("", include("apps.projects.urls")),
    path("", include("apps.chat.urls")),
    path("", include("apps.usage.urls")),
    path("", include("apps.documents.urls")),
    path("", include("apps.curation.urls")),
]
