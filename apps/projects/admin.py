from typing import Any

from django import forms
from django.contrib import admin, messages
from django.http import HttpRequest
from django.urls import reverse
from django.utils import timezone
from django.utils.html import format_html

from apps.projects.models import ApiToken, Project, ProjectInvitation, ProjectMembership
from apps.projects.services import api_token_create, api_token_revoke, invitation_mark_revoked


class MembershipInline(admin.TabularInline):
    model = ProjectMembership
    extra = 0
    autocomplete_fields = ["user"]


@admin.register(Project)
class ProjectAdmin(admin.ModelAdmin):
    list_display = ["name", "slug", "created_at", "usage"]
    search_fields = ["name", "slug"]
    prepopulated_fields = {"slug": ["name"]}
    inlines = [MembershipInline]
    readonly_fields = ["usage"]

    @admin.display(description="usage")
    def usage(self, obj: Project) -> str:
        if obj.pk is None or obj._state.adding:  # the add form's unsaved instance has a uuid already
            return "-"
        return format_html('<a href="{}">Usage statistics</a>', reverse("usage:page", args=[obj.pk]))


@admin.register(ProjectMembership)
class ProjectMembershipAdmin(admin.ModelAdmin):
    list_display = ["project", "user", "role", "created_at"]
    list_filter = ["role", "project"]
    autocomplete_fields = ["user", "project"]


class ApiTokenForm(forms.ModelForm):
    def clean(self) -> dict[str, Any]:
        """A token bound to a project is for one of its members (the service refuses anyone else)."""
        cleaned = super().clean() or {}
        user, project = cleaned.get("user"), cleaned.get("project")
        if (
            self.instance._state.adding
            and user is not None
            and project is not None
            and not ProjectMembership.objects.filter(project=project, user=user).exists()
        ):
            self.add_error("project", f"{user} is not a member of {project}: add them to it first")
        return cleaned


@admin.register(ApiToken)
class ApiTokenAdmin(admin.ModelAdmin):
    form = ApiTokenForm
    list_display = ["prefix", "name", "user", "project", "created_at", "last_used_at", "revoked_at"]
    list_filter = ["project"]
    readonly_fields = ["prefix", "created_at", "last_used_at"]
    fields = ["user", "project", "name", "prefix", "created_at", "last_used_at", "revoked_at"]
    autocomplete_fields = ["user", "project"]
    actions = ["revoke"]

    def save_model(self, request: HttpRequest, obj: ApiToken, form: Any, change: bool) -> None:
        if change:
            super().save_model(request, obj, form, change)
            return
        token, secret = api_token_create(user=obj.user, project=obj.project, name=obj.name)
        obj.pk, obj.prefix, obj.token_hash, obj.created_at = (
            token.pk,
            token.prefix,
            token.token_hash,
            token.created_at,
        )
        obj._state.adding = False
        messages.warning(request, f"The new token is {secret} — copy it now, it will not be shown again.")

    @admin.action(description="Revoke the selected tokens")
    def revoke(self, request: HttpRequest, queryset: Any) -> None:
        for token in queryset:
            api_token_revoke(token=token)


@admin.register(ProjectInvitation)
class ProjectInvitationAdmin(admin.ModelAdmin):
    """Invitations are created by owners (REST, the chat page): their token is never stored, so the
    admin lists them and revokes them, and cannot show or make a link."""

    list_display = ["project", "role", "status", "created_by", "created_at", "expires_at", "accepted_by"]
    list_filter = ["role", "project"]
    search_fields = ["project__name", "project__slug", "created_by__username", "accepted_by__username"]
    readonly_fields = fields = (
        "project",
        "role",
        "created_by",
        "created_at",
        "expires_at",
        "revoked_at",
        "accepted_at",
        "accepted_by",
    )
    actions = ["revoke"]

    @admin.display(description="status")
    def status(self, obj: ProjectInvitation) -> str:
        return obj.status_at(timezone.now())

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False

    @admin.action(description="Revoke the selected invitations")
    def revoke(self, request: HttpRequest, queryset: Any) -> None:
        for invitation in queryset:
            invitation_mark_revoked(invitation=invitation)
