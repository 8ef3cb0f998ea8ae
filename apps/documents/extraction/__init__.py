"""Extraction as a proposal (issue 26 item 3; one package since #48): a document's passages asked of
a model for the entities and relationships they state, answered as JSON under a schema built from
the project's types, checked against the passage and proposed as one change set to review.

- ``guide.py``: the passage's mentions (the mention index's rows) the model is given (#48);
- ``spec.py``: what the model is asked, the schema and the prompt of one passage;
- ``answers.py``: an answer as the schema and the passage allow it;
- ``queue.py``: starting a document's extraction, the passages' claims (a lease), answers stored,
  failures retried with backoff, progress;
- ``step.py``: the background worker's step (``DocumentsConfig.ready`` registers it), asking the
  model through ``apps.agents.structured``, the one way this app reaches a model;
- ``services.py``: what the REST routes and ``manage.py extract_document`` call.

A change set covers one document's passages not in an earlier change set: a re-uploaded document
with one changed paragraph proposes only what that paragraph says. Resolving the answers to
change-set items is ``documents/change_sets.py``'s, and the review ``documents/review.py``'s.
"""
