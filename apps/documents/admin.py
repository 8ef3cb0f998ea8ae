"""Documents, passages and extraction change sets in the Django admin: read-only lists with their
state, filtered by project and state.

Everything here is written by the services only (upload, the embedding worker, extraction and the
change-set review, each with its checks and audit rows), so no page adds or edits a row. A document
may be deleted, as a member deletes one (its passages and change sets go with it); a passage, a
change set or an item only with its document.
"""

from __future__ import annotations

from typing import Any

from django.contrib import admin
from django.db.models import Count, Q, QuerySet
from django.http import HttpRequest
from django.urls import reverse
from django.utils.html import format_html

from apps.documents.models import ChangeSet, ChangeSetItem, Document, MentionName, Passage, PassageMention

# How much of a long text a list or a page shows.
SNIPPET_CHARS = 120
TEXT_PREVIEW_CHARS = 5000


def _clip(text: str, limit: int) -> str:
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _changelist_link(model: str, query: str, label: str) -> str:
    url = reverse(f"admin:documents_{model}_changelist")
    return format_html('<a href="{}?{}">{}</a>', url, query, label)


class _ViewOnlyAdmin(admin.ModelAdmin):
    def has_add_permission(self, request: HttpRequest) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

    def has_delete_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False


@admin.register(Document)
class DocumentAdmin(_ViewOnlyAdmin):
    list_display = [
        "name",
        "project",
        "format",
        "size_bytes",
        "page_count",
        "passages",
        "passages_pending",
        "uploaded_by",
        "updated_at",
    ]
    list_filter = ["project", "format"]
    search_fields = ["name", "content_hash"]
    list_select_related = ["project", "uploaded_by"]
    fields = readonly_fields = (
        "name",
        "project",
        "format",
        "content_hash",
        "size_bytes",
        "page_count",
        "uploaded_by",
        "created_at",
        "updated_at",
        "passages",
        "passages_pending",
        "change_sets",
        "text_start",
    )

    def get_queryset(self, request: HttpRequest) -> QuerySet[Document]:
        # The text is read only by a document's page (its start).
        return (
            super()
            .get_queryset(request)
            .defer("text")
            .annotate(
                passage_count=Count("passages"),
                pending_count=Count("passages", filter=Q(passages__embedding_pending=True)),
            )
        )

    def has_delete_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return admin.ModelAdmin.has_delete_permission(self, request, obj)

    @admin.display(description="passages", ordering="passage_count")
    def passages(self, obj: Any) -> str:
        return _changelist_link("passage", f"document__id__exact={obj.pk}", str(obj.passage_count))

    @admin.display(description="waiting for a vector", ordering="pending_count")
    def passages_pending(self, obj: Any) -> int:
        return int(obj.pending_count)

    @admin.display(description="change sets")
    def change_sets(self, obj: Any) -> str:
        return _changelist_link("changeset", f"document__id__exact={obj.pk}", "extractions")

    @admin.display(description="text (start)")
    def text_start(self, obj: Any) -> str:
        return _clip(obj.text, TEXT_PREVIEW_CHARS)


@admin.register(Passage)
class PassageAdmin(_ViewOnlyAdmin):
    list_display = [
        "document",
        "ordinal",
        "page",
        "snippet",
        "embedding_pending",
        "extraction_state",
        "extraction_attempts",
        "project",
    ]
    list_filter = ["project", "extraction_state", "embedding_pending"]
    search_fields = ["text"]
    list_select_related = ["document", "project"]
    fields = readonly_fields = (
        "document",
        "project",
        "ordinal",
        "page",
        "char_start",
        "char_end",
        "content_hash",
        "embedding_pending",
        "extraction_state",
        "extraction_attempts",
        "extraction_error",
        "extraction_not_before",
        "extracted",
        "created_at",
        "text",
    )
    ordering = ["document", "ordinal"]

    def get_queryset(self, request: HttpRequest) -> QuerySet[Passage]:
        return super().get_queryset(request).defer("search_vector", "document__text")

    def lookup_allowed(self, lookup: str, value: str, request: HttpRequest | None = None) -> bool:
        # The documents' pages link to their passages.
        return lookup == "document__id__exact" or super().lookup_allowed(lookup, value, request)

    @admin.display(description="text")
    def snippet(self, obj: Any) -> str:
        return _clip(obj.text, SNIPPET_CHARS)


@admin.register(ChangeSet)
class ChangeSetAdmin(_ViewOnlyAdmin):
    list_display = [
        "document",
        "kind",
        "status",
        "project",
        "model",
        "items",
        "auto_approve",
        "requested_by",
        "decided_by",
        "decided_at",
        "graph_version",
        "created_at",
    ]
    list_filter = ["project", "kind", "status", "auto_approve"]
    search_fields = ["document__name", "model", "summary"]
    list_select_related = ["document", "project", "requested_by", "decided_by"]
    fields = readonly_fields = (
        "kind",
        "document",
        "project",
        "summary",
        "undoes",
        "status",
        "model",
        "items",
        "passage_ids",
        "auto_approve",
        "requested_by",
        "decided_by",
        "decided_at",
        "graph_version",
        "created_at",
        "updated_at",
    )

    def get_queryset(self, request: HttpRequest) -> QuerySet[ChangeSet]:
        return super().get_queryset(request).defer("document__text").annotate(item_count=Count("items"))

    def lookup_allowed(self, lookup: str, value: str, request: HttpRequest | None = None) -> bool:
        return lookup == "document__id__exact" or super().lookup_allowed(lookup, value, request)

    @admin.display(description="items", ordering="item_count")
    def items(self, obj: Any) -> str:
        return _changelist_link("changesetitem", f"change_set__id__exact={obj.pk}", str(obj.item_count))


@admin.register(ChangeSetItem)
class ChangeSetItemAdmin(_ViewOnlyAdmin):
    list_display = ["ordinal", "action", "status", "proposal", "change_set", "passage", "entity_id"]
    list_filter = [("change_set__project", admin.RelatedOnlyFieldListFilter), "status", "action"]
    search_fields = ["values", "change_set__document__name"]
    list_select_related = ["change_set__document"]
    fields = readonly_fields = (
        "change_set",
        "ordinal",
        "action",
        "status",
        "values",
        "entity_id",
        "evidence",
        "passage",
        "result",
    )
    ordering = ["change_set", "ordinal"]

    def get_queryset(self, request: HttpRequest) -> QuerySet[ChangeSetItem]:
        return super().get_queryset(request).defer("change_set__document__text")

    def lookup_allowed(self, lookup: str, value: str, request: HttpRequest | None = None) -> bool:
        return lookup == "change_set__id__exact" or super().lookup_allowed(lookup, value, request)

    @admin.display(description="proposed")
    def proposal(self, obj: Any) -> str:
        values = obj.values or {}
        if obj.action == "create_relationship":
            return f"#{values.get('source')} {values.get('type')} #{values.get('target')}"
        return f"{values.get('type', '')} {values.get('name', '')}".strip()


@admin.register(PassageMention)
class PassageMentionAdmin(_ViewOnlyAdmin):
    """The mention index (issue #48): what each passage names, read-only like the rest."""

    list_display = ["surface", "kind", "mention_name", "passage", "char_start", "char_end"]
    list_filter = ["project", "kind"]
    search_fields = ["surface", "mention_name__normalised"]
    list_select_related = ["mention_name", "passage"]
    raw_id_fields = ["passage", "mention_name"]


@admin.register(MentionName)
class MentionNameAdmin(_ViewOnlyAdmin):
    """A name the passages mention, linked to its entity or a candidate for one."""

    list_display = ["name", "normalised", "entity", "project", "created_at"]
    list_filter = ["project", ("entity", admin.EmptyFieldListFilter)]
    search_fields = ["normalised", "name"]
    raw_id_fields = ["entity"]
