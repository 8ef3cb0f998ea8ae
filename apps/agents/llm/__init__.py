"""LLM providers behind one protocol (``base``), and ``resolve_model`` to pick one by name."""
