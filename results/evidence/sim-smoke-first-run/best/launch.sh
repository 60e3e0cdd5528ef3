#!/usr/bin/env bash
# autotune best configuration: study smoke, trial 2 (id 8a4daf31)
# Engine: SIMULATED (profile h200-llama-1b), not a measurement (simulated hardware 1 x SIMULATED NVIDIA H200; autotune 0.1.0 simulator; time scale 10x, figures in simulated time)
# Objectives: output_tok_per_s@max = 2.013e+04
# Params: cuda_graph_max_bs_decode=128, max_running_requests=94, mem_fraction_static=0.73
# Concurrency 1: 799.5 output tok/s, TTFT p99 3.0 ms, TPOT median 1.22 ms
# Concurrency 16: 9,499.4 output tok/s, TTFT p99 11.8 ms, TPOT median 1.52 ms
# Concurrency 64: 20,127.1 output tok/s, TTFT p99 46.4 ms, TPOT median 2.49 ms
#
# TUNED ON THE SIMULATOR: the figures above are simulated, not measured. This is the SGLang command the
# tuned configuration stands for (model path and fixed flags from the study). Measure it on your GPUs
# before relying on it: python -m autotune.verify <results/study> (rehearse_sim.sh runs the simulator).
# Simulated model: meta-llama/Llama-3.2-1B (profile h200-llama-1b).
#
# Host and port: the server binds to 127.0.0.1 (loopback): only this machine can reach it. HOST and PORT override them (default port 30000).
# Serve other machines only behind a firewall or an authenticating proxy (or pass -- --api-key KEY).
#
# Usage: ./launch.sh [--dry-run] [-- EXTRA ARGS]
#   runs the SGLang server with ${PYTHON:-python3} (exec: signals reach it directly); --dry-run (or DRY_RUN=1)
#   prints the environment and the command without running anything; EXTRA ARGS are appended to the command.

set -euo pipefail

DRY_RUN="${DRY_RUN:-0}"
EXTRA=()
while [[ $# -gt 0 ]]; do
  case "$1" in
    --dry-run|-n) DRY_RUN=1 ;;
    -h|--help) sed -n '2,/^set -euo/p' "$0" | sed '$d'; exit 0 ;;
    --) shift; EXTRA=("$@"); break ;;
    *) echo "$(basename "$0"): unknown argument: $1 (use --dry-run, or -- before server arguments)" >&2; exit 2 ;;
  esac
  shift
done

# The environment the server was measured with (a secret is read from your environment, never stored).
# (autotune set no variable for this server)
ENV_NAMES=()
# Inherited variables the measured server did not have (Ray sets OMP_NUM_THREADS in its workers).
UNSET_ENV=(OMP_NUM_THREADS)

CMD=(
  "${PYTHON:-python3}" -m sglang.launch_server
  --model-path meta-llama/Llama-3.2-1B
  --tp-size 1
  --attention-backend triton
  --mem-fraction-static 0.73
  --max-running-requests 94
  --cuda-graph-max-bs-decode 128
  --host "${HOST:-127.0.0.1}"
  --port "${PORT:-30000}"
)
CMD+=(${EXTRA[@]+"${EXTRA[@]}"})
RUN=(env)
for name in ${UNSET_ENV[@]+"${UNSET_ENV[@]}"}; do RUN+=(-u "$name"); done

if [[ "$DRY_RUN" != "0" ]]; then
  echo "# dry run: nothing started"
  for name in ${ENV_NAMES[@]+"${ENV_NAMES[@]}"}; do printf 'export %s=%q\n' "$name" "${!name}"; done
  printf '%q ' "${RUN[@]}" "${CMD[@]}"
  echo
  exit 0
fi

exec "${RUN[@]}" "${CMD[@]}"
