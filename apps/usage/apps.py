from django.apps import AppConfig


class UsageConfig(AppConfig):
    """Usage statistics of a project (turns, tokens, cost, tool errors, feedback): reads chat and agents."""

    name = "apps.usage"
    label = "usage"
