"""What ``make run`` did before it served: a fresh cluster in ``KGCHAT_DATA_DIR``, the migrations,
the demo project with its graph and default agents, the admin login printed once, recovery, and
the embedding worker beside daphne."""

from __future__ import annotations

import time

from tests.blackbox.clients import TIMEOUT, Api
from tests.blackbox.server import Kgchat


def worker_log(kgchat: Kgchat) -> str:
    """The embedding worker's log once it has started (it loads Django first; waits at most TIMEOUT s)."""
    log = kgchat.data_dir / "embed_worker.log"
    deadline = time.monotonic() + TIMEOUT
    while time.monotonic() < deadline and "embed_worker: pid" not in (
        text := log.read_text() if log.exists() else ""
    ):
        time.sleep(0.2)
    return text


def test_make_run_sets_up_a_fresh_installation_in_its_data_directory_and_prints_the_login_once(
    kgchat: Kgchat, admin: Api
) -> None:
    output = kgchat.output()

    projects = admin.call("GET /api/projects", 200).json()
    demo = next(p for p in projects["items"] if p["slug"] == "demo")

    assert output.count("Created the login") == 1
    assert "Installed default agents: graph-query-agent, graph-curator-agent" in output
    assert "interrupted run(s) recovered" in output
    assert demo["role"] == "owner"
    assert (kgchat.data_dir / "pg" / "PG_VERSION").exists()
    assert (kgchat.data_dir / "embed_worker.pid").exists()
    assert "embed_worker: pid" in worker_log(kgchat)
    progress = admin.call("GET /api/projects/{project_id}/graph/embedding", 200, project_id="demo").json()
    assert progress["total"] > 4000
