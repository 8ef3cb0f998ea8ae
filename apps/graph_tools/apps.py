from django.apps import AppConfig


class GraphToolsConfig(AppConfig):
    name = "apps.graph_tools"
    label = "graph_tools"
    verbose_name = "Knowledge graph"

    def ready(self) -> None:
        from apps.graph_tools.tools import tools_register

        tools_register()
