#!/usr/bin/env bash
# tools/device/real_study_call.sh [SPACE]   (device side, as the COMMAND of the last tools/device/real_call.sh of a
# round staged with the SGLang set, the Ray set, the GGUF and sharegpt-256.jsonl; run from the repo root)
#
# The combined real-weight study: converts the carried GGUF (tools/device/real_model.py) unless this warm machine has
# it, writes the 256 ShareGPT prompts through the model's chat template to $REAL_FILES/sharegpt-256-chat.jsonl (the
# space's workload.path), then runs tools/device/run_call_b.sh on SPACE (default search_spaces/h200-tp1-ngram.yaml)
# with the round's wheel sets and no dummy models. STUDY_DEADLINE (default 560) is run_call_b's --deadline; the study
# stops at STUDY_STOP_S (default 420) and resumes when the same call is sent again on the warm machine (finished
# trials are kept). Results come back as $OUT/study-<name>.tgz, run.log, summary.json, plus real_model.json.
set -o pipefail
D="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
SPACE="${1:-search_spaces/h200-tp1-ngram.yaml}"
M=/tmp/models/smollm2-135m
if [ ! -f "$M/model.safetensors" ]; then
  python3 "$D/real_model.py" "$M" --gguf "$REAL_FILES/SmolLM2-135M-Instruct.Q4_1.gguf" \
    --check "What is the capital of France?" > /tmp/real_model.log 2>&1 || { tail -5 /tmp/real_model.log; exit 1; }
fi
cp "$M/real_model.json" "$OUT/" 2>/dev/null
if [ ! -f "$REAL_FILES/sharegpt-256-chat.jsonl" ]; then
  python3 "$D/sharegpt_prompts.py" --from-jsonl "$REAL_FILES/sharegpt-256.jsonl" --n 256 --model-dir "$M" \
    --max-new-tokens 256 --out "$REAL_FILES/sharegpt-256-chat.jsonl" || exit 1
fi
exec bash tools/device/run_call_b.sh --sets "$REAL_SETS" --models "" --deadline "${STUDY_DEADLINE:-560}" \
  --search-args "--stop-after-s ${STUDY_STOP_S:-420}" "$SPACE"
