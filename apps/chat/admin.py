from typing import Any

from django.contrib import admin
from django.http import HttpRequest
from django.urls import reverse
from django.utils.html import format_html

from apps.chat.models import Conversation, Message, MessageFeedback


class MessageInline(admin.TabularInline):
    model = Message
    extra = 0
    can_delete = False
    fields = ("created_at", "role", "content", "tool_calls", "retrieval_context", "citations")
    readonly_fields = fields

    def has_add_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False


@admin.register(Conversation)
class ConversationAdmin(admin.ModelAdmin):
    list_display = ["__str__", "user", "project", "agent_definition", "updated_at"]
    list_filter = ["project"]
    search_fields = ["title"]
    inlines = [MessageInline]

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

    def get_readonly_fields(self, request: HttpRequest, obj: Any = None) -> list[str]:
        return [f.name for f in Conversation._meta.fields]


@admin.register(MessageFeedback)
class MessageFeedbackAdmin(admin.ModelAdmin):
    """Feedback on answers, filtered by agent definition, model and rating, each linked to its run's trace."""

    list_display = [
        "rating",
        "comment_start",
        "user",
        "agent_definition",
        "run_model",
        "run_trace",
        "updated_at",
    ]
    list_filter = [
        "rating",
        "agent_run__agent_definition",
        "agent_run__model",
        "message__conversation__project",
    ]
    search_fields = ["comment"]
    list_select_related = ["user", "agent_run", "agent_run__agent_definition"]

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

    def get_readonly_fields(self, request: HttpRequest, obj: Any = None) -> list[str]:
        return [f.name for f in MessageFeedback._meta.fields] + ["run_trace", "answer"]

    @admin.display(description="comment")
    def comment_start(self, obj: MessageFeedback) -> str:
        return obj.comment[:80]

    @admin.display(description="agent definition")
    def agent_definition(self, obj: MessageFeedback) -> str:
        run = obj.agent_run
        return str(run.agent_definition) if run and run.agent_definition else "—"

    @admin.display(description="model")
    def run_model(self, obj: MessageFeedback) -> str:
        return obj.agent_run.model if obj.agent_run else "—"

    @admin.display(description="run trace")
    def run_trace(self, obj: MessageFeedback) -> str:
        if obj.agent_run_id is None:
            return "—"
        url = reverse("admin:agents_agentrun_change", args=[obj.agent_run_id])
        return format_html('<a href="{}">run {}</a>', url, str(obj.agent_run_id)[:8])

    @admin.display(description="answer")
    def answer(self, obj: MessageFeedback) -> str:
        return obj.message.content
