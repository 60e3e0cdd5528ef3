#!/usr/bin/env bash
# tools/device/real_fidelity_call.sh NAME [FIDELITY ARGS ...]   (device side, as the COMMAND of the last
# tools/device/real_call.sh of a round staged with the SGLang set, the bench_serving extra set, the GGUF and
# sharegpt-1000.json; run from the repo root)
#
# The fidelity check on real weights: converts the carried GGUF (tools/device/real_model.py) unless this warm machine
# has it, then runs tools/device/fidelity.py on SmolLM2-135M with ShareGPT conversations at a request rate (RATE,
# default 16 requests/s; 240 prompts a run) and the flags the slimmed wheel set needs, plus FIDELITY ARGS (e.g.
# `--seed 11 --repeats 12 --warmup 1 --stop-after-s 300`). The check is stopped at FIDELITY_DEADLINE seconds (default
# 540) so the call always packs what it measured: $OUT/NAME.tgz (the check's folder; runs.jsonl is written run by
# run) and $OUT/NAME.log.
set -o pipefail
D="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
NAME="${1:?usage: real_fidelity_call.sh NAME [FIDELITY ARGS ...]}"; shift
if [ "${NCCL_NVLS_ENABLE:-}" != 0 ] || [ "${TORCH_SYMM_MEM_DISABLE_MULTICAST:-}" != 1 ] || [ "${NVSHMEM_DISABLE_NVLS:-}" != 1 ]; then
  echo "[real_fidelity_call] NVLink multicast is not off here: run it through tools/device/real_call.sh (bootstrap)" >&2
  exit 2
fi
M=/tmp/models/smollm2-135m
if [ ! -f "$M/model.safetensors" ]; then
  python3 "$D/real_model.py" "$M" --gguf "$REAL_FILES/SmolLM2-135M-Instruct.Q4_1.gguf" \
    --check "What is the capital of France?" > /tmp/real_model.log 2>&1 || { tail -5 /tmp/real_model.log; exit 1; }
fi
cp "$M/real_model.json" "$OUT/" 2>/dev/null
rm -rf "/tmp/$NAME"
PYTHONUNBUFFERED=1 timeout "${FIDELITY_DEADLINE:-540}" python3 "$D/fidelity.py" --model-dir "$M" --dataset sharegpt \
  --sharegpt-path "$REAL_FILES/sharegpt-1000.json" --request-rate "${RATE:-16}" --num-prompts 240 \
  --server-flags "--attention-backend triton --sampling-backend pytorch --mem-fraction-static 0.3" \
  --out "/tmp/$NAME" "$@" 2>&1 | tee "$OUT/$NAME.log"
rc=$?
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv > "/tmp/$NAME/nvidia-smi.csv" 2>&1
tar czf "$OUT/$NAME.tgz" -C /tmp "$NAME"
echo "[real_fidelity_call] fidelity.py exit $rc; packed $OUT/$NAME.tgz"
exit $rc
