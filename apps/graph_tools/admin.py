from django.contrib import admin

from apps.graph_tools.models import GraphObject, GraphRelationship


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
