from django.apps import AppConfig


class AgentsConfig(AppConfig):
    name = "apps.agents"
    label = "agents"
    verbose_name = "Agents"

    def ready(self) -> None:
        from apps.agents import checks  # noqa: F401  (registers the MCP settings check)
        from apps.agents.extraction import extraction_step
        from apps.graph_tools.jobs import job_step_register

        # Document extraction runs in the one background worker (manage.py embed_worker).
        job_step_register("document_extraction", extraction_step)
