"""Documents (issue #26): uploaded files, their passages (searched and cited), the mention index, and
the change sets their extraction proposes. The ``documents`` app's models since #48 (formerly the
``graph_tools`` app's: the tables kept their names, ``migrations/0001_initial.py``)."""

from __future__ import annotations

import uuid

from django.conf import settings
from django.contrib.postgres.indexes import GinIndex
from django.contrib.postgres.search import SearchVectorField
from django.db import models
from django.db.models.functions import Left
from pgvector.django import VectorField

from apps.graph_tools.text_search import SEARCH_DESCRIPTION_CHARS, text_search_vector
from apps.projects.models import Project

# Documents (issue 26): an uploaded file's text, split into passages that are searched (full text
# and vectors) and cited. A document is named within its project; uploading the same name again
# keeps every passage whose text is unchanged (``documents/services.py``).


class DocumentFormat(models.TextChoices):
    TEXT = "text", "Plain text"
    MARKDOWN = "markdown", "Markdown"
    HTML = "html", "HTML (text only)"
    PDF = "pdf", "PDF"
    DOCX = "docx", "Word (.docx)"
    PPTX = "pptx", "PowerPoint (.pptx)"
    XLSX = "xlsx", "Excel (.xlsx)"
    CSV = "csv", "CSV"
    IMAGE = "image", "Image (OCR)"


class Document(models.Model):
    """An uploaded file: its name in the project, format, SHA-256 of its bytes and extracted text.

    Passages point into ``text`` by character offsets; the file's bytes are not kept.
    """

    id = models.UUIDField(primary_key=True, default=uuid.uuid4, editable=False)
    project = models.ForeignKey(Project, on_delete=models.CASCADE, related_name="documents")
    name = models.CharField(max_length=300)
    format = models.CharField(max_length=16, choices=DocumentFormat.choices)
    content_hash = models.CharField(max_length=64)
    size_bytes = models.BigIntegerField()
    # How many pages a PDF has, slides a presentation, sheets a workbook (1 for an image); null otherwise.
    page_count = models.IntegerField(null=True, blank=True)
    text = models.TextField()
    uploaded_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.SET_NULL, null=True, blank=True, related_name="+"
    )
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        db_table = 'kb"."documents'
        constraints = [models.UniqueConstraint(fields=["project", "name"], name="uniq_document_project_name")]
        indexes = [models.Index(fields=["project", "-updated_at"], name="document_project_updated")]

    def __str__(self) -> str:
        return self.name


class Passage(models.Model):
    """A passage of a document's text: its position (character offsets into ``Document.text``, the
    page of a PDF), the SHA-256 of its text (what a re-upload compares), full-text indexed and
    waiting for a vector while ``embedding_pending``."""

    id = models.UUIDField(primary_key=True, default=uuid.uuid4, editable=False)
    project = models.ForeignKey(Project, on_delete=models.CASCADE, related_name="+")
    document = models.ForeignKey(Document, on_delete=models.CASCADE, related_name="passages")
    ordinal = models.IntegerField()
    text = models.TextField()
    content_hash = models.CharField(max_length=64)
    char_start = models.IntegerField()
    char_end = models.IntegerField()
    page = models.IntegerField(null=True, blank=True)
    # Read by OCR (a scanned PDF page, an image): the engine's mean word confidence, 0 to 1; null for
    # text the file held as text (#50).
    ocr_confidence = models.FloatField(null=True, blank=True)
    embedding_pending = models.BooleanField(default=True, db_default=True)
    # Extraction (``documents/extraction/``): "" (never asked), pending, done, failed (skipped
    # after ``EXTRACTION_ATTEMPTS``). ``extracted`` is the model's entities and relationships; a
    # passage whose text is unchanged keeps them across re-uploads.
    extraction_state = models.CharField(max_length=16, blank=True, default="")
    extraction_attempts = models.IntegerField(default=0)
    extraction_error = models.TextField(blank=True, default="")
    # Not claimed again before this time: a worker's lease while it asks the model, or a backoff.
    extraction_not_before = models.DateTimeField(null=True, blank=True)
    extracted = models.JSONField(null=True, blank=True)
    search_vector = models.GeneratedField(
        expression=text_search_vector(Left("text", SEARCH_DESCRIPTION_CHARS)),
        output_field=SearchVectorField(),
        db_persist=True,
    )
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        db_table = 'kb"."document_passages'
        ordering = ["document", "ordinal"]
        indexes = [
            models.Index(fields=["document", "ordinal"], name="passage_document_ordinal"),
            models.Index(fields=["document", "content_hash"], name="passage_document_hash"),
            GinIndex(fields=["search_vector"], name="passage_search_vector"),
            models.Index(
                fields=["project"], condition=models.Q(embedding_pending=True), name="passage_embed_pending"
            ),
            models.Index(
                fields=["extraction_not_before"],
                condition=models.Q(extraction_state="pending"),
                name="passage_extract_pending",
            ),
        ]

    def __str__(self) -> str:
        return f"{self.document_id}#{self.ordinal}"


class PassageEmbedding(models.Model):
    """A passage's vector from one embedding model (as ``GraphObjectEmbedding`` is an entity's)."""

    pk = models.CompositePrimaryKey("passage_id", "model")
    passage = models.ForeignKey(Passage, on_delete=models.CASCADE, related_name="embeddings", db_index=False)
    project = models.ForeignKey(Project, on_delete=models.CASCADE, related_name="+", db_index=False)
    model = models.CharField(max_length=200)
    embedding = VectorField()

    class Meta:
        db_table = 'kb"."document_passage_embeddings'
        indexes = [models.Index(fields=["project", "model"], name="passage_emb_project_model")]

    def __str__(self) -> str:
        return f"{self.passage_id} ({self.model})"


class ExtractionSettings(models.Model):
    """A project's extraction settings: may the model propose types the graph does not have yet, and
    are extractions from an owner's own uploads applied without review (audited as such)."""

    project = models.OneToOneField(Project, on_delete=models.CASCADE, primary_key=True, related_name="+")
    allow_new_types = models.BooleanField(default=False)
    owners_auto_approve = models.BooleanField(default=False)

    class Meta:
        db_table = 'kb"."extraction_settings'

    def __str__(self) -> str:
        return f"{self.project_id}"


class ExtractionStatus(models.TextChoices):
    RUNNING = "running", "Running"
    REVIEW = "review", "Waiting for review"
    APPLIED = "applied", "Decided"
    EMPTY = "empty", "Nothing found"


class ChangeSetKind(models.TextChoices):
    EXTRACTION = "extraction", "Extraction from a document"
    CURATION = "curation", "Curation by a member"


class ChangeSet(models.Model):
    """Proposed changes of the graph (``ChangeSetItem``) reviewed as one set: one extraction of a
    document (its passages asked of the model, then the proposals), or a curation change set (#51,
    ``apps/curation/proposals.py``: a member's edits, merges or an undo, with no document)."""

    id = models.UUIDField(primary_key=True, default=uuid.uuid4, editable=False)
    project = models.ForeignKey(Project, on_delete=models.CASCADE, related_name="+")
    kind = models.CharField(max_length=16, choices=ChangeSetKind.choices, default=ChangeSetKind.EXTRACTION)
    document = models.ForeignKey(
        Document, on_delete=models.CASCADE, null=True, blank=True, related_name="change_sets"
    )
    # What a curation change set is for, in its author's words.
    summary = models.TextField(blank=True, default="")
    # The applied change set whose inverse this one proposes (``curation_undo``).
    undoes = models.ForeignKey(
        "self", on_delete=models.SET_NULL, null=True, blank=True, related_name="undone_by"
    )
    status = models.CharField(
        max_length=16, choices=ExtractionStatus.choices, default=ExtractionStatus.RUNNING
    )
    model = models.CharField(max_length=200, blank=True, default="")
    passage_ids = models.JSONField(default=list)
    requested_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.SET_NULL, null=True, blank=True, related_name="+"
    )
    auto_approve = models.BooleanField(default=False)
    decided_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.SET_NULL, null=True, blank=True, related_name="+"
    )
    decided_at = models.DateTimeField(null=True, blank=True)
    graph_version = models.BigIntegerField(null=True, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        db_table = 'kb"."extraction_change_sets'
        ordering = ["-created_at"]
        indexes = [
            models.Index(fields=["status"], name="change_set_status"),
            models.Index(fields=["project", "kind", "status", "-created_at"], name="change_set_project_kind"),
        ]

    def __str__(self) -> str:
        return f"{self.kind} {self.document_id or ''} ({self.status})"


class ChangeSetItem(models.Model):
    """One proposed change of a change set, naming the passage it came from.

    A curation change set's items are write tool calls: ``action`` the tool (``update_entity``,
    ``delete_entity``, ``create_relationship``, ``merge_entities``, …), ``values`` its arguments,
    ``evidence`` the plan shown at proposal time, ``result`` the tool's result once applied.

    An extraction's ``action``: ``create_entity``, ``link_entity`` (the mention is an existing entity: nothing to
    write, its relationships use it), ``merge_entity`` (a near match: used as the existing entity
    unless the reviewer rejects it, then created), ``create_relationship``. ``evidence`` says why.
    """

    id = models.BigAutoField(primary_key=True)
    change_set = models.ForeignKey(ChangeSet, on_delete=models.CASCADE, related_name="items")
    passage = models.ForeignKey(Passage, on_delete=models.SET_NULL, null=True, blank=True, related_name="+")
    ordinal = models.IntegerField()
    action = models.CharField(max_length=32)
    values = models.JSONField(default=dict)
    entity_id = models.UUIDField(null=True, blank=True)
    evidence = models.JSONField(default=dict)
    status = models.CharField(max_length=16, default="pending")
    result = models.JSONField(null=True, blank=True)

    class Meta:
        db_table = 'kb"."extraction_change_set_items'
        ordering = ["change_set", "ordinal"]

    def __str__(self) -> str:
        return f"{self.action} {self.values}"


# The mention index (issue #48): what each passage names, found without a model
# (``graph_tools/recognizer.py``), stored as rows beside the graph, never as graph facts.
class MentionName(models.Model):
    """A name the project's passages mention, one per project and ``normalised`` key: linked to the
    entity of the graph it names (by name or alias) when there is one, else a candidate for a new
    entity. The walk of ``documents/walk.py`` goes from passage to passage through these."""

    id = models.UUIDField(primary_key=True, default=uuid.uuid4, editable=False)
    project = models.ForeignKey(Project, on_delete=models.CASCADE, related_name="+")
    normalised = models.TextField()
    # The spelling of its first mention.
    name = models.TextField()
    entity = models.ForeignKey(
        "graph_tools.GraphObject", null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        db_table = 'kb"."mention_names'
        constraints = [
            models.UniqueConstraint(fields=["project", "normalised"], name="mention_name_project_normalised")
        ]
        indexes = [
            GinIndex(fields=["normalised"], opclasses=["gin_trgm_ops"], name="mention_name_trgm"),
            models.Index(fields=["entity"], name="mention_name_entity"),
        ]

    def __str__(self) -> str:
        return self.name


class PassageMention(models.Model):
    """One mention in a passage: where (character offsets into the passage's text), as written,
    its kind (``title``, ``name``, ``quoted``, ``date``) and the name it is a mention of."""

    id = models.BigAutoField(primary_key=True)
    project = models.ForeignKey(Project, on_delete=models.CASCADE, related_name="+")
    passage = models.ForeignKey(Passage, on_delete=models.CASCADE, related_name="mentions")
    mention_name = models.ForeignKey(MentionName, on_delete=models.CASCADE, related_name="mentions")
    surface = models.TextField()
    kind = models.CharField(max_length=16)
    char_start = models.IntegerField()
    char_end = models.IntegerField()

    class Meta:
        db_table = 'kb"."passage_mentions'
        ordering = ["passage", "char_start"]
        indexes = [
            models.Index(fields=["passage", "char_start"], name="passage_mention_passage"),
            models.Index(fields=["mention_name", "passage"], name="passage_mention_name"),
        ]

    def __str__(self) -> str:
        return f"{self.surface} ({self.kind})"
