"""Usage statistics (issue #14 item 6): day buckets, percentiles, cost, error rate and feedback from
seeded runs, messages and feedback in PostgreSQL; owners and staff only; bad input is a 400."""

from __future__ import annotations

from datetime import UTC, date, datetime, timedelta

import pytest
from asgiref.sync import sync_to_async
from django.test import Client

from apps.agents.llm.base import Usage
from apps.agents.llm.scripted import ScriptedProvider, text
from apps.agents.models import AgentRun, AgentRunToolCall
from apps.chat.models import Message, MessageFeedback
from apps.chat.turns.service import turn_start, turn_wait_all
from apps.projects.selectors import Principal
from tests.factories import (
    add_member,
    make_agent_answer,
    make_agent_definition,
    make_conversation,
    make_project,
    make_token,
    make_user,
)

PRICES = {"openai/priced": {"input": 2.0, "output": 8.0}}
DAY1, DAY2 = datetime(2026, 3, 1, 10, tzinfo=UTC), datetime(2026, 3, 2, 23, 30, tzinfo=UTC)


def client_for(user) -> Client:
    client = Client()
    client.force_login(user)
    return client


def turn(conversation, at: datetime, *, ms: int, stop: str = "completed", status: str = "success", **run):
    """A user message at ``at`` and an agent answer whose run took ``ms`` milliseconds."""
    Message.objects.create(conversation=conversation, role="user", content="q", created_at=at)
    answer = make_agent_answer(conversation, "a", created_at=at + timedelta(seconds=1), **run)
    run_id = answer.retrieval_context["agent_run_id"]
    AgentRun.objects.filter(id=run_id).update(
        started_at=at, completed_at=at + timedelta(milliseconds=ms), stop_reason=stop, status=status
    )
    return answer, AgentRun.objects.get(id=run_id)


@pytest.fixture
def seeded(settings):
    """Two days of an owner's project: three turns of two users on day 1, one on day 2, one outside."""
    settings.KGCHAT_MODEL_PRICES = PRICES
    owner, member = make_user(), make_user()
    project = make_project(owner=owner)
    add_member(project, member, "editor")
    agent, other_agent = make_agent_definition(project), make_agent_definition(project)
    mine = make_conversation(owner, project, "mine", agent_definition=agent)
    theirs = make_conversation(member, project, "theirs", agent_definition=other_agent)
    a1, r1 = turn(mine, DAY1, ms=100, model="openai/priced", input_tokens=1000, output_tokens=100)
    turn(mine, DAY1 + timedelta(hours=1), ms=300, model="openai/priced", input_tokens=500, output_tokens=50)
    a3, r3 = turn(
        theirs, DAY1 + timedelta(hours=2), ms=500, stop="max_steps", status="error", input_tokens=10
    )
    turn(mine, DAY2, ms=1000, stop="timeout", status="error", model="openai/priced", input_tokens=7)
    turn(mine, DAY1 - timedelta(days=5), ms=9, model="openai/priced", input_tokens=999_999)
    for run, errors in ((r1, ["", "boom"]), (r3, ["", "", "", "bad"])):
        for e in errors:
            AgentRunToolCall.objects.create(run=run, tool_name="search", error=e)
    MessageFeedback.objects.create(message=a1, user=owner, rating="up")
    MessageFeedback.objects.create(message=a1, user=member, rating="up")
    MessageFeedback.objects.create(message=a3, user=member, rating="down")
    return {"owner": owner, "member": member, "project": project, "agent": agent}


def get_usage(user, project, **params):
    return client_for(user).get(f"/api/projects/{project.id}/usage", params)


@pytest.mark.django_db
def test_usage_counts_turns_users_tokens_cost_tools_stops_and_feedback_per_day(seeded):
    response = get_usage(seeded["owner"], seeded["project"], **{"from": "2026-03-01", "to": "2026-03-02"})

    assert response.status_code == 200
    body = response.json()
    day1, day2 = body["days"]
    assert (body["from"], body["to"], day1["date"], day2["date"]) == (
        "2026-03-01",
        "2026-03-02",
        "2026-03-01",
        "2026-03-02",
    )
    assert (day1["turns"], day1["users"], day1["runs"]) == (3, 2, 3)
    assert (day1["inputTokens"], day1["outputTokens"]) == (1510, 150)
    assert day1["cost"] is None  # the third run's model (scripted/test) has no price
    assert (day2["turns"], day2["users"], day2["inputTokens"], day2["cost"]) == (1, 1, 7, 0.000014)
    assert day1["stopReasons"] == {"completed": 2, "max_steps": 1}
    assert day2["stopReasons"] == {"timeout": 1}
    assert (day1["toolCalls"], day1["toolErrors"], day1["toolErrorRate"]) == (6, 2, 0.3333)
    assert (day2["toolCalls"], day2["toolErrorRate"]) == (0, None)
    assert (day1["feedbackUp"], day1["feedbackDown"], day1["feedbackRatio"]) == (2, 1, 0.6667)
    totals = body["totals"]
    assert (totals["turns"], totals["users"], totals["runs"], totals["inputTokens"]) == (4, 2, 4, 1517)
    assert totals["stopReasons"] == {"completed": 2, "max_steps": 1, "timeout": 1}
    assert totals["cost"] is None


@pytest.mark.django_db
def test_usage_latency_is_the_continuous_p50_and_p95_of_time_to_done(seeded):
    body = get_usage(seeded["owner"], seeded["project"], **{"from": "2026-03-01", "to": "2026-03-02"}).json()

    day1, day2 = body["days"]
    assert (day1["doneP50Ms"], day1["doneP95Ms"]) == (300.0, 480.0)  # of 100, 300, 500 ms
    assert (day2["doneP50Ms"], day2["doneP95Ms"]) == (1000.0, 1000.0)
    assert (body["totals"]["doneP50Ms"], body["totals"]["doneP95Ms"]) == (400.0, 925.0)
    assert "timeToFirstTokenMs" not in body["totals"]  # not recorded by runs


@pytest.mark.django_db
def test_usage_of_one_agent_definition_counts_only_its_conversations_and_runs(seeded):
    body = get_usage(
        seeded["owner"],
        seeded["project"],
        **{"from": "2026-03-01", "to": "2026-03-01"},
        agentDefinitionId=str(seeded["agent"].id),
    ).json()

    (day,) = body["days"]
    assert body["agentDefinitionId"] == str(seeded["agent"].id)
    assert (day["turns"], day["users"], day["runs"], day["inputTokens"]) == (2, 1, 2, 1500)
    assert day["cost"] == pytest.approx(1000 * 2e-6 + 100 * 8e-6 + 500 * 2e-6 + 50 * 8e-6)
    assert day["stopReasons"] == {"completed": 2}
    assert (day["feedbackUp"], day["feedbackDown"], day["feedbackRatio"]) == (2, 0, 1.0)


@pytest.mark.django_db(transaction=True)
async def test_usage_counts_the_tokens_and_cost_of_a_plain_answer_and_an_agents_figures_leave_them_out(
    settings,
):
    settings.KGCHAT_MODEL, settings.KGCHAT_MODEL_PRICES = "openai/priced", PRICES
    owner = await sync_to_async(make_user)()
    project = await sync_to_async(make_project)(owner=owner)
    agent = await sync_to_async(make_agent_definition)(project)
    model = ScriptedProvider(turns=[text("Paris.", usage=Usage(input_tokens=1000, output_tokens=100))])
    await turn_start(
        principal=Principal(user=owner), message="Capital?", project_id=project.id, provider=model
    )
    await turn_wait_all()
    today = {"from": datetime.now(UTC).date().isoformat(), "to": datetime.now(UTC).date().isoformat()}

    plain = (await sync_to_async(get_usage)(owner, project, **today)).json()["totals"]
    of_agent = (
        await sync_to_async(get_usage)(owner, project, **today, agentDefinitionId=str(agent.id))
    ).json()

    assert (plain["turns"], plain["runs"], plain["inputTokens"], plain["outputTokens"]) == (1, 1, 1000, 100)
    assert plain["cost"] == pytest.approx(1000 * 2e-6 + 100 * 8e-6) and plain["stopReasons"] == {
        "completed": 1
    }
    assert (of_agent["totals"]["turns"], of_agent["totals"]["runs"], of_agent["totals"]["inputTokens"]) == (
        0,
        0,
        0,
    )


@pytest.mark.django_db
def test_usage_defaults_to_the_last_30_days_with_every_day_listed(seeded):
    body = get_usage(seeded["owner"], seeded["project"]).json()

    assert len(body["days"]) == 30
    assert body["to"] == datetime.now(UTC).date().isoformat()
    assert body["totals"]["turns"] == 0


@pytest.mark.django_db
def test_usage_needs_the_owner_role_editors_get_403_naming_it(seeded):
    response = get_usage(seeded["member"], seeded["project"])

    assert response.status_code == 403
    assert response.json()["requiredRole"] == "owner"
    assert response.json()["code"] == "forbidden"


@pytest.mark.django_db
def test_usage_of_a_project_one_is_not_a_member_of_is_404(seeded):
    response = get_usage(make_user(), seeded["project"])

    assert response.status_code == 404
    assert response.json()["code"] == "project_not_found"


@pytest.mark.django_db
def test_a_staff_admin_sees_the_usage_of_any_project(seeded):
    admin = make_user()
    admin.is_staff = True
    admin.save()

    response = get_usage(admin, seeded["project"], **{"from": "2026-03-01", "to": "2026-03-02"})

    assert response.status_code == 200
    assert response.json()["totals"]["turns"] == 4


@pytest.mark.django_db
@pytest.mark.parametrize(
    "params",
    [
        {"from": "yesterday"},
        {"to": "2026-02-30"},
        {"from": "2026-03-02", "to": "2026-03-01"},
        {"from": "2025-01-01", "to": "2026-03-01"},
        {"agentDefinitionId": "not-a-uuid"},
    ],
)
def test_bad_dates_ranges_and_ids_are_400_with_a_reason(seeded, params):
    response = get_usage(seeded["owner"], seeded["project"], **params)

    assert response.status_code == 400
    assert response.json()["code"] == "invalid_request"
    assert response.json()["error"]


@pytest.mark.django_db
def test_an_agent_definition_of_another_project_is_404(seeded):
    foreign = make_agent_definition(make_project())

    response = get_usage(seeded["owner"], seeded["project"], agentDefinitionId=str(foreign.id))

    assert response.status_code == 404
    assert response.json()["code"] == "agent_definition_not_found"


@pytest.mark.django_db
def test_the_usage_page_draws_svg_charts_for_the_owner_and_refuses_an_editor(seeded):
    url = f"/projects/{seeded['project'].id}/usage?from=2026-03-01&to=2026-03-02"

    owner_page = client_for(seeded["owner"]).get(url)
    editor_page = client_for(seeded["member"]).get(url)
    stranger_page = client_for(make_user()).get(url)
    bad_page = client_for(seeded["owner"]).get(url + "&from=nope")

    html = owner_page.content.decode()
    assert owner_page.status_code == 200
    assert html.count('<svg class="usage-chart"') == 4
    assert html.count('class="bar"') >= 2 + 3 + 3  # turns on 2 days, tokens, three stop reasons
    assert "max_steps" in html
    assert (editor_page.status_code, stranger_page.status_code, bad_page.status_code) == (403, 404, 400)


def test_the_period_is_capped_at_366_days_and_starts_29_days_before_today():
    from apps.usage.stats import InvalidUsageQuery, usage_period

    assert usage_period(today=date(2026, 3, 31)) == (date(2026, 3, 2), date(2026, 3, 31))
    assert usage_period(start="2025-03-01", end="2026-03-01") == (date(2025, 3, 1), date(2026, 3, 1))
    with pytest.raises(InvalidUsageQuery):
        usage_period(start="2025-02-28", end="2026-03-01")


@pytest.mark.django_db
def test_openapi_lists_the_usage_route_with_its_query_and_figures():
    client = client_for(make_user())

    schema = client.get("/api/openapi.json").json()

    route = schema["paths"]["/api/projects/{project_id}/usage"]["get"]
    assert {"from", "to", "agentDefinitionId"} <= {p["name"] for p in route["parameters"]}
    figures = schema["components"]["schemas"]["UsageFigures"]["properties"]
    assert {"turns", "cost", "toolErrorRate", "stopReasons", "doneP95Ms", "feedbackRatio"} <= set(figures)


@pytest.mark.django_db
def test_the_project_admin_links_to_the_usage_page(seeded):
    root = make_user()
    root.is_staff = root.is_superuser = True
    root.save()
    project = seeded["project"]

    listing = client_for(root).get("/admin/projects/project/").content.decode()
    change = client_for(root).get(f"/admin/projects/project/{project.id}/change/").content.decode()

    assert f'href="/projects/{project.id}/usage"' in listing
    assert f'href="/projects/{project.id}/usage"' in change


@pytest.mark.django_db
def test_the_project_admin_add_form_links_to_no_usage_page():
    root = make_user()
    root.is_staff = root.is_superuser = True
    root.save()

    page = client_for(root).get("/admin/projects/project/add/")

    assert page.status_code == 200
    assert "/usage" not in page.content.decode()


@pytest.mark.django_db
def test_a_viewer_gets_403_naming_the_owner_role(seeded):
    viewer = make_user()
    add_member(seeded["project"], viewer, "viewer")

    response = get_usage(viewer, seeded["project"])

    assert (response.status_code, response.json()["requiredRole"]) == (403, "owner")


@pytest.mark.django_db
def test_an_owners_token_bound_to_another_project_gets_404(seeded):
    token = make_token(seeded["owner"], make_project(owner=seeded["owner"]))

    response = Client().get(
        f"/api/projects/{seeded['project'].id}/usage", headers={"Authorization": f"Bearer {token}"}
    )

    assert response.status_code == 404
