"""The knowledge graph: entities (``kb.graph_objects``) and relationships (``kb.graph_relationships``)."""

from __future__ import annotations

import uuid

from django.contrib.postgres.indexes import GinIndex
from django.contrib.postgres.search import SearchVector, SearchVectorField
from django.db import models
from django.db.models.functions import Left
from pgvector.django import VectorField

from apps.projects.models import Project

# The text search configuration for full-text search. 'simple' would not stem; 'english'
# stems and drops stop words, which suits the descriptions people write.
TEXT_SEARCH_CONFIG = "english"

# Full-text search reads the first this many characters of a description. PostgreSQL refuses a
# tsvector whose lexemes exceed 1 MB ("string is too long for tsvector"), which a long enough
# description reaches; capped, 100,000 characters hold at most 400 kB of lexemes. The whole
# description is still stored, shown and embedded.
SEARCH_DESCRIPTION_CHARS = 100_000


class GraphObject(models.Model):
    id = models.UUIDField(primary_key=True, default=uuid.uuid4, editable=False)
    project = models.ForeignKey(Project, on_delete=models.CASCADE, related_name="graph_objects")
    key = models.CharField(max_length=512)
    type = models.CharField(max_length=128)
    name = models.CharField(max_length=512)
    description = models.TextField(blank=True, default="")
    properties = models.JSONField(default=dict, blank=True)
    # Dimension-free column: the model and dimension that produced a vector are recorded beside
    # it, and searches only compare vectors of the configured model (see apps.graph_tools.embeddings).
    embedding = VectorField(null=True, blank=True)
    embedding_model = models.CharField(max_length=200, blank=True, default="")
    search_vector = models.GeneratedField(
        expression=SearchVector("name", weight="A", config=TEXT_SEARCH_CONFIG)
        + SearchVector(Left("description", SEARCH_DESCRIPTION_CHARS), weight="B", config=TEXT_SEARCH_CONFIG),
        output_field=SearchVectorField(),
        db_persist=True,
    )
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        db_table = 'kb"."graph_objects'
        constraints = [
            models.UniqueConstraint(fields=["project", "key"], name="uniq_graph_object_project_key")
        ]
        indexes = [
            models.Index(fields=["project", "type"], name="graph_obj_project_type"),
            models.Index(fields=["project", "updated_at"], name="graph_obj_project_updated"),
            # The GIN indexes' pending lists are bounded to 256 kB (migration 0006).
            GinIndex(fields=["search_vector"], name="graph_obj_search_vector"),
            GinIndex(fields=["name"], opclasses=["gin_trgm_ops"], name="graph_obj_name_trgm"),
        ]

    def __str__(self) -> str:
        return f"{self.type}:{self.key}"


class GraphRelationship(models.Model):
    id = models.UUIDField(primary_key=True, default=uuid.uuid4, editable=False)
    project = models.ForeignKey(Project, on_delete=models.CASCADE, related_name="graph_relationships")
    type = models.CharField(max_length=128)
    src = models.ForeignKey(GraphObject, on_delete=models.CASCADE, related_name="out_relationships")
    dst = models.ForeignKey(GraphObject, on_delete=models.CASCADE, related_name="in_relationships")
    properties = models.JSONField(default=dict, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        db_table = 'kb"."graph_relationships'
        constraints = [
            models.UniqueConstraint(fields=["src", "type", "dst"], name="uniq_graph_rel_src_type_dst"),
        ]
        indexes = [
            models.Index(fields=["src", "type"], name="graph_rel_src_type"),
            models.Index(fields=["dst", "type"], name="graph_rel_dst_type"),
            models.Index(fields=["project", "type"], name="graph_rel_project_type"),
            models.Index(fields=["project", "updated_at"], name="graph_rel_project_updated"),
        ]

    def __str__(self) -> str:
        return f"{self.src_id} -{self.type}-> {self.dst_id}"


# Per-project summaries for the whole-graph tools (list_entity_types, schema_version,
# list_relationships), kept exact by statement-level triggers on the two tables above (migration
# 0005), so every way of writing the graph keeps them right: import, admin, ORM, raw SQL. Never
# written by the application. ``project_id`` is a plain column, not a foreign key: the triggers
# empty a project's rows as its entities and relationships are deleted.


class EntityTypeCount(models.Model):
    """How many entities of each type a project has (rows with a zero count are removed)."""

    pk = models.CompositePrimaryKey("project_id", "type")
    project_id = models.UUIDField()
    type = models.CharField(max_length=128)
    count = models.BigIntegerField()

    class Meta:
        db_table = 'kb"."graph_entity_type_counts'

    def __str__(self) -> str:
        return f"{self.type}: {self.count}"


class RelationshipTypeCount(models.Model):
    """How many relationships of each type join entities of each pair of types, per project."""

    pk = models.CompositePrimaryKey("project_id", "type", "src_type", "dst_type")
    project_id = models.UUIDField()
    type = models.CharField(max_length=128)
    src_type = models.CharField(max_length=128)
    dst_type = models.CharField(max_length=128)
    count = models.BigIntegerField()

    class Meta:
        db_table = 'kb"."graph_relationship_type_counts'

    def __str__(self) -> str:
        return f"{self.src_type} -{self.type}-> {self.dst_type}: {self.count}"
