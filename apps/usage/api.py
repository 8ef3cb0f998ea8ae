"""REST route of a project's usage statistics (issue #14 item 6); one selector call."""

from __future__ import annotations

import uuid
from datetime import date

from django.http import HttpRequest
from ninja import Field, Query, Router, Schema

from apps.projects.auth import principal_of
from apps.usage.stats import DayUsage, ProjectUsage, project_usage, ratio, usage_cost

router = Router(tags=["chat"])


class UsageQuery(Schema):
    from_: str | None = Field(
        None, alias="from", description="First day (YYYY-MM-DD, UTC); default to − 29 days"
    )
    to: str | None = Field(None, description="Last day, inclusive (YYYY-MM-DD, UTC); default today")
    agentDefinitionId: str | None = None


class UsageFigures(Schema):
    turns: int
    users: int
    runs: int
    inputTokens: int
    outputTokens: int
    cost: float | None
    toolCalls: int
    toolErrors: int
    toolErrorRate: float | None
    stopReasons: dict[str, int]
    doneP50Ms: float | None
    doneP95Ms: float | None
    feedbackUp: int
    feedbackDown: int
    feedbackRatio: float | None


class UsageDay(UsageFigures):
    date: date


class UsageOut(Schema):
    projectId: uuid.UUID
    agentDefinitionId: uuid.UUID | None
    from_: date = Field(..., alias="from")
    to: date
    days: list[UsageDay]
    totals: UsageFigures


def figures(d: DayUsage) -> dict[str, object]:
    return {
        "turns": d.turns,
        "users": d.users,
        "runs": d.runs,
        "inputTokens": d.input_tokens,
        "outputTokens": d.output_tokens,
        "cost": usage_cost(d.cost),
        "toolCalls": d.tool_calls,
        "toolErrors": d.tool_errors,
        "toolErrorRate": ratio(d.tool_errors, d.tool_calls),
        "stopReasons": d.stop_reasons,
        "doneP50Ms": d.done_p50_ms,
        "doneP95Ms": d.done_p95_ms,
        "feedbackUp": d.feedback_up,
        "feedbackDown": d.feedback_down,
        "feedbackRatio": ratio(d.feedback_up, d.feedback_up + d.feedback_down),
    }


def usage_out(usage: ProjectUsage) -> dict[str, object]:
    return {
        "projectId": usage.project.id,
        "agentDefinitionId": usage.agent_definition.id if usage.agent_definition else None,
        "from": usage.start,
        "to": usage.end,
        "days": [{"date": d.day, **figures(d)} for d in usage.days],
        "totals": figures(usage.totals),
    }


@router.get("/projects/{project_id}/usage", response=UsageOut, by_alias=True)
def get_usage(request: HttpRequest, project_id: str, query: Query[UsageQuery]) -> dict[str, object]:
    """Usage of the project per UTC day of a period (owners and staff admins)."""
    usage = project_usage(
        principal=principal_of(request),
        project_ref=project_id,
        start=query.from_,
        end=query.to,
        agent_definition_ref=query.agentDefinitionId,
    )
    return usage_out(usage)
