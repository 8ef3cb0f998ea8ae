"""A burst of 200 new conversations started at once by 10 users over SSE against kgchat as
``make run`` serves it (issue #23 item 6; ``tests/blackbox/test_burst.py`` is the 50-conversation
test in ``make test``). Half plain, half with the default agent, the scripted model answering at
once. Prints what every request got and when the answers ended; exits 1 when any was not answered.

Uses the black-box suite's pieces (``tests/blackbox``): ``make run`` in a temporary data
directory, the scripted model, users added in the Django admin. ``python -m bench burst``.
"""

from __future__ import annotations

import asyncio
import os
import tempfile
from pathlib import Path

import httpx

USERS = int(os.environ.get("BENCH_BURST_USERS", "10"))
PER_USER = int(os.environ.get("BENCH_BURST_PER_USER", "20"))  # 20 a user: under the 30 a minute limit


def run() -> None:
    from tests.blackbox import server
    from tests.blackbox.burst import burst_async, crowd_make
    from tests.blackbox.clients import Api
    from tests.blackbox.model import scripted_server
    from tests.blackbox.shapes import OpenApi

    llm, model = scripted_server()
    with llm, tempfile.TemporaryDirectory(prefix="kgchat-burst-") as workdir:
        Path(workdir).chmod(0o755)
        kgchat = server.start(llm.base_url, Path(workdir))
        try:
            openapi = OpenApi(httpx.get(f"{kgchat.url}/api/openapi.json", timeout=60).json())
            admin = Api(kgchat.url, openapi).login(*kgchat.admin)
            users, project, agent = crowd_make(admin, admin, USERS)
            burst = asyncio.run(burst_async(users, project, agent, per_user=PER_USER))
            print(burst.report(), flush=True)
            for api in [admin, *users]:
                api.close()
        finally:
            model.release_all()
            kgchat.stop()
    if not all(o.answered for o in burst.outcomes):
        raise SystemExit(
            f"{sum(not o.answered for o in burst.outcomes)} of {len(burst.outcomes)} not answered"
        )
