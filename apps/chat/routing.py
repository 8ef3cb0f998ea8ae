"""Websocket routes of the chat app."""

from django.urls import path

from apps.chat.consumers import ChatConsumer

websocket_urlpatterns = [path("ws/chat/", ChatConsumer.as_asgi())]
