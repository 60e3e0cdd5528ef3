#!/usr/bin/env bash
# autotune best configuration: study user-story-baseline, trial 5 (id c5ae28a6)
# Engine: SIMULATED (profile kimi-k2.5-int4-8x-rtxpro6000), not a measurement (simulated hardware 8 x SIMULATED NVIDIA RTX PRO 6000 Blackwell; autotune 0.1.0 simulator; time scale 20x, figures in simulated time)
# Objectives: output_tok_per_s@max = 1599
# Params: max_running_requests=128, mem_fraction_static=0.83
# Concurrency 1: 63.4 output tok/s, TTFT p99 81.6 ms, TPOT median 15.50 ms
# Concurrency 8: 425.3 output tok/s, TTFT p99 413.4 ms, TPOT median 17.29 ms
# Concurrency 32: 881.8 output tok/s, TTFT p99 1627.2 ms, TPOT median 31.67 ms
# Concurrency 128: 1,598.5 output tok/s, TTFT p99 6526.1 ms, TPOT median 66.09 ms
#
# REHEARSAL: starts autotune's SIMULATED SGLang server exactly as the study measured it (for CPU machines and
# for python -m autotune.verify). It is not SGLang; launch.sh is the real command.
#
# Host and port: the server binds to 127.0.0.1 (loopback): only this machine can reach it. HOST and PORT override them (default port 30000).
# Serve other machines only behind a firewall or an authenticating proxy (or pass -- --api-key KEY).
#
# Usage: ./rehearse_sim.sh [--dry-run] [-- EXTRA ARGS]
#   runs the simulated server with ${PYTHON:-python3} (exec: signals reach it directly); --dry-run (or DRY_RUN=1)
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
  "${PYTHON:-python3}" -m autotune.sim.server
  --sim-profile kimi-k2.5-int4-8x-rtxpro6000
  --sim-time-scale 20.0
  --sim-seed 0
  --model-path /models/kimi-k2.5-int4
  --tp-size 8
  --trust-remote-code
  --max-running-requests 128
  --mem-fraction-static 0.83
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
