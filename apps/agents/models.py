"""Agent definitions and the audit trail of their runs (``kb.agent_*``)."""

from __future__ import annotations

import uuid
from dataclasses import dataclass

from django.contrib.postgres.fields import ArrayField
from django.db import models
from django.utils import timezone

from apps.projects.models import Project


def default_model() -> dict[str, object]:
    return {"name": "gemini-2.0-flash", "temperature": 0.1}


class FlowType(models.TextChoices):
    """Stored and shown (PROTOCOL lists ``flowType``) but not read: every definition runs as one agent
    that may hand over to its ``sub_agents``, whatever its flow type says."""

    SINGLE = "single", "Single agent"
    SEQUENTIAL = "sequential", "Sequential sub-agents"


class Visibility(models.TextChoices):
    """Who sees and may use a definition (enforced in ``apps.agents.selectors``); "admins" are the
    project's owners."""

    PROJECT = "project", "Project members"
    PRIVATE = "private", "Only admins"


@dataclass(frozen=True)
class ModelChoice:
    """The model a definition asks for: its name (``gemini-2.0-flash``, ``openai/<model>``, …) and
    temperature (None: the provider's default)."""

    name: str
    temperature: float | None


class AgentDefinition(models.Model):
    id = models.UUIDField(primary_key=True, default=uuid.uuid4, editable=False)
    project = models.ForeignKey(Project, on_delete=models.CASCADE, related_name="agent_definitions")
    name = models.CharField(max_length=100)
    description = models.TextField(blank=True, default="")
    system_prompt = models.TextField(blank=True, default="")
    model = models.JSONField(default=default_model, help_text='{"name": "...", "temperature": 0.1}')
    tools = ArrayField(models.CharField(max_length=100), default=list, blank=True)
    flow_type = models.CharField(max_length=32, choices=FlowType.choices, default=FlowType.SINGLE)
    is_default = models.BooleanField(default=False)
    max_steps = models.PositiveIntegerField(default=15)
    visibility = models.CharField(max_length=32, choices=Visibility.choices, default=Visibility.PROJECT)
    # Names of other agent definitions of the same project that this one may hand over to.
    sub_agents = ArrayField(models.CharField(max_length=100), default=list, blank=True)
    # External MCP servers whose tools join the graph tools; see apps/agents/mcp_servers.py:
    # [{"stdio": "<operator-allowlisted name>"} | {"url", "name", "transport", "headers"}, + "tool_filter"].
    mcp_servers = models.JSONField(default=list, blank=True)
    # Set (by an operator or a migration) when the definition must not run; turns answer
    # "agent_definition_disabled" with this text. Empty: enabled.
    disabled_reason = models.TextField(
        blank=True,
        default="",
        help_text="Why this definition may not run. Clear it to enable the definition again.",
    )
    # Per write tool: {"<tool>": {"approval": "always" | "never"}}; a write tool not named here needs
    # approval ("always"); read tools never do. Validated in apps.agents.definitions.
    tool_policy = models.JSONField(
        default=dict,
        blank=True,
        help_text='{"<write tool>": {"approval": "always" | "never"}}; unnamed write tools: "always".',
    )
    history_limit = models.PositiveIntegerField(default=10, help_text="Prior messages given to the agent.")
    token_budget = models.PositiveIntegerField(default=32000, help_text="Token budget of the prior messages.")
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        db_table = 'kb"."agent_definitions'
        ordering = ["name"]
        constraints = [
            models.UniqueConstraint(fields=["project", "name"], name="uniq_agent_definition_project_name"),
        ]

    def __str__(self) -> str:
        return self.name

    @property
    def model_choice(self) -> ModelChoice:
        """The ``model`` JSON as a typed value (validated on write, so only old rows lack parts)."""
        model = self.model if isinstance(self.model, dict) else {}
        temperature = model.get("temperature")
        return ModelChoice(
            name=str(model.get("name") or ""),
            temperature=float(temperature) if isinstance(temperature, int | float) else None,
        )


class RunStatus(models.TextChoices):
    RUNNING = "running", "Running"
    SUCCESS = "success", "Success"
    ERROR = "error", "Error"
    CANCELLED = "cancelled", "Cancelled"
    INTERRUPTED = "interrupted", "Interrupted"


class AgentRun(models.Model):
    id = models.UUIDField(primary_key=True, default=uuid.uuid4, editable=False)
    project = models.ForeignKey(Project, on_delete=models.CASCADE, related_name="agent_runs")
    agent_definition = models.ForeignKey(
        AgentDefinition, on_delete=models.SET_NULL, null=True, blank=True, related_name="runs"
    )
    # The chat layer sits above this one, so the conversation is referenced by id only.
    conversation_id = models.UUIDField(null=True, blank=True, db_index=True)
    status = models.CharField(
        max_length=16, choices=RunStatus.choices, default=RunStatus.RUNNING, db_index=True
    )
    stop_reason = models.CharField(max_length=64, blank=True, default="")
    error = models.TextField(blank=True, default="")
    model = models.CharField(max_length=200, blank=True, default="")
    step_count = models.PositiveIntegerField(default=0)
    input_tokens = models.PositiveIntegerField(default=0)
    output_tokens = models.PositiveIntegerField(default=0)
    final_text = models.TextField(blank=True, default="")
    # The project's graph version when the run started: what its answer was computed at.
    graph_version = models.BigIntegerField(null=True, blank=True)
    # Which server process runs it now (the one that resumed it, after a crash).
    worker = models.CharField(max_length=200, blank=True, default="")
    # How many processes have run it: 1, plus one per resumption after its process died.
    attempts = models.PositiveSmallIntegerField(default=1)
    # Set when the row is built (the turn's admission), or given: a plain answer's record is stored
    # with its answer, and started with its turn (``services.agent_run_plain``).
    started_at = models.DateTimeField(default=timezone.now, editable=False)
    completed_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        db_table = 'kb"."agent_runs'
        ordering = ["-started_at"]
        indexes = [models.Index(fields=["project", "-started_at"], name="agent_run_project_started")]

    def __str__(self) -> str:
        return f"run {self.id} ({self.status})"


class AgentRunMessage(models.Model):
    id = models.UUIDField(primary_key=True, default=uuid.uuid4, editable=False)
    run = models.ForeignKey(AgentRun, on_delete=models.CASCADE, related_name="messages")
    step_number = models.PositiveIntegerField(default=0)
    role = models.CharField(max_length=16)
    content = models.TextField(blank=True, default="")
    tool_calls = models.JSONField(default=list, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        db_table = 'kb"."agent_run_messages'
        ordering = ["created_at"]
        indexes = [models.Index(fields=["run", "created_at"], name="agent_run_msg_run_created")]

    def __str__(self) -> str:
        return f"{self.role} (step {self.step_number})"


class AgentRunEvent(models.Model):
    """One ADK session event of a run, in order (``apps/agents/adk/session.py``): what ADK's
    resumption rebuilds an invocation from in another process. ``seeded`` events are the
    conversation's history the run started with; the others are what the run added."""

    id = models.BigAutoField(primary_key=True)
    run = models.ForeignKey(AgentRun, on_delete=models.CASCADE, related_name="events")
    position = models.PositiveIntegerField()
    seeded = models.BooleanField(default=False)
    invocation_id = models.CharField(max_length=200, blank=True, default="")
    author = models.CharField(max_length=200, blank=True, default="")
    branch = models.CharField(max_length=500, blank=True, default="")
    # The whole event as ADK serialises it (content, function-call ids, actions, end of agent).
    event = models.JSONField()
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        db_table = 'kb"."agent_run_events'
        ordering = ["run", "position"]
        constraints = [models.UniqueConstraint(fields=["run", "position"], name="agent_run_event_position")]

    def __str__(self) -> str:
        return f"event {self.position} of run {self.run_id} ({self.author})"


class AgentRunToolCall(models.Model):
    id = models.UUIDField(primary_key=True, default=uuid.uuid4, editable=False)
    run = models.ForeignKey(AgentRun, on_delete=models.CASCADE, related_name="tool_calls")
    call_id = models.CharField(max_length=200, blank=True, default="")
    tool_name = models.CharField(max_length=200)
    input = models.JSONField(default=dict, blank=True)
    output = models.JSONField(null=True, blank=True)
    error = models.TextField(blank=True, default="")
    duration_ms = models.PositiveIntegerField(default=0)
    step_number = models.PositiveIntegerField(default=0)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        db_table = 'kb"."agent_run_tool_calls'
        ordering = ["created_at"]
        indexes = [models.Index(fields=["run", "created_at"], name="agent_run_tc_run_created")]

    def __str__(self) -> str:
        return f"{self.tool_name} (step {self.step_number})"
