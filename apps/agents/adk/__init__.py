"""The adapter between Google ADK and this app: model adapter, session service, events adapter."""
