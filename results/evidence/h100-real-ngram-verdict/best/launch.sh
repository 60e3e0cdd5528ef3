#!/usr/bin/env bash
# autotune best configuration: study h200-real-ngram-verdict, trial 1 (id 7728160b)
# Engine: SGLang 0.5.17 on 1 x NVIDIA H100 80GB HBM3 on node vm (measured)
# Objectives: output_tok_per_s@max = 1.019e+04
# Params:
# Concurrency 1: 692.1 output tok/s, TTFT p99 18.4 ms, TPOT median 1.40 ms
# Concurrency 8: 3,413.3 output tok/s, TTFT p99 42.1 ms, TPOT median 1.86 ms
# Concurrency 32: 10,191.4 output tok/s, TTFT p99 81.8 ms, TPOT median 2.37 ms
# 8 req/s: 1,657.4 output tok/s, TTFT p99 28.6 ms, TPOT median 1.73 ms
#
# Measured with these benchmark-only settings, left out here (remove or re-measure on real weights):
#   --attention-backend triton: the lent machine's slimmed wheel set lacks fa3 (Hopper's default); re-measure with the default
#   --sampling-backend pytorch: the kit avoids flashinfer's sampler JIT compile; re-measure with the default
# To run exactly as measured: bash launch.sh -- --attention-backend triton --sampling-backend pytorch
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
# NVLink multicast was switched off where it was measured (the site's policy, autotune.core.site, or the
# study's own setting). Keep these where your site needs multicast off.
export NCCL_NVLS_ENABLE=0
export NVSHMEM_DISABLE_NVLS=1
export TORCH_SYMM_MEM_DISABLE_MULTICAST=1
ENV_NAMES=(NCCL_NVLS_ENABLE NVSHMEM_DISABLE_NVLS TORCH_SYMM_MEM_DISABLE_MULTICAST)
# Inherited variables the measured server did not have (Ray sets OMP_NUM_THREADS in its workers).
UNSET_ENV=(OMP_NUM_THREADS)

CMD=(
  "${PYTHON:-python3}" -m sglang.launch_server
  --model-path /tmp/models/smollm2-135m
  --tp-size 1
  --mem-fraction-static 0.3
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
