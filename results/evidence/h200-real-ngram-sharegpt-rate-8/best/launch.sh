#!/usr/bin/env bash
# autotune best configuration: study h200-real-ngram-sharegpt-rate, trial 0 (id 0f194830)
# Engine: SGLang 0.5.17 on 1 x NVIDIA H200 on node vm (measured)
# Objectives: output_tok_per_s@max = 1.118e+04
# Params:
# Concurrency 1: 655.2 output tok/s, TTFT p99 18.0 ms, TPOT median 1.45 ms
# Concurrency 8: 4,134.3 output tok/s, TTFT p99 45.6 ms, TPOT median 1.66 ms
# Concurrency 32: 11,179.9 output tok/s, TTFT p99 78.5 ms, TPOT median 2.05 ms
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
# The site's variables where it was measured (autotune.core.site: NVLink multicast switched off for every
# process). Keep them where your site needs multicast off.
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
