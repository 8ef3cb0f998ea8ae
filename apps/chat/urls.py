"""Page routes of the chat app (PROTOCOL §5)."""

from django.urls import path

from apps.chat import share_views, views

app_name = "chat"

urlpatterns = [
    path("", views.index, name="index"),
    path("chat/", views.chat_page, name="new"),
    path("chat/<uuid:conversation_id>/", views.chat_page, name="conversation"),
    path("share/<str:token>", share_views.share_page, name="share"),
]
