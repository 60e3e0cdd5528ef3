#!/usr/bin/env bash
# autotune best configuration: study h200-tp1-speculative-r2, trial 2 (id e01ece53)
# Engine: SGLang 0.5.17 on 1 x NVIDIA H200 on node vm (measured)
# Objectives: output_tok_per_s@max = 1.714e+04
# Params: max_running_requests=128, mem_fraction_static=0.82, speculative_algorithm=EAGLE3, speculative_draft_model_path=/tmp/models/eagle3-llama-1b, speculative_eagle_topk=1, speculative_num_steps=3
# Concurrency 1: 825.4 output tok/s, TTFT p99 21.7 ms, TPOT median 1.11 ms
# Concurrency 16: 6,870.1 output tok/s, TTFT p99 45.1 ms, TPOT median 1.91 ms
# Concurrency 64: 17,143.1 output tok/s, TTFT p99 214.0 ms, TPOT median 3.49 ms
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
export SGLANG_SIMULATE_ACC_LEN=3.0
export TORCH_SYMM_MEM_DISABLE_MULTICAST=1
AUTOTUNE_ENV_NAMES=(NCCL_NVLS_ENABLE NVSHMEM_DISABLE_NVLS SGLANG_SIMULATE_ACC_LEN TORCH_SYMM_MEM_DISABLE_MULTICAST)

# The exact server command.
CMD=(
  /opt/torch/.venv/bin/python3
  -m sglang.launch_server
  --model-path /tmp/models/llama-1b
  --tp-size 1
  --load-format dummy
  --attention-backend triton
  --sampling-backend pytorch
  --cuda-graph-max-bs-decode 128
  --speculative-algorithm EAGLE3
  --speculative-draft-model-path /tmp/models/eagle3-llama-1b
  --speculative-num-steps 3
  --speculative-eagle-topk 1
  --max-running-requests 128
  --mem-fraction-static 0.82
  --speculative-num-draft-tokens 4
  --host 127.0.0.1
  --port 47723
  --nccl-port 38209
)

if [[ "$DRY_RUN" != "0" ]]; then
  echo "# dry run: nothing started"
  for name in ${AUTOTUNE_ENV_NAMES[@]+"${AUTOTUNE_ENV_NAMES[@]}"}; do printf 'export %s=%q\n' "$name" "${!name}"; done
  printf '%q ' "${CMD[@]}"
  echo
  exit 0
fi

exec "${CMD[@]}"
