from typing import Any

from django import forms
from django.contrib import admin, messages
from django.http import HttpRequest, HttpResponse

from apps.agents.definitions import (
    EDITABLE,
    InvalidAgentDefinition,
    default_agents_install,
    tool_policy_validate,
)
from apps.agents.mcp_servers import InvalidMcpServer, mcp_servers_validate
from apps.agents.models import AgentDefinition, AgentRun, AgentRunMessage, AgentRunToolCall
from apps.core.inputs import JSONFormField
from apps.graph_tools.registry import tool_names
from apps.projects.admin import ProjectAdmin
from apps.projects.models import Project


class AgentDefinitionForm(forms.ModelForm):
    """Tools as a multi-select of the registry's tools; the model as a name and a temperature."""

    tools = forms.MultipleChoiceField(required=False, widget=forms.CheckboxSelectMultiple)
    model_name = forms.CharField(
        label="Model",
        max_length=200,
        help_text="gemini-2.0-flash, openai/<model>, ollama/<model>, local/<model>",
    )
    temperature = forms.FloatField(min_value=0.0, max_value=2.0, initial=0.1)

    class Meta:
        model = AgentDefinition
        # The model is edited as two fields below (name and temperature).
        fields = ["project", *(f for f in EDITABLE if f != "model"), "disabled_reason"]
        field_classes = {"mcp_servers": JSONFormField, "tool_policy": JSONFormField}
        help_texts = {
            "mcp_servers": (
                '[{"stdio": "<name from KGCHAT_MCP_STDIO_SERVERS>"} or {"url": "https://<host in '
                'KGCHAT_MCP_URL_ALLOWLIST>/mcp", "name": "…", "transport": "streamable_http" | "sse", '
                '"headers": {…}}, each with an optional "tool_filter": [tool names]]. No commands: '
                "stdio servers are configured by the operator, by name."
            ),
            "tool_policy": (
                '{"<write tool>": {"approval": "always" | "never"}}: "never" lets the agent change the graph '
                'without a member\'s approval (in turns of editors and owners). Unnamed write tools: "always".'
            ),
        }

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        known = tool_names()
        extra = [t for t in (self.instance.tools or []) if t not in known]
        tools_field = self.fields["tools"]
        assert isinstance(tools_field, forms.MultipleChoiceField)
        tools_field.choices = [(t, t) for t in [*known, *extra]]
        model = self.instance.model_choice
        self.fields["model_name"].initial = model.name or "gemini-2.0-flash"
        self.fields["temperature"].initial = 0.1 if model.temperature is None else model.temperature

    def clean_tool_policy(self) -> dict[str, dict[str, str]]:
        try:
            return tool_policy_validate(self.cleaned_data.get("tool_policy") or {})
        except InvalidAgentDefinition as exc:
            raise forms.ValidationError(exc.message, code=exc.code) from None

    def clean_mcp_servers(self) -> list[dict[str, Any]]:
        try:
            return mcp_servers_validate(self.cleaned_data.get("mcp_servers") or [], headers_allowed=True)
        except InvalidMcpServer as exc:
            raise forms.ValidationError(exc.message, code=exc.code) from None

    def save(self, commit: bool = True) -> AgentDefinition:
        self.instance.model = {
            "name": self.cleaned_data["model_name"],
            "temperature": self.cleaned_data["temperature"],
        }
        self.instance.tools = list(self.cleaned_data["tools"])
        return super().save(commit=commit)


@admin.register(AgentDefinition)
class AgentDefinitionAdmin(admin.ModelAdmin):
    form = AgentDefinitionForm
    list_display = ["name", "project", "is_default", "max_steps", "visibility", "enabled", "updated_at"]
    list_filter = ["project", "is_default", "visibility"]

    def change_view(
        self, request: HttpRequest, object_id: str, form_url: str = "", extra_context: Any = None
    ) -> HttpResponse:
        definition = self.get_object(request, object_id)
        if request.method == "GET" and definition is not None and definition.disabled_reason:
            messages.warning(request, f"This agent definition is disabled: {definition.disabled_reason}")
        return super().change_view(request, object_id, form_url, extra_context)

    @admin.display(boolean=True, description="enabled")
    def enabled(self, obj: AgentDefinition) -> bool:
        return not obj.disabled_reason

    search_fields = ["name", "description"]


admin.site.unregister(Project)


@admin.register(Project)
class ProjectWithAgentsAdmin(ProjectAdmin):
    """The project admin, plus an action installing the default agents (agents sit above projects)."""

    actions = ["install_default_agents"]

    @admin.action(description="Install the default agents (graph-query-agent, graph-curator-agent)")
    def install_default_agents(self, request: HttpRequest, queryset: Any) -> None:
        for project in queryset:
            result = default_agents_install(project=project)
            self.message_user(request, f"{project}: installed {', '.join(result.installed) or 'nothing new'}")


class ReadOnlyInline(admin.TabularInline):
    extra = 0
    can_delete = False
    show_change_link = False

    def has_add_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False


class RunMessageInline(ReadOnlyInline):
    model = AgentRunMessage
    fields = ("step_number", "role", "content", "tool_calls", "created_at")
    readonly_fields = fields


class RunToolCallInline(ReadOnlyInline):
    model = AgentRunToolCall
    fields = ("step_number", "tool_name", "call_id", "input", "output", "error", "duration_ms")
    readonly_fields = fields


@admin.register(AgentRun)
class AgentRunAdmin(admin.ModelAdmin):
    list_display = [
        "id",
        "agent_definition",
        "status",
        "stop_reason",
        "step_count",
        "started_at",
        "completed_at",
    ]
    list_filter = ["status", "project"]
    inlines = [RunMessageInline, RunToolCallInline]

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

    def get_readonly_fields(self, request: HttpRequest, obj: Any = None) -> list[str]:
        return [f.name for f in AgentRun._meta.fields]
