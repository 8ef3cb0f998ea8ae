"""Websocket routes of the chat app."""

from django.urls import path

from apps.chat.transports.consumers import ChatConsumer

websocket_urlpatterns = [path("ws/chat/", ChatConsumer.as_asgi())]
