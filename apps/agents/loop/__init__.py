"""The small-model agent loop: an agent turn for models without reliable native tool calls.

``turn.SmallModelTurn`` runs the turn's steps (the executor chooses it, ``turn.turn_steps``, with the
turn's project); ``model_requests`` are its requests to the model, ``schema`` the forced first
step's JSON Schema, ``holdback`` finds a call in free text while it streams, ``layout`` and
``prompt`` are what the model reads, ``lookups`` the loop's own look-ups of the entities a question
names and ``cards`` what the model reads of them. A planned turn: ``plan_graph``, ``plan``,
``grammar``, ``word_relationships``, ``candidates``, ``planned`` and ``plan_turn``; the documents,
read hop by hop: ``reading``.
"""
