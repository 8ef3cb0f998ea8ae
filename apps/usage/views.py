"""The usage page of a project (issue #14 item 6): the REST figures as a table and inline SVG charts."""

from __future__ import annotations

import uuid

from django.contrib.auth.decorators import login_required
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import render

from apps.agents.models import AgentDefinition
from apps.core.errors import NotFound
from apps.projects.selectors import RoleTooLow, principal_from_user
from apps.usage.api import figures
from apps.usage.charts import bar_chart, breakdown_chart, line_chart
from apps.usage.stats import InvalidUsageQuery, project_usage, usage_period, usage_project_get


@login_required
def usage_page(request: HttpRequest, project_id: uuid.UUID) -> HttpResponse:
    """Charts of a project's usage over a period picked by a GET form; owners and staff admins only."""
    principal = principal_from_user(request.user)
    if principal is None:
        raise Http404("project not found")
    try:
        project = usage_project_get(principal=principal, project_ref=project_id)
    except NotFound:
        raise Http404("project not found") from None
    except RoleTooLow as exc:
        return render(request, "usage/usage_denied.html", {"required": exc.required}, status=403)
    agents = AgentDefinition.objects.filter(project=project).order_by("name")
    form = {k: request.GET.get(k, "") for k in ("from", "to", "agentDefinitionId")}
    context: dict[str, object] = {"project": project, "agents": agents, "form": form}
    try:
        usage = project_usage(
            principal=principal,
            project_ref=project.id,
            start=form["from"],
            end=form["to"],
            agent_definition_ref=form["agentDefinitionId"],
        )
    except (InvalidUsageQuery, NotFound) as exc:
        start, end = usage_period()
        context.update(error=str(exc), start=start, end=end)
        return render(request, "usage/usage.html", context, status=400)
    labels = [d.day.strftime("%m-%d") for d in usage.days]
    totals = figures(usage.totals)
    context.update(
        start=usage.start,
        end=usage.end,
        totals=totals,
        days=[{"date": d.day, **figures(d)} for d in usage.days],
        turns_chart=bar_chart("Turns per day", labels, [("turns", [d.turns for d in usage.days])]),
        tokens_chart=bar_chart(
            "Tokens per day",
            labels,
            [
                ("input", [d.input_tokens for d in usage.days]),
                ("output", [d.output_tokens for d in usage.days]),
            ],
        ),
        stops_chart=breakdown_chart("Stop reasons", usage.totals.stop_reasons),
        latency_chart=line_chart(
            "Time to done per day (ms)",
            labels,
            [("p50", [d.done_p50_ms for d in usage.days]), ("p95", [d.done_p95_ms for d in usage.days])],
        ),
    )
    return render(request, "usage/usage.html", context)
