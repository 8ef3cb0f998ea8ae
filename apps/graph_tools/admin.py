from typing import Any

from django.contrib import admin
from django.http import HttpRequest

from apps.graph_tools.models import GraphChange, GraphObject, GraphRelationship, WriteApproval


@admin.register(GraphObject)
class GraphObjectAdmin(admin.ModelAdmin):
    list_display = ["name", "type", "key", "project", "embedding_model", "updated_at"]
    list_filter = ["project", "type"]
    search_fields = ["name", "key", "description"]
    exclude = ["embedding"]
    readonly_fields = ["embedding_model", "created_at", "updated_at"]


@admin.register(GraphRelationship)
class GraphRelationshipAdmin(admin.ModelAdmin):
    list_display = ["src", "type", "dst", "project"]
    list_filter = ["project", "type"]
    raw_id_fields = ["src", "dst"]


class ReadOnlyAdmin(admin.ModelAdmin):
    """Audit rows are written by the services only."""

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False


@admin.register(GraphChange)
class GraphChangeAdmin(ReadOnlyAdmin):
    list_display = ["version", "action", "entity_id", "user", "authority", "run_id", "created_at", "project"]
    list_filter = ["project", "action", "authority", ("user", admin.RelatedOnlyFieldListFilter)]
    search_fields = ["entity_id", "relationship_id", "run_id"]
    list_select_related = ["user", "project"]


@admin.register(WriteApproval)
class WriteApprovalAdmin(ReadOnlyAdmin):
    list_display = [
        "tool_name",
        "status",
        "requested_by",
        "decided_by",
        "decided_at",
        "expires_at",
        "project",
    ]
    list_filter = ["project", "status", "tool_name"]
    list_select_related = ["requested_by", "decided_by", "project"]
