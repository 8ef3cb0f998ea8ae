"""The knowledge graph: entities (``kb.graph_objects``) and relationships (``kb.graph_relationships``)."""

from __future__ import annotations

import uuid

from django.conf import settings
from django.contrib.postgres.indexes import GinIndex
from django.contrib.postgres.search import SearchVectorField
from django.db import models
from django.db.models.functions import Left, Lower
from pgvector.django import VectorField

from apps.graph_tools.text_search import SEARCH_DESCRIPTION_CHARS, text_search_vector
from apps.projects.models import Project


class GraphObject(models.Model):
    id = models.UUIDField(primary_key=True, default=uuid.uuid4, editable=False)
    project = models.ForeignKey(Project, on_delete=models.CASCADE, related_name="graph_objects")
    key = models.CharField(max_length=512)
    type = models.CharField(max_length=128)
    name = models.CharField(max_length=512)
    description = models.TextField(blank=True, default="")
    properties = models.JSONField(default=dict, blank=True)
    # True while the entity waits for a vector (new, or its embedded text changed): the background
    # worker's queue. The vectors themselves are rows of GraphObjectEmbedding, one per model.
    embedding_pending = models.BooleanField(default=True, db_default=True)
    search_vector = models.GeneratedField(
        expression=text_search_vector("name", weight="A")
        + text_search_vector(Left("description", SEARCH_DESCRIPTION_CHARS), weight="B"),
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
            # Entities by name, case aside: the starts of query_paths ("Benin", "the godfather").
            models.Index(models.F("project"), Lower("name"), name="graph_obj_project_lname"),
            # The GIN indexes' pending lists are bounded to 256 kB (migration 0006).
            GinIndex(fields=["search_vector"], name="graph_obj_search_vector"),
            GinIndex(fields=["name"], opclasses=["gin_trgm_ops"], name="graph_obj_name_trgm"),
            # The background embedding queue: entities waiting for a vector (embeddings.pending_batch_embed).
            models.Index(
                fields=["project"], condition=models.Q(embedding_pending=True), name="graph_obj_embed_pending"
            ),
        ]

    def __str__(self) -> str:
        return f"{self.type}:{self.key}"


class GraphObjectEmbedding(models.Model):
    """An entity's vector from one embedding model (migration 0010 moved it out of the entity row).

    In the entity row the 1.5 kB vector made a row of ~1.9 kB, so at 1M entities every ranked
    full-text match or trigram recheck was a random read of a heap five times larger than it needs
    to be. The vector column is dimension-free: searches compare only vectors of the configured
    model, through a partial HNSW index per model on ``embedding::vector(<dim>)``
    (``embeddings.vector_index_ensure``). ``project`` is repeated here so a vector search filters
    without visiting the entity. The foreign keys cascade in the database too (migration 0010),
    so a raw ``DELETE`` of entities or projects takes their vectors along.
    """

    pk = models.CompositePrimaryKey("object_id", "model")
    object = models.ForeignKey(
        GraphObject, on_delete=models.CASCADE, related_name="embeddings", db_index=False
    )
    project = models.ForeignKey(Project, on_delete=models.CASCADE, related_name="+", db_index=False)
    model = models.CharField(max_length=200)
    embedding = VectorField()

    class Meta:
        db_table = 'kb"."graph_object_embeddings'
        indexes = [models.Index(fields=["project", "model"], name="graph_emb_project_model")]

    def __str__(self) -> str:
        return f"{self.object_id} ({self.model})"


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


class GraphVersion(models.Model):
    """A project's graph version: bumped by every import and every write tool, in their transaction.

    ``graph_version_bump`` increments it with one ``INSERT … ON CONFLICT DO UPDATE``, which locks the
    row until the transaction ends, so versions are gap-free per project and writers take turns.
    """

    project = models.OneToOneField(Project, on_delete=models.CASCADE, primary_key=True, related_name="+")
    version = models.BigIntegerField(default=0)

    class Meta:
        db_table = 'kb"."graph_versions'

    def __str__(self) -> str:
        return f"{self.project_id}: {self.version}"


# The change actions of an import: (action, label, how an entity's history says it). Every write
# tool adds its own (``apps/graph_tools/writes.py``, ``WRITE_KINDS``).
IMPORT_ENTITY = "import_entity"
IMPORT_RELATIONSHIP = "import_relationship"
IMPORT_ACTIONS = (
    (IMPORT_ENTITY, "Import entity", "imported"),
    (IMPORT_RELATIONSHIP, "Import relationship", "relationship imported"),
)


class ChangeAuthority(models.TextChoices):
    """On whose word a change was made."""

    APPROVAL = "approval", "Approved by a member"
    POLICY_NEVER = "policy_never", "Agent tool policy 'never'"
    DIRECT = "direct", "Direct call by the member (operator setting)"
    IMPORT = "import", "Graph import"
    EXTRACTION = "extraction", "Extraction from a document, approved by a member"
    EXTRACTION_AUTO = "extraction_auto", "Extraction from an owner's upload, approved by the project setting"
    CURATION = "curation", "Curation change set, approved by a member"


class ApprovalStatus(models.TextChoices):
    PENDING = "pending", "Pending"
    APPROVED = "approved", "Approved"
    REJECTED = "rejected", "Rejected"
    EXPIRED = "expired", "Expired"


class WriteApproval(models.Model):
    """A write tool call an agent proposed, waiting for (or past) a member's decision.

    The run, conversation and agent definition belong to layers above this one: ids only.
    """

    id = models.UUIDField(primary_key=True, default=uuid.uuid4, editable=False)
    project = models.ForeignKey(Project, on_delete=models.CASCADE, related_name="write_approvals")
    tool_name = models.CharField(max_length=100)
    arguments = models.JSONField(default=dict)
    diff = models.JSONField(default=dict)
    status = models.CharField(max_length=16, choices=ApprovalStatus.choices, default=ApprovalStatus.PENDING)
    run_id = models.UUIDField(null=True, blank=True)
    conversation_id = models.UUIDField(null=True, blank=True)
    agent_definition_id = models.UUIDField(null=True, blank=True)
    call_id = models.CharField(max_length=200, blank=True, default="")
    requested_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.SET_NULL, null=True, blank=True, related_name="+"
    )
    decided_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.SET_NULL, null=True, blank=True, related_name="+"
    )
    decided_at = models.DateTimeField(null=True, blank=True)
    reason = models.TextField(blank=True, default="")
    # What applying the approved write returned: the tool result, or {"error", "code"}.
    result = models.JSONField(null=True, blank=True)
    expires_at = models.DateTimeField()
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        db_table = 'kb"."graph_write_approvals'
        ordering = ["-created_at"]
        indexes = [
            models.Index(fields=["project", "status", "expires_at"], name="graph_approval_status"),
            models.Index(fields=["conversation_id", "status"], name="graph_approval_conversation"),
        ]

    def __str__(self) -> str:
        return f"{self.tool_name} ({self.status})"


class GraphChange(models.Model):
    """One change of one entity or relationship: the audit trail and the "changed since" index.

    Entities and relationships are named by id (not foreign keys: the row outlives a deletion).
    A relationship change also names both ends, so "which of these entities changed since version
    N" finds edges added to or removed from them.
    """

    id = models.BigAutoField(primary_key=True)
    project = models.ForeignKey(Project, on_delete=models.CASCADE, related_name="graph_changes")
    version = models.BigIntegerField()
    # A write tool's name or an import's action (``writes.change_action_choices`` lists them with their
    # labels; no choices here: the write tools import this module, and a new tool needs no migration).
    action = models.CharField(max_length=32)
    entity_id = models.UUIDField(null=True, blank=True)
    relationship_id = models.UUIDField(null=True, blank=True)
    src_id = models.UUIDField(null=True, blank=True)
    dst_id = models.UUIDField(null=True, blank=True)
    user = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.SET_NULL, null=True, blank=True, related_name="+"
    )
    authority = models.CharField(max_length=16, choices=ChangeAuthority.choices)
    approval = models.ForeignKey(
        WriteApproval, on_delete=models.SET_NULL, null=True, blank=True, related_name="changes"
    )
    run_id = models.UUIDField(null=True, blank=True)
    # A change extracted from a document: the document and the passage it came from (ids: the audit
    # outlives them).
    document_id = models.UUIDField(null=True, blank=True)
    passage_id = models.UUIDField(null=True, blank=True)
    before = models.JSONField(null=True, blank=True)
    after = models.JSONField(null=True, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        db_table = 'kb"."graph_changes'
        ordering = ["-version", "-id"]
        indexes = [
            models.Index(fields=["project", "version"], name="graph_change_project_version"),
            models.Index(fields=["entity_id", "version"], name="graph_change_entity_version"),
            models.Index(fields=["src_id", "version"], name="graph_change_src_version"),
            models.Index(fields=["dst_id", "version"], name="graph_change_dst_version"),
            models.Index(fields=["project", "action", "-created_at"], name="graph_change_project_action"),
        ]

    def __str__(self) -> str:
        return f"v{self.version} {self.action}"


class GraphWriteKey(models.Model):
    """A write tool call that ran, by its idempotency key (``WriteAuthorization.idempotency_key``):
    the same call made again (an agent turn resumed in another process after its process died
    between the write and the record of its result) answers this result and writes nothing."""

    key = models.CharField(max_length=300, primary_key=True)
    project = models.ForeignKey(Project, on_delete=models.CASCADE, related_name="+")
    tool_name = models.CharField(max_length=200)
    result = models.JSONField()
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        db_table = 'kb"."graph_write_keys'

    def __str__(self) -> str:
        return f"{self.tool_name} {self.key}"


class EntityRedirect(models.Model):
    """An entity merged into another (``merge_entities``, ``merges.py``): its id and key go on
    leading to the entity it was merged into (an answer's old citation of it opens that entity), and
    ``snapshot`` keeps what undoing the merge (``unmerge_entities``) restores: the entity as it was,
    each of its relationships and what the merge did with it, and the aliases the merge added.

    A row of its own rather than a tombstone in ``graph_objects``: every search, count and walk of
    the graph reads that table and would have to leave tombstones out; a redirect is read only when
    a reference finds no entity. ``into`` is an id, not a foreign key: a later merge of ``into``
    leaves a chain that resolution follows (``selectors.entity_redirect_target``)."""

    merged_id = models.UUIDField(primary_key=True)
    project = models.ForeignKey(Project, on_delete=models.CASCADE, related_name="+")
    merged_key = models.CharField(max_length=512)
    into = models.UUIDField()
    snapshot = models.JSONField(default=dict)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        db_table = 'kb"."graph_entity_redirects'
        indexes = [
            models.Index(fields=["project", "merged_key"], name="graph_redirect_project_key"),
            models.Index(fields=["into"], name="graph_redirect_into"),
        ]

    def __str__(self) -> str:
        return f"{self.merged_id} -> {self.into}"
