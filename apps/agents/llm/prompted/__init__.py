"""Parts of the small-model agent loop (``apps.agents.llm.prompted_tools``)."""
