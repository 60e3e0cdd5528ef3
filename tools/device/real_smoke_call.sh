#!/usr/bin/env bash
# tools/device/real_smoke_call.sh   (device side, as the COMMAND of the last tools/device/real_call.sh of a round)
#
# The real-weight speculation smoke on one GPU: converts the carried GGUF (tools/device/real_model.py, with a greedy
# check), saves `python -m sglang.launch_server --help`, then tools/device/real_smoke.py on the carried ShareGPT subset:
# no speculation (reference), NGRAM at SGLang's defaults, NGRAM with a deliberately poor n-gram store (capacity 64
# nodes: the drafter gate's case), NGRAM with 4 draft tokens in a chain; every server with --max-running-requests and
# --cuda-graph-max-bs-decode set together (64). Results: $OUT/smoke.md, smoke.json, smoke.tgz (logs, outputs),
# real_model.log, launch_server_help.txt, gpu.txt. SMOKE_DEADLINE (default 420 s) bounds the smoke itself.
set -o pipefail
D="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"   # this kit's folder (a copy of it travels when the checkout differs)
M=/tmp/models/smollm2-135m
G="$REAL_FILES/SmolLM2-135M-Instruct.Q4_1.gguf"
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv > "$OUT/gpu.txt" 2>&1
if [ ! -f "$M/model.safetensors" ]; then
  python3 "$D/real_model.py" "$M" --gguf "$G" --check "What is the capital of France?" 2>&1 | tee "$OUT/real_model.log" || exit 1
fi
cp "$M/real_model.json" "$OUT/" 2>/dev/null
C="--attention-backend triton --sampling-backend pytorch --mem-fraction-static 0.3 --max-running-requests 64 --cuda-graph-max-bs-decode 64"
PYTHONUNBUFFERED=1 python3 "$D/real_smoke.py" --model-dir "$M" --prompts "$REAL_FILES/sharegpt-20.jsonl" \
  --chat-template --out /tmp/smoke --help-out "$OUT/launch_server_help.txt" --common "$C" --levels 1,16 \
  --deadline "${SMOKE_DEADLINE:-420}" --scenario base= --scenario "ngram=--speculative-algorithm NGRAM" \
  --scenario "ngram-poor=--speculative-algorithm NGRAM --speculative-ngram-capacity 64" \
  --scenario "ngram-chain4=--speculative-algorithm NGRAM --speculative-num-draft-tokens 4 --speculative-ngram-max-bfs-breadth 1" \
  2>&1 | tee "$OUT/smoke.log"; rc=${PIPESTATUS[0]}
cp /tmp/smoke/smoke.md /tmp/smoke/smoke.json "$OUT/" 2>/dev/null
tar czf "$OUT/smoke.tgz" -C /tmp smoke
exit $rc
