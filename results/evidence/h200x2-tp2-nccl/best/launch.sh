#!/usr/bin/env bash
# autotune best configuration: study h200x2-tp2-nccl, trial 0 (id cb3aa2f2)
# Engine: SGLang 0.5.17 on 2 x NVIDIA H200 on node vm (measured)
# Objectives: output_tok_per_s@max = 1.382e+04
# Params: disable_custom_all_reduce=False
# Concurrency 1: 306.4 output tok/s, TTFT p99 34.6 ms, TPOT median 3.17 ms
# Concurrency 16: 4,386.1 output tok/s, TTFT p99 59.3 ms, TPOT median 3.44 ms
# Concurrency 64: 13,822.9 output tok/s, TTFT p99 139.6 ms, TPOT median 4.16 ms
#
# Host: the server binds to 127.0.0.1 (loopback): only this machine can reach it.
# To serve other machines, change the value after --host (e.g. to this node's address) only behind a
# firewall or an authenticating proxy: the SGLang HTTP server has no authentication.
#
# Usage: ./launch.sh            run the server (exec: signals reach it directly)
#        ./launch.sh --dry-run  print the environment and the command without running anything
#        DRY_RUN=1 ./launch.sh  same as --dry-run

set -euo pipefail

DRY_RUN="${DRY_RUN:-0}"
for arg in "$@"; do
  case "$arg" in
    --dry-run|-n) DRY_RUN=1 ;;
    -h|--help) sed -n '2,/^set -euo/p' "$0" | sed '$d'; exit 0 ;;
    *) echo "launch.sh: unknown argument: $arg (use --dry-run to print the command)" >&2; exit 2 ;;
  esac
done

# Environment autotune set for this trial (exact values).
export NCCL_NVLS_ENABLE=0
export NVSHMEM_DISABLE_NVLS=1
export TORCH_SYMM_MEM_DISABLE_MULTICAST=1
AUTOTUNE_ENV_NAMES=(NCCL_NVLS_ENABLE NVSHMEM_DISABLE_NVLS TORCH_SYMM_MEM_DISABLE_MULTICAST)

# The exact server command.
CMD=(
  /opt/torch/.venv/bin/python3
  -m sglang.launch_server
  --model-path /tmp/models/llama-8b
  --tp-size 2
  --load-format dummy
  --attention-backend triton
  --sampling-backend pytorch
  --mem-fraction-static 0.8
  --cuda-graph-max-bs-decode 64
  --host 127.0.0.1
  --port 44201
  --nccl-port 44001
)

if [[ "$DRY_RUN" != "0" ]]; then
  echo "# dry run: nothing started"
  for name in ${AUTOTUNE_ENV_NAMES[@]+"${AUTOTUNE_ENV_NAMES[@]}"}; do printf 'export %s=%q\n' "$name" "${!name}"; done
  printf '%q ' "${CMD[@]}"
  echo
  exit 0
fi

exec "${CMD[@]}"
