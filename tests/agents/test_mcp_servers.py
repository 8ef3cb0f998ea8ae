"""Issue #11 part 3: an agent definition's MCP servers are an operator's decision, not a user's.

Findings: any logged-in user could make the server run any command (``mcpServers`` with a
``command``) or connect anywhere (``url``: SSRF into the host network, cloud metadata, the
database port); the admin form was the same.
"""

from __future__ import annotations

import ipaddress
import json

import pytest
from django.contrib.auth import get_user_model
from django.test import Client

from apps.agents import mcp_servers
from apps.agents.models import AgentDefinition
from tests.factories import add_member, make_agent_definition, make_project, make_user

pytestmark = pytest.mark.django_db

PUBLIC = "93.184.216.34"


@pytest.fixture
def owner():
    user = make_user()
    project = make_project(owner=user)
    client = Client()
    client.force_login(user)
    return client, project


@pytest.fixture
def resolver(monkeypatch):
    """The guard's DNS lookup, answered from a table (no network); records what was asked."""
    table: dict[str, list[str]] = {}
    asked: list[str] = []

    def resolve(host, port):
        asked.append(host)
        if host not in table:
            raise OSError(f"unknown host {host}")
        return [ipaddress.ip_address(a) for a in table[host]]

    monkeypatch.setattr(mcp_servers, "resolve", resolve)
    return table, asked


def post(client, project, servers, name="with-mcp"):
    return client.post(
        f"/api/projects/{project.id}/agent-definitions",
        {"name": name, "mcpServers": servers},
        content_type="application/json",
    )


def patch(client, definition, body):
    return client.patch(f"/api/agent-definitions/{definition.id}", body, content_type="application/json")


# --- commands -----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "entry",
    [
        {"command": "sh", "args": ["-c", "id > /tmp/owned"]},
        {"name": "x", "command": "python", "env": {"A": "1"}},
        {"stdio": "echo", "command": "sh"},
        {"stdio": "echo", "args": ["--evil"]},
    ],
)
def test_definition_with_a_command_is_400_naming_it_and_stores_nothing(owner, settings, entry):
    client, project = owner
    settings.KGCHAT_MCP_STDIO_SERVERS = {"echo": {"command": "/bin/true"}}

    response = post(client, project, [entry])

    assert response.status_code == 400
    body = response.json()
    assert body["code"] == "invalid_agent_definition"
    assert "mcp_servers[0]" in body["error"] and "must not carry" in body["error"]
    assert not AgentDefinition.objects.filter(project=project).exists()


def test_patching_in_a_command_is_400_and_changes_nothing(owner):
    client, project = owner
    definition = make_agent_definition(project)

    response = patch(client, definition, {"mcpServers": [{"command": "sh"}], "maxSteps": 3})

    definition.refresh_from_db()
    assert response.status_code == 400
    assert (definition.mcp_servers, definition.max_steps) == ([], 15)


def test_stdio_server_must_be_one_the_operator_allowlisted(owner, settings):
    client, project = owner
    settings.KGCHAT_MCP_STDIO_SERVERS = {"echo": {"command": "/bin/true"}}

    unknown = post(client, project, [{"stdio": "bash"}], name="unknown")
    known = post(client, project, [{"stdio": "echo", "tool_filter": ["shout"]}], name="known")

    assert unknown.status_code == 400
    assert "no stdio MCP server named 'bash'" in unknown.json()["error"]
    assert "echo" in unknown.json()["error"]
    assert known.status_code == 201, known.json()
    assert known.json()["mcpServers"] == [{"stdio": "echo", "tool_filter": ["shout"]}]


def test_entry_with_unknown_keys_is_400(owner, settings):
    client, project = owner
    settings.KGCHAT_MCP_STDIO_SERVERS = {"echo": {"command": "/bin/true"}}

    response = post(client, project, [{"stdio": "echo", "cwd_override": "/"}])

    assert response.status_code == 400
    assert "cwd_override" in response.json()["error"]


# --- URLs (SSRF) --------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("url", "allowlist", "fragment"),
    [
        ("http://127.0.0.1:8000/mcp", ["mcp.example.com"], "not in the operator's MCP allowlist"),
        ("https://127.0.0.1/mcp", ["mcp.example.com"], "not in the operator's MCP allowlist"),
        ("http://[::1]:8000/mcp", ["127.0.0.1:8000"], "not in the operator's MCP allowlist"),
        ("http://169.254.169.254/latest/meta-data/", [], "not in the operator's MCP allowlist"),
        ("https://169.254.169.254/latest/meta-data/", ["169.254.169.254"], "cloud metadata"),
        ("https://10.1.2.3/mcp", ["10.1.2.3"], "a private address"),
        ("https://[fd00::1]/mcp", ["fd00::1"], "a private address"),
        ("https://[::ffff:10.0.0.1]/mcp", ["::ffff:10.0.0.1"], "a private address"),
        ("https://100.64.0.9/mcp", ["100.64.0.9"], "CGNAT"),
        ("https://224.0.0.1/mcp", ["224.0.0.1"], "multicast"),
        ("https://0.0.0.0/mcp", ["0.0.0.0"], "unspecified"),
        ("https://private.example.com/mcp", ["private.example.com"], "resolves to 10.0.0.5"),
        ("https://metadata.example.com/mcp", ["metadata.example.com"], "cloud metadata"),
        ("https://nowhere.example.com/mcp", ["nowhere.example.com"], "does not resolve"),
        ("http://mcp.example.com/mcp", ["mcp.example.com"], "https"),
        ("https://mcp.example.com:8443/mcp", ["mcp.example.com"], "mcp.example.com:8443 is not in"),
        ("https://user:pw@mcp.example.com/mcp", ["mcp.example.com"], "credentials"),
        ("file:///etc/passwd", ["mcp.example.com"], "http(s)"),
    ],
)
def test_definition_with_a_disallowed_url_is_400_and_stores_nothing(
    owner, settings, resolver, url, allowlist, fragment
):
    client, project = owner
    settings.KGCHAT_MCP_URL_ALLOWLIST = allowlist
    table, _ = resolver
    table.update(
        {
            "mcp.example.com": [PUBLIC],
            "private.example.com": [PUBLIC, "10.0.0.5"],
            "metadata.example.com": ["169.254.169.254"],
        }
    )

    response = post(client, project, [{"url": url}])

    assert response.status_code == 400
    assert response.json()["code"] == "invalid_agent_definition"
    assert fragment in response.json()["error"]
    assert not AgentDefinition.objects.filter(project=project).exists()


@pytest.mark.parametrize(
    ("url", "allowlist"),
    [
        ("https://mcp.example.com/mcp", ["mcp.example.com"]),
        ("https://mcp.example.com:8443/mcp", ["MCP.example.com:8443"]),
        ("http://127.0.0.1:8765/mcp", ["127.0.0.1:8765"]),
        ("http://[::1]:8765/mcp", ["[::1]:8765"]),
    ],
)
def test_allowlisted_url_is_accepted(owner, settings, resolver, url, allowlist):
    client, project = owner
    settings.KGCHAT_MCP_URL_ALLOWLIST = allowlist
    resolver[0]["mcp.example.com"] = [PUBLIC]

    response = post(client, project, [{"url": url, "name": "tools", "transport": "sse"}])

    assert response.status_code == 201, response.json()
    assert response.json()["mcpServers"] == [{"url": url, "name": "tools", "transport": "sse"}]


def test_loopback_name_must_resolve_to_loopback_only(owner, settings, resolver):
    client, project = owner
    settings.KGCHAT_MCP_URL_ALLOWLIST = ["localhost:8765"]
    resolver[0]["localhost"] = ["127.0.0.1", "10.0.0.8"]

    response = post(client, project, [{"url": "http://localhost:8765/mcp"}])

    assert response.status_code == 400
    assert "not loopback" in response.json()["error"]


# --- headers (operator credentials) ---------------------------------------------------------------


def test_headers_cannot_be_set_over_rest(owner, settings, resolver):
    client, project = owner
    settings.KGCHAT_MCP_URL_ALLOWLIST = ["mcp.example.com"]
    resolver[0]["mcp.example.com"] = [PUBLIC]

    response = post(
        client, project, [{"url": "https://mcp.example.com/mcp", "headers": {"Authorization": "x"}}]
    )

    assert response.status_code == 400
    assert "headers can only be set by an operator" in response.json()["error"]


def test_rest_api_never_echoes_operator_headers(owner):
    client, project = owner
    definition = make_agent_definition(
        project,
        mcp_servers=[{"url": "https://mcp.example.com/mcp", "headers": {"Authorization": "Bearer s3cret"}}],
    )

    read = client.get(f"/api/agent-definitions/{definition.id}")
    listed = client.get(f"/api/projects/{project.id}/agent-definitions")

    assert read.json()["mcpServers"] == [
        {"url": "https://mcp.example.com/mcp", "transport": "streamable_http"}
    ]
    assert "s3cret" not in read.content.decode() and "s3cret" not in listed.content.decode()


def test_legacy_command_entries_are_never_shown(owner):
    client, project = owner
    definition = make_agent_definition(
        project, mcp_servers=[{"command": "sh", "args": ["-c", "secret"]}], disabled_reason="old command"
    )

    read = client.get(f"/api/agent-definitions/{definition.id}").json()

    assert read["mcpServers"] == [{"invalid": True}]
    assert read["disabledReason"] == "old command"


# --- who may set them -------------------------------------------------------------------------------


@pytest.fixture
def editor_of(owner, settings):
    _, project = owner
    settings.KGCHAT_MCP_STDIO_SERVERS = {"echo": {"command": "/bin/true"}, "other": {"command": "/bin/true"}}
    editor = make_user()
    add_member(project, editor, "editor")
    client = Client()
    client.force_login(editor)
    return client, project


def test_only_owners_may_set_mcp_servers(editor_of):
    client, project = editor_of

    created = post(client, project, [{"stdio": "echo"}])

    assert created.status_code == 403
    assert created.json()["code"] == "forbidden"
    assert not AgentDefinition.objects.filter(project=project).exists()


def test_only_owners_may_change_mcp_servers_but_editors_edit_the_rest(editor_of, owner):
    client, project = editor_of
    owner_client, _ = owner
    stored = [{"url": "https://mcp.example.com/mcp", "headers": {"X-Key": "k"}}, {"stdio": "echo"}]
    definition = make_agent_definition(project, mcp_servers=stored)
    shown = client.get(f"/api/agent-definitions/{definition.id}").json()["mcpServers"]

    other_fields = patch(client, definition, {"maxSteps": 4})
    echoed = patch(client, definition, {"mcpServers": shown, "maxSteps": 5})
    changed = patch(client, definition, {"mcpServers": [{"stdio": "other"}]})
    by_owner = patch(owner_client, definition, {"mcpServers": [{"stdio": "other"}]})

    assert (other_fields.status_code, echoed.status_code) == (200, 200)
    assert changed.status_code == 403
    assert by_owner.status_code == 200
    definition.refresh_from_db()
    assert definition.max_steps == 5
    assert definition.mcp_servers == [{"stdio": "other"}]


def test_owner_keeps_operator_headers_of_an_unchanged_url_entry(owner, settings):
    client, project = owner
    settings.KGCHAT_MCP_STDIO_SERVERS = {"echo": {"command": "/bin/true"}}
    settings.KGCHAT_MCP_URL_ALLOWLIST = ["127.0.0.1:8765"]
    url = "http://127.0.0.1:8765/mcp"
    definition = make_agent_definition(project, mcp_servers=[{"url": url, "headers": {"X-Key": "k"}}])

    response = patch(client, definition, {"mcpServers": [{"url": url}, {"stdio": "echo"}]})

    definition.refresh_from_db()
    assert response.status_code == 200, response.json()
    assert definition.mcp_servers == [
        {"url": url, "transport": "streamable_http", "headers": {"X-Key": "k"}},
        {"stdio": "echo"},
    ]


def test_strangers_get_404_not_403():
    project = make_project()
    stranger = make_user()
    client = Client()
    client.force_login(stranger)

    response = post(client, project, [{"stdio": "echo"}])

    assert response.status_code == 404


# --- the admin ------------------------------------------------------------------------------------


@pytest.fixture
def admin_client():
    user = get_user_model().objects.create_superuser("root", "", "pw-root-123")
    client = Client()
    client.force_login(user)
    return client


def admin_form(project, servers):
    return {
        "project": project.id,
        "name": "from-admin",
        "description": "",
        "system_prompt": "",
        "tools": ["hybrid_search"],
        "model_name": "openai/gpt-4o-mini",
        "temperature": "0.1",
        "flow_type": "single",
        "max_steps": "5",
        "visibility": "project",
        "sub_agents": "",
        "mcp_servers": json.dumps(servers),
        "history_limit": "10",
        "token_budget": "32000",
        "disabled_reason": "",
    }


def test_admin_form_refuses_a_command(admin_client):
    project = make_project()

    response = admin_client.post(
        "/admin/agents/agentdefinition/add/", admin_form(project, [{"command": "sh", "args": ["-c", "id"]}])
    )

    assert response.status_code == 200
    assert "must not carry command, args" in response.content.decode()
    assert not AgentDefinition.objects.filter(name="from-admin").exists()


def test_admin_form_refuses_a_disallowed_url(admin_client, settings):
    project = make_project()
    settings.KGCHAT_MCP_URL_ALLOWLIST = []

    response = admin_client.post(
        "/admin/agents/agentdefinition/add/", admin_form(project, [{"url": "http://169.254.169.254/"}])
    )

    assert response.status_code == 200
    assert "not in the operator&#x27;s MCP allowlist" in response.content.decode()
    assert not AgentDefinition.objects.filter(name="from-admin").exists()


def test_admin_stores_operator_headers_for_an_allowlisted_url(admin_client, settings):
    project = make_project()
    settings.KGCHAT_MCP_URL_ALLOWLIST = ["127.0.0.1:8765"]
    entry = {"url": "http://127.0.0.1:8765/mcp", "headers": {"Authorization": "Bearer k"}}

    response = admin_client.post("/admin/agents/agentdefinition/add/", admin_form(project, [entry]))

    assert response.status_code == 302, response.content.decode()[:3000]
    saved = AgentDefinition.objects.get(name="from-admin")
    assert saved.mcp_servers == [{**entry, "transport": "streamable_http"}]


def test_admin_shows_why_a_definition_is_disabled(admin_client):
    definition = make_agent_definition(make_project(), disabled_reason="Disabled by migration agents.0002: x")

    page = admin_client.get(f"/admin/agents/agentdefinition/{definition.id}/change/").content.decode()

    assert "This agent definition is disabled: Disabled by migration agents.0002: x" in page


# --- the operator's settings ------------------------------------------------------------------------


def test_system_check_reports_misconfigured_mcp_settings(settings):
    from django.core.checks import run_checks

    settings.KGCHAT_MCP_STDIO_SERVERS = {"bad": {"args": ["no command"]}}
    settings.KGCHAT_MCP_URL_ALLOWLIST = ["ok.example.com", "bad.example.com:http"]

    ids = sorted(m.id for m in run_checks() if m.id and m.id.startswith("kgchat.E10"))

    assert ids == ["kgchat.E101", "kgchat.E102"]


def test_malformed_stdio_settings_refuse_stdio_servers_with_a_clear_400(owner, settings):
    client, project = owner
    settings.KGCHAT_MCP_STDIO_SERVERS = ["not", "an", "object"]

    response = post(client, project, [{"stdio": "echo"}])

    assert response.status_code == 400
    assert "KGCHAT_MCP_STDIO_SERVERS is misconfigured" in response.json()["error"]
