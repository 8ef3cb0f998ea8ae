"""The graph's admin. Entities and relationships are changed only through the write services
(``write_apply``): an admin edit bumps the graph version and records a ``GraphChange`` (authority
``direct``, the staff user), exactly as a member's direct write tool call does. The form checks
the change with ``write_plan`` first, so a refused one is a form error and writes nothing."""

from typing import Any

import pydantic
from django import forms
from django.contrib import admin, messages
from django.db.models import QuerySet
from django.http import HttpRequest

from apps.core.inputs import JSONFormField
from apps.graph_tools.errors import ToolError
from apps.graph_tools.models import (
    ChangeAuthority,
    GraphChange,
    GraphObject,
    GraphRelationship,
    WriteApproval,
)
from apps.graph_tools.registry import ToolArgs, WriteAuthorization
from apps.graph_tools.write_plans import (
    CreateEntityArgs,
    CreateRelationshipArgs,
    DeleteEntityArgs,
    DeleteRelationshipArgs,
    UpdateEntityArgs,
)
from apps.graph_tools.writes import change_action_choices, write_apply, write_plan

# A planned write: the write tool's name and its arguments (None: the form changed nothing).
Write = tuple[str, ToolArgs] | None


def _problems(exc: pydantic.ValidationError) -> str:
    return "; ".join(f"{'.'.join(str(p) for p in e['loc'])}: {e['msg']}" for e in exc.errors())


class _WriteForm(forms.ModelForm):
    """A form whose save is one write tool call, planned (and so checked) in ``clean``."""

    write: Write = None

    def planned(self, cleaned: dict[str, Any]) -> Write:
        raise NotImplementedError

    def clean(self) -> dict[str, Any]:
        cleaned = super().clean() or {}
        if self.errors:
            return cleaned
        try:
            self.write = self.planned(cleaned)
            if self.write is not None:
                tool, args = self.write
                write_plan(project_id=self.project_id(cleaned), tool_name=tool, args=args)
        except pydantic.ValidationError as exc:
            raise forms.ValidationError(_problems(exc)) from None
        except ToolError as exc:
            raise forms.ValidationError(exc.message) from None
        return cleaned

    def project_id(self, cleaned: dict[str, Any]) -> Any:
        project = cleaned.get("project")
        return project.pk if project is not None else self.instance.project_id

    def validate_unique(self) -> None:
        """Left to the write service, which names the clash (an existing key or relationship)."""


class EntityForm(_WriteForm):
    class Meta:
        model = GraphObject
        fields = ["project", "key", "type", "name", "description", "properties"]
        field_classes = {"properties": JSONFormField}

    def planned(self, cleaned: dict[str, Any]) -> Write:
        values = {k: cleaned.get(k) for k in ("name", "description", "properties")}
        values["description"] = values["description"] or ""
        values["properties"] = values["properties"] or {}
        if self.instance._state.adding:
            return "create_entity", CreateEntityArgs.model_validate(
                {"key": cleaned.get("key"), "type": cleaned.get("type"), **values}
            )
        changed = {k: v for k, v in values.items() if k in self.changed_data}
        if "properties" in changed:
            old, new = self.instance.properties or {}, changed["properties"]
            if not isinstance(new, dict):
                raise forms.ValidationError("properties must be a JSON object")
            patch = {k: v for k, v in new.items() if old.get(k) != v} | {k: None for k in old if k not in new}
            changed["properties"] = patch or None
        changed = {k: v for k, v in changed.items() if v is not None}
        if not changed:
            return None
        return "update_entity", UpdateEntityArgs.model_validate(
            {"entity_id": str(self.instance.pk), **changed}
        )


class RelationshipForm(_WriteForm):
    class Meta:
        model = GraphRelationship
        fields = ["project", "src", "type", "dst", "properties"]
        field_classes = {"properties": JSONFormField}

    def planned(self, cleaned: dict[str, Any]) -> Write:
        src, dst = cleaned.get("src"), cleaned.get("dst")
        return "create_relationship", CreateRelationshipArgs.model_validate(
            {
                "src": str(src.pk) if src else "",
                "type": cleaned.get("type"),
                "dst": str(dst.pk) if dst else "",
                "properties": cleaned.get("properties") or {},
            }
        )


class _WriteServiceAdmin(admin.ModelAdmin):
    """Saves and deletes through ``write_apply``, never the ORM."""

    def _apply(
        self, request: HttpRequest, project_id: Any, tool: str, args: ToolArgs
    ) -> dict[str, Any] | None:
        authorization = WriteAuthorization(via=ChangeAuthority.DIRECT, user_id=request.user.pk)
        try:
            return write_apply(
                project_id=project_id, tool_name=tool, args=args, authorization=authorization
            ).result
        except ToolError as exc:
            # The graph changed between the form's check and the save: nothing was written.
            messages.error(request, f"Nothing was written: {exc.message}")
            return None

    def save_model(self, request: HttpRequest, obj: Any, form: Any, change: bool) -> None:
        if form.write is None:
            return
        tool, args = form.write
        result = self._apply(request, obj.project_id, tool, args)
        if result is not None and not change:
            obj.pk = result["after"]["id"]
            obj.refresh_from_db()

    def delete_model(self, request: HttpRequest, obj: Any) -> None:
        tool, args = self.deletion(obj)
        self._apply(request, obj.project_id, tool, args)

    def delete_queryset(self, request: HttpRequest, queryset: QuerySet[Any]) -> None:
        for obj in queryset:
            self.delete_model(request, obj)

    def deletion(self, obj: Any) -> tuple[str, ToolArgs]:
        raise NotImplementedError


@admin.register(GraphObject)
class GraphObjectAdmin(_WriteServiceAdmin):
    form = EntityForm
    list_display = ["name", "type", "key", "project", "embedding_pending", "updated_at"]
    list_filter = ["project", "type"]
    search_fields = ["name", "key", "description"]
    readonly_fields = ["embedding_pending", "embedding_models", "created_at", "updated_at"]

    @admin.display(description="vectors of models")
    def embedding_models(self, obj: Any) -> str:
        return ", ".join(obj.embeddings.order_by("model").values_list("model", flat=True)) or "-"

    def get_readonly_fields(self, request: HttpRequest, obj: Any = None) -> Any:
        # update_entity changes name, description and properties; the rest is fixed once created.
        fixed = ["project", "key", "type"] if obj is not None else []
        return [*fixed, *self.readonly_fields]

    def deletion(self, obj: Any) -> tuple[str, ToolArgs]:
        return "delete_entity", DeleteEntityArgs(entity_id=str(obj.pk))


@admin.register(GraphRelationship)
class GraphRelationshipAdmin(_WriteServiceAdmin):
    """Added and deleted through the write services; no write tool edits one in place."""

    form = RelationshipForm
    list_display = ["src", "type", "dst", "project"]
    list_filter = ["project", "type"]
    raw_id_fields = ["src", "dst"]

    def has_change_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

    def deletion(self, obj: Any) -> tuple[str, ToolArgs]:
        return "delete_relationship", DeleteRelationshipArgs(
            src=str(obj.src_id), type=obj.type, dst=str(obj.dst_id)
        )


class ReadOnlyAdmin(admin.ModelAdmin):
    """Audit rows are written by the services only."""

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False


class ChangeActionFilter(admin.SimpleListFilter):
    """Changes by action, labelled from the write tools' one list (and the import's two)."""

    title = "action"
    parameter_name = "action"

    def lookups(self, request: HttpRequest, model_admin: Any) -> list[tuple[str, str]]:
        return change_action_choices()

    def queryset(self, request: HttpRequest, queryset: Any) -> Any:
        return queryset.filter(action=self.value()) if self.value() else queryset


@admin.register(GraphChange)
class GraphChangeAdmin(ReadOnlyAdmin):
    list_display = ["version", "action", "entity_id", "user", "authority", "run_id", "created_at", "project"]
    list_filter = ["project", ChangeActionFilter, "authority", ("user", admin.RelatedOnlyFieldListFilter)]
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
