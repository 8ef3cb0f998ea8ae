"""Usage statistics of a project for its owners and staff admins (issue #14 item 6).

Every figure is computed by PostgreSQL with day buckets (``date_trunc('day', … AT TIME ZONE 'UTC')``)
over indexed columns: turns and users from ``kb.chat_messages`` (a user message starts a turn),
runs, tokens, stop reasons and latency from ``kb.agent_runs`` (agent turns' runs, and the records
plain answers store of their model call, which have no agent definition), tool calls from
``kb.agent_run_tool_calls``, feedback from ``kb.chat_message_feedback``. Python only adds cost to
the per-(day, model) token sums, from ``KGCHAT_MODEL_PRICES``; a day with an unpriced model has a
null cost, and so does the total.

Time to first token is not stored anywhere (runs keep ``started_at`` and ``completed_at`` only), so
only the time to done is reported.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, field
from datetime import UTC, date, datetime, timedelta
from decimal import Decimal
from typing import Any

from django.db import connection
from django.utils import timezone

from apps.agents.models import AgentDefinition
from apps.chat.conversations.usage import run_cost
from apps.core.errors import NotFound, ServiceError
from apps.projects.models import Project, Role
from apps.projects.selectors import Principal, ProjectNotFound, parse_uuid, project_get

DEFAULT_DAYS = 30
MAX_DAYS = 366


class InvalidUsageQuery(ServiceError):
    """invalid usage query"""

    code = "invalid_request"


class AgentDefinitionNotFound(NotFound):
    """agent definition not found"""

    code = "agent_definition_not_found"


@dataclass
class DayUsage:
    day: date
    turns: int = 0
    users: int = 0
    runs: int = 0
    input_tokens: int = 0
    output_tokens: int = 0
    cost: Decimal | None = Decimal(0)
    tool_calls: int = 0
    tool_errors: int = 0
    stop_reasons: dict[str, int] = field(default_factory=dict)
    done_p50_ms: float | None = None
    done_p95_ms: float | None = None
    feedback_up: int = 0
    feedback_down: int = 0


@dataclass
class ProjectUsage:
    project: Project
    agent_definition: AgentDefinition | None
    start: date
    end: date  # inclusive
    days: list[DayUsage]
    totals: DayUsage  # ``day`` is ``start``; users, p50 and p95 are over the whole period


def ratio(part: int, whole: int) -> float | None:
    return round(part / whole, 4) if whole else None


def _parse_day(value: object, name: str) -> date | None:
    if value in (None, ""):
        return None
    try:
        return date.fromisoformat(str(value))
    except ValueError:
        raise InvalidUsageQuery(f"'{name}' must be a date like 2026-01-31") from None


def usage_period(*, start: object = None, end: object = None, today: date | None = None) -> tuple[date, date]:
    """The inclusive day range asked for: default the last 30 days up to today, at most 366 days."""
    today = today or timezone.now().date()
    end_day = _parse_day(end, "to") or today
    start_day = _parse_day(start, "from") or end_day - timedelta(days=DEFAULT_DAYS - 1)
    if start_day > end_day:
        raise InvalidUsageQuery("'from' is after 'to'")
    if (end_day - start_day).days + 1 > MAX_DAYS:
        raise InvalidUsageQuery(f"the period is longer than {MAX_DAYS} days")
    return start_day, end_day


def usage_project_get(*, principal: Principal, project_ref: object) -> Project:
    """The project whose usage the caller may read: an owner's, or any project for a staff admin."""
    if principal.user.is_staff:
        project_id = parse_uuid(project_ref)
        qs = Project.objects.all()
        if principal.token_project_id is not None:
            qs = qs.filter(id=principal.token_project_id)
        project = (qs.filter(id=project_id) if project_id else qs.filter(slug=str(project_ref))).first()
        if project is None:
            raise ProjectNotFound()
        return project
    return project_get(principal=principal, project_ref=project_ref, min_role=Role.OWNER)


def _rows(sql: str, params: dict[str, Any]) -> list[tuple[Any, ...]]:
    with connection.cursor() as cursor:
        cursor.execute(sql, params)
        return list(cursor.fetchall())


DAY = "(date_trunc('day', {col} AT TIME ZONE 'UTC'))::date"

# Per conversation of the project, then per day: the aggregated LATERAL cannot be flattened into a
# hash join over every project's messages, so each conversation reads its range of
# ``chat_msg_conv_created`` (conversation_id, created_at).
TURNS_SQL = f"""
SELECT t.day, coalesce(sum(t.turns), 0), count(DISTINCT c.user_id)
FROM "kb"."chat_conversations" c
JOIN LATERAL (
    SELECT {DAY.format(col="m.created_at")} AS day, count(*) AS turns
    FROM "kb"."chat_messages" m
    WHERE m.conversation_id = c.id AND m.role = 'user'
      AND m.created_at >= %(since)s AND m.created_at < %(until)s
    GROUP BY 1
) t ON true
WHERE c.project_id = %(project)s
  AND (%(agent)s::uuid IS NULL OR c.agent_definition_id = %(agent)s::uuid)
GROUP BY ROLLUP (t.day)
"""

RUNS_SQL = f"""
SELECT {DAY.format(col="r.started_at")} AS day, r.model, count(*),
       coalesce(sum(r.input_tokens), 0), coalesce(sum(r.output_tokens), 0)
FROM "kb"."agent_runs" r
WHERE r.project_id = %(project)s AND r.started_at >= %(since)s AND r.started_at < %(until)s
  AND (%(agent)s::uuid IS NULL OR r.agent_definition_id = %(agent)s::uuid)
GROUP BY 1, 2
"""

STOPS_SQL = f"""
SELECT {DAY.format(col="r.started_at")} AS day,
       CASE WHEN r.status = 'running' THEN 'running'
            ELSE coalesce(nullif(r.stop_reason, ''), r.status) END AS reason,
       count(*)
FROM "kb"."agent_runs" r
WHERE r.project_id = %(project)s AND r.started_at >= %(since)s AND r.started_at < %(until)s
  AND (%(agent)s::uuid IS NULL OR r.agent_definition_id = %(agent)s::uuid)
GROUP BY 1, 2
"""

LATENCY_SQL = f"""
SELECT {DAY.format(col="r.started_at")} AS day,
       percentile_cont(0.5) WITHIN GROUP (ORDER BY extract(epoch FROM r.completed_at - r.started_at) * 1000),
       percentile_cont(0.95) WITHIN GROUP (ORDER BY extract(epoch FROM r.completed_at - r.started_at) * 1000)
FROM "kb"."agent_runs" r
WHERE r.project_id = %(project)s AND r.started_at >= %(since)s AND r.started_at < %(until)s
  AND (%(agent)s::uuid IS NULL OR r.agent_definition_id = %(agent)s::uuid)
  AND r.completed_at IS NOT NULL
GROUP BY ROLLUP (1)
"""

# Likewise per run: its tool calls by ``agent_run_tc_run_created`` (run_id, created_at).
TOOLS_SQL = f"""
SELECT {DAY.format(col="r.started_at")} AS day, coalesce(sum(t.calls), 0), coalesce(sum(t.errors), 0)
FROM "kb"."agent_runs" r
JOIN LATERAL (
    SELECT count(*) AS calls, count(*) FILTER (WHERE tc.error <> '') AS errors
    FROM "kb"."agent_run_tool_calls" tc WHERE tc.run_id = r.id
) t ON true
WHERE r.project_id = %(project)s AND r.started_at >= %(since)s AND r.started_at < %(until)s
  AND (%(agent)s::uuid IS NULL OR r.agent_definition_id = %(agent)s::uuid)
GROUP BY 1
"""

FEEDBACK_SQL = f"""
SELECT {DAY.format(col="m.created_at")} AS day,
       count(*) FILTER (WHERE f.rating = 'up'), count(*) FILTER (WHERE f.rating = 'down')
FROM "kb"."chat_message_feedback" f
JOIN "kb"."chat_messages" m ON m.id = f.message_id
JOIN "kb"."chat_conversations" c ON c.id = m.conversation_id
WHERE c.project_id = %(project)s AND m.created_at >= %(since)s AND m.created_at < %(until)s
  AND (%(agent)s::uuid IS NULL OR c.agent_definition_id = %(agent)s::uuid)
GROUP BY 1
"""


def _add_cost(current: Decimal | None, extra: Decimal | None) -> Decimal | None:
    return None if current is None or extra is None else current + extra


def _agent_of(project: Project, agent_definition_ref: object) -> AgentDefinition | None:
    """The agent definition the figures are limited to (None: all of the project's turns)."""
    if agent_definition_ref in (None, ""):
        return None
    agent_id = parse_uuid(agent_definition_ref)
    if agent_id is None:
        raise InvalidUsageQuery("'agentDefinitionId' must be a UUID")
    agent = AgentDefinition.objects.filter(id=agent_id, project=project).first()
    if agent is None:
        raise AgentDefinitionNotFound()
    return agent


def _count_turns_and_runs(params: dict[str, Any], days: dict[date, DayUsage], totals: DayUsage) -> None:
    for day, turns, users in _rows(TURNS_SQL, params):
        target = totals if day is None else days[day]
        target.turns, target.users = int(turns), int(users)
    for day, model, runs, tokens_in, tokens_out in _rows(RUNS_SQL, params):
        cost = run_cost(model, int(tokens_in), int(tokens_out))
        for target in (days[day], totals):
            target.runs += int(runs)
            target.input_tokens += int(tokens_in)
            target.output_tokens += int(tokens_out)
            target.cost = _add_cost(target.cost, cost)


def _count_stops_latency_tools_feedback(
    params: dict[str, Any], days: dict[date, DayUsage], totals: DayUsage
) -> None:
    stops: dict[str, int] = defaultdict(int)
    for day, reason, count in _rows(STOPS_SQL, params):
        days[day].stop_reasons[reason] = count
        stops[reason] += count
    totals.stop_reasons = dict(sorted(stops.items(), key=lambda kv: (-kv[1], kv[0])))
    for day, p50, p95 in _rows(LATENCY_SQL, params):
        if p50 is None:  # the ROLLUP total of no finished runs
            continue
        target = totals if day is None else days[day]
        target.done_p50_ms, target.done_p95_ms = round(float(p50), 1), round(float(p95), 1)
    for day, calls, errors in _rows(TOOLS_SQL, params):
        for target in (days[day], totals):
            target.tool_calls += int(calls)
            target.tool_errors += int(errors)
    for day, up, down in _rows(FEEDBACK_SQL, params):
        for target in (days[day], totals):
            target.feedback_up += up
            target.feedback_down += down


def project_usage(
    *,
    principal: Principal,
    project_ref: object,
    start: object = None,
    end: object = None,
    agent_definition_ref: object = None,
    today: date | None = None,
) -> ProjectUsage:
    """Usage of a project (optionally of one agent definition) per UTC day of an inclusive period.

    Turns and feedback count by the day of their message; runs, tokens, cost, tool calls, stop
    reasons and latency by the day the run started.
    """
    project = usage_project_get(principal=principal, project_ref=project_ref)
    first, last = usage_period(start=start, end=end, today=today)
    agent = _agent_of(project, agent_definition_ref)
    params: dict[str, Any] = {
        "project": project.id,
        "since": datetime(first.year, first.month, first.day, tzinfo=UTC),
        "until": datetime(last.year, last.month, last.day, tzinfo=UTC) + timedelta(days=1),
        "agent": agent.id if agent else None,
    }
    days = {
        first + timedelta(days=i): DayUsage(day=first + timedelta(days=i))
        for i in range((last - first).days + 1)
    }
    totals = DayUsage(day=first)
    _count_turns_and_runs(params, days, totals)
    _count_stops_latency_tools_feedback(params, days, totals)
    return ProjectUsage(
        project=project,
        agent_definition=agent,
        start=first,
        end=last,
        days=list(days.values()),
        totals=totals,
    )


def usage_cost(value: Decimal | None) -> float | None:
    return float(round(value, 6)) if value is not None else None
