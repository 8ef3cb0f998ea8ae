"""The small-model agent loop: tool calls for models without reliable native ones.

``provider.PromptedToolsProvider`` wraps an OpenAI-compatible provider and runs each agent step;
``schema`` is the forced first step's JSON Schema, ``holdback`` finds a call in free text while it
streams, ``layout`` and ``prompt`` are what the model reads, ``lookups`` are the loop's own look-ups
of the entities a question names and the entity cards made from them.
"""
