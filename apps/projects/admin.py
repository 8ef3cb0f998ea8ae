from typing import Any

from django.contrib import admin, messages
from django.http import HttpRequest

from apps.projects.models import ApiToken, Project, ProjectMembership
from apps.projects.services import api_token_create, api_token_revoke


class MembershipInline(admin.TabularInline):
    model = ProjectMembership
    extra = 0
    autocomplete_fields = ["user"]


@admin.register(Project)
class ProjectAdmin(admin.ModelAdmin):
    list_display = ["name", "slug", "created_at"]
    search_fields = ["name", "slug"]
    prepopulated_fields = {"slug": ["name"]}
    inlines = [MembershipInline]


@admin.register(ProjectMembership)
class ProjectMembershipAdmin(admin.ModelAdmin):
    list_display = ["project", "user", "role", "created_at"]
    list_filter = ["role", "project"]
    autocomplete_fields = ["user", "project"]


@admin.register(ApiToken)
class ApiTokenAdmin(admin.ModelAdmin):
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
