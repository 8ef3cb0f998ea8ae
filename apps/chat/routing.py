"""Websocket routes of the chat app."""

websocket_urlpatterns: list = []
