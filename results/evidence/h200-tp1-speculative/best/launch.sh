#!/usr/bin/env bash
# autotune best configuration: study h200-tp1-speculative, trial 7 (id d6cd0f29)
# Engine: SGLang 0.5.17 on 1 x NVIDIA H200 on node vm (measured)
# Objectives: output_tok_per_s@max = 2.381e+04
# Params: max_running_requests=64, mem_fraction_static=0.88, speculative_algorithm=EAGLE3, speculative_draft_model_path=/tmp/models/eagle3-llama-1b, speculative_eagle_topk=1, speculative_num_steps=2
# Concurrency 1: 946.5 output tok/s, TTFT p99 16.7 ms, TPOT median 0.99 ms
# Concurrency 16: 11,616.6 output tok/s, TTFT p99 117.2 ms, TPOT median 1.10 ms
# Concurrency 64: 23,806.1 output tok/s, TTFT p99 153.6 ms, TPOT median 2.16 ms
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
  --speculative-num-steps 2
  --speculative-eagle-topk 1
  --max-running-requests 64
  --mem-fraction-static 0.88
  --speculative-num-draft-tokens 3
  --host 127.0.0.1
  --port 50631
  --nccl-port 60443
)

if [[ "$DRY_RUN" != "0" ]]; then
  echo "# dry run: nothing started"
  for name in ${AUTOTUNE_ENV_NAMES[@]+"${AUTOTUNE_ENV_NAMES[@]}"}; do printf 'export %s=%q\n' "$name" "${!name}"; done
  printf '%q ' "${CMD[@]}"
  echo
  exit 0
fi

exec "${CMD[@]}"
