from django.apps import AppConfig


class GraphToolsConfig(AppConfig):
    name = "apps.graph_tools"
    label = "graph_tools"
    verbose_name = "Knowledge graph"
