#!/usr/bin/env bash
# autotune best configuration: study speculative, trial 31 (id 59eda3b9)
# Engine: SIMULATED (profile kimi-k2.5-int4-8x-rtxpro6000), not a measurement (simulated hardware 8 x SIMULATED NVIDIA RTX PRO 6000 Blackwell; autotune 0.5.17 simulator; time scale 5x, figures in simulated time)
# Objectives: output_tok_per_s@max = 1596
# Params: mem_fraction_static=0.8250651145516794
# Concurrency 1: 62.8 output tok/s, TTFT p99 95.0 ms, TPOT median 15.59 ms
# Concurrency 8: 422.0 output tok/s, TTFT p99 463.3 ms, TPOT median 17.34 ms
# Concurrency 32: 869.5 output tok/s, TTFT p99 1677.3 ms, TPOT median 32.78 ms
# Concurrency 128: 1,595.9 output tok/s, TTFT p99 6476.1 ms, TPOT median 65.51 ms
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
  /root/.pyenv/versions/3.11.7/bin/python
  -m autotune.sim.server
  --sim-profile kimi-k2.5-int4-8x-rtxpro6000
  --sim-time-scale 5.0
  --sim-seed 0
  --model-path /models/kimi-k2.5-int4
  --tp-size 8
  --trust-remote-code
  --mem-fraction-static 0.8250651145516794
  --host 127.0.0.1
  --port 45031
  --nccl-port 33205
)

if [[ "$DRY_RUN" != "0" ]]; then
  echo "# dry run: nothing started"
  for name in ${AUTOTUNE_ENV_NAMES[@]+"${AUTOTUNE_ENV_NAMES[@]}"}; do printf 'export %s=%q\n' "$name" "${!name}"; done
  printf '%q ' "${CMD[@]}"
  echo
  exit 0
fi

exec "${CMD[@]}"
