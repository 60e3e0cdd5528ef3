#!/usr/bin/env bash
# tools/device/run_call_b.sh [OPTIONS] [STUDY_YAML ...]   (on the lent GPU machine, from the repo root; run with bash)
#
# One device call's work, in order, each step stopped at the call's deadline:
#   1. bootstrap: source tools/device/bootstrap.sh with the wheel sets the steps need (stamps skip sets installed
#      by an earlier call on this warm machine): .device/whl always, .device-extra/whl for --fidelity,
#      .device-ray/whl when a study is given; --sets "DIR ..." overrides.
#   2. dummy models into $AUTOTUNE_MODELS_DIR (default /tmp/models): llama-1b, eagle3-llama-1b, llama-8b
#      (--models "SHAPE ..." to change; search spaces name them as /tmp/models/<shape>).
#   3. --tests: python -m pytest tests/gpu/test_sglang_real.py -m gpu (real SGLang: 3 launches + --help, about 4-6 min).
#   4. --fidelity: python tools/device/fidelity.py --model-dir /tmp/models/llama-1b ... (--fidelity-args "...").
#   5. each STUDY_YAML: python -m autotune.search --space STUDY_YAML [--trials N] [--search-args "..."], then
#      tools/device/overhead.py on its records. Results stay in results/<study>/ (resumable by the same command in a
#      later call while the machine is warm).
# Options: --deadline S (default 570: seconds after the start by which everything, packing included, is done; keep it
# below the call's timeout_s), --trials N, --results-dir DIR (default results), --search-args "...",
# --test-args "...", --fidelity-args "..." (implies --fidelity). PYTHON=/path/to/python picks the interpreter
# (default python3 on PATH).
#
# Comes back under $OUT (at most 8 files, 16 MiB each, 2 folders deep):
#   run.log, summary.json (each step's exit code and seconds, GPUs, versions), tests.tgz (junit.xml, pytest.log,
#   server logs), fidelity.tgz (fidelity.md/json, server and bench_serving logs), study-<name>.tgz
#   (results/<name>/ + overhead.txt/json + the Ray session logs, trimmed, + serve_timeline.txt from them). At most 4 studies per call.
set -uo pipefail
PY="${PYTHON:-python3}"  # every step runs on this interpreter (PYTHON: a venv that is not first on PATH)
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
cd "$ROOT" || exit 2
T0=$(date +%s)
WORK="${AUTOTUNE_DEVICE_WORK:-/tmp/autotune-device}"
OUT="${OUT:-$WORK/out}"  # the device tool sets OUT
export AUTOTUNE_MODELS_DIR="${AUTOTUNE_MODELS_DIR:-/tmp/models}"
DEADLINE=570 RESERVE=25 TESTS=0 FIDELITY=0 TRIALS="" SETS="" SHAPES="llama-1b eagle3-llama-1b llama-8b" RESULTS=results
SEARCH_ARGS="" TEST_ARGS="" FIDELITY_ARGS=""
STUDIES=()
while [ $# -gt 0 ]; do
  case "$1" in
    --tests) TESTS=1 ;;
    --fidelity) FIDELITY=1 ;;
    --fidelity-args) FIDELITY=1; FIDELITY_ARGS="$2"; shift ;;
    --deadline) DEADLINE="$2"; shift ;;
    --trials) TRIALS="$2"; shift ;;
    --sets) SETS="$2"; shift ;;
    --models) SHAPES="$2"; shift ;;
    --search-args) SEARCH_ARGS="$2"; shift ;;
    --results-dir) RESULTS="$2"; shift ;;
    --test-args) TEST_ARGS="$2"; shift ;;
    -h|--help) awk 'NR > 1 && /^#/ {print; next} NR > 1 {exit}' "${BASH_SOURCE[0]}"; exit 0 ;;
    -*) echo "run_call_b.sh: unknown option $1 (see --help)" >&2; exit 2 ;;
    *) STUDIES+=("$1") ;;
  esac
  shift
done
if [ ${#STUDIES[@]} -gt 4 ]; then
  echo "run_call_b.sh: at most 4 studies per call (8 files come back); got ${#STUDIES[@]}" >&2; exit 2
fi
mkdir -p "$OUT" "$WORK"
: > "$WORK/steps.jsonl"

elapsed() { echo $(( $(date +%s) - T0 )); }
left() { echo $(( DEADLINE - RESERVE - $(date +%s) + T0 )); }
log() { echo "[call-b $(elapsed)s] $*"; }
record() {  # name rc seconds note
  printf '{"step": "%s", "rc": %s, "seconds": %s, "note": "%s"}\n' "$1" "$2" "$3" "${4//\"/\'}" >> "$WORK/steps.jsonl"
}
# run_step NAME MIN_SECONDS CMD...: skipped when less than MIN_SECONDS are left; stopped (SIGINT, then KILL 30 s
# later) at the deadline. Prints the command's output (it goes to run.log) and returns its exit code.
run_step() {
  local name=$1 min=$2; shift 2
  local budget; budget=$(left)
  if [ "$budget" -lt "$min" ]; then
    log "SKIP $name: ${budget}s left, it needs about ${min}s"; record "$name" null 0 "skipped: ${budget}s left"
    return 124
  fi
  log "START $name (at most ${budget}s): $*"
  local t=$(date +%s) rc
  timeout -s INT -k 30 "$budget" "$@"; rc=$?
  log "END $name: exit $rc after $(( $(date +%s) - t ))s"
  record "$name" "$rc" $(( $(date +%s) - t )) "$([ $rc -eq 124 ] && echo 'stopped at the deadline')"
  return $rc
}
# Processes still holding GPU memory after a step are ours (this machine runs nothing else): report them and kill
# their process groups, so the next step starts on free GPUs.
gpu_leftovers() {
  command -v nvidia-smi >/dev/null 2>&1 || return 0
  local pids="" i p pg me; me=$(ps -o pgid= -p $$ | tr -d ' ')
  for i in 1 2 3 4 5 6 7 8; do
    pids=$(nvidia-smi --query-compute-apps=pid --format=csv,noheader 2>/dev/null | tr -d ' ' | grep -E '^[0-9]+$')
    [ -z "$pids" ] && return 0
    sleep 2
  done
  log "WARNING: GPU memory still held after $1 by: $(echo $pids)"
  for p in $pids; do
    ps -o pid=,pgid=,etimes=,args= -p "$p" | cut -c1-200
    pg=$(ps -o pgid= -p "$p" | tr -d ' ')
    if [ -n "$pg" ] && [ "$pg" != "$me" ]; then kill -KILL -- "-$pg" 2>/dev/null; else kill -KILL "$p" 2>/dev/null; fi
  done
  sleep 3
  nvidia-smi --query-gpu=index,memory.used --format=csv,noheader
  record "gpu-leftovers-after-$1" 1 0 "killed $(echo $pids)"
}
# provenance STUDY_JSON COMMAND: what results/evidence/<study>/provenance.json needs, on stdout
provenance() {
  "$PY" - "$1" "$2" <<'PYEOF'
import datetime, json, platform, subprocess, sys
from importlib import metadata
spec = json.load(open(sys.argv[1]))
def version(name):
    try:
        return metadata.version(name)
    except metadata.PackageNotFoundError:
        return None
try:
    names = subprocess.run(["nvidia-smi", "--query-gpu=name", "--format=csv,noheader"], capture_output=True,
                           text=True, timeout=20).stdout.split("\n")
except OSError:
    names = []
names = [n.strip() for n in names if n.strip()]
server = spec.get("server") or {}
print(json.dumps({
    "study": spec.get("name"), "engine": spec.get("engine"), "gpu_name": names[0] if names else None,
    "gpu_count": len(names), "tp_size": server.get("tp_size"), "sglang_version": version("sglang"),
    "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"), "command": sys.argv[2],
    "model_path": server.get("model_path"), "host": platform.node(),
    "versions": {n: version(n) for n in ("torch", "transformers", "ray", "optuna", "httpx")},
    "workload_properties": spec.get("workload_properties"),
}, indent=1))
PYEOF
}
# pack NAME DIR...: tar the folders into $OUT/NAME.tgz (one file back per step)
pack() {
  local name=$1; shift
  [ -e "$2/$3" ] || { log "nothing to pack for $name"; return 0; }  # pack NAME -C DIR SUBDIR
  tar czf "$OUT/$name.tgz" "$@" 2>/dev/null
  log "packed $OUT/$name.tgz ($(du -h "$OUT/$name.tgz" | cut -f1))"
}

main() {
  log "repo $ROOT, OUT $OUT, deadline ${DEADLINE}s; tests=$TESTS fidelity=$FIDELITY studies=${STUDIES[*]:-none}"
  if [ -z "$SETS" ]; then
    SETS=".device/whl"
    [ "$FIDELITY" = 1 ] && SETS="$SETS .device-extra/whl"
    [ ${#STUDIES[@]} -gt 0 ] && SETS="$SETS .device-ray/whl"
  fi
  # shellcheck disable=SC2086,SC1091
  source tools/device/bootstrap.sh $SETS || { log "bootstrap failed: send call A again (see tools/device/README.md)"; record bootstrap 1 "$(elapsed)" failed; return 1; }
  record bootstrap 0 "$(elapsed)" "$SETS"
  nvidia-smi --query-gpu=index,name,memory.used,memory.total --format=csv,noheader || log "no nvidia-smi"
  "$PY" - <<'PYEOF'
from importlib import metadata
for name in ("sglang", "torch", "transformers", "ray", "optuna", "datasets", "httpx"):
    try:
        print(f"  {name} {metadata.version(name)}")
    except metadata.PackageNotFoundError:
        print(f"  {name} -")
PYEOF
  for shape in $SHAPES; do
    "$PY" -m autotune.models.dummy "$shape" "$AUTOTUNE_MODELS_DIR/$shape" || { record models 1 0 "$shape"; return 1; }
  done
  record models 0 "$(elapsed)" "$SHAPES"

  if [ "$TESTS" = 1 ]; then
    rm -rf "$WORK/tests"; mkdir -p "$WORK/tests/logs"
    export AUTOTUNE_GPU_TEST_LOGS="$WORK/tests/logs"
    # shellcheck disable=SC2086
    run_step gpu-tests 200 \
      "$PY" -m pytest tests/gpu/test_sglang_real.py -m gpu -v -rA -p no:cacheprovider --junitxml="$WORK/tests/junit.xml" $TEST_ARGS \
      2>&1 | tee "$WORK/tests/pytest.log"
    gpu_leftovers gpu-tests
    pack tests -C "$WORK" tests
  fi

  if [ "$FIDELITY" = 1 ]; then
    rm -rf "$WORK/fidelity"
    # shellcheck disable=SC2086
    run_step fidelity 150 "$PY" tools/device/fidelity.py --model-dir "$AUTOTUNE_MODELS_DIR/llama-1b" \
      --out "$WORK/fidelity" $FIDELITY_ARGS
    gpu_leftovers fidelity
    pack fidelity -C "$WORK" fidelity
  fi

  local yaml name dir rc
  for yaml in "${STUDIES[@]}"; do
    # the study's folder as autotune.search resolves it from the very arguments below (--study renames it)
    # shellcheck disable=SC2086
    dir=$("$PY" -c "import sys; from pathlib import Path; from autotune.search import resolve; a, s = resolve(sys.argv[1:]); \
print(Path(a.results_dir) / s.name)" --space "$yaml" --results-dir "$RESULTS" ${TRIALS:+--trials $TRIALS} $SEARCH_ARGS) \
      || { log "cannot read the study $yaml"; record "study:$yaml" 2 0 "invalid study file"; continue; }
    name=$(basename "$dir")
    # shellcheck disable=SC2086
    run_step "study-$name" 150 "$PY" -m autotune.search --space "$yaml" --results-dir "$RESULTS" \
      ${TRIALS:+--trials $TRIALS} $SEARCH_ARGS
    rc=$?
    if [ $rc -eq 124 ] || [ $rc -eq 130 ] || [ $rc -eq 137 ]; then
      # only the processes of this study's own Ray cluster (by its session), never another user's Ray
      "$PY" -m autotune.study.cluster --stop-orphans "$dir" && log "stopped what the interrupted study's Ray left running"
    fi
    gpu_leftovers "study-$name"
    rm -rf "$WORK/study-$name"; mkdir -p "$WORK/study-$name"
    if [ ! -f "$dir/trials.jsonl" ]; then
      log "no trial records in $dir: the study wrote none (see its output above)"
    else
      "$PY" tools/device/overhead.py "$dir" | tee "$WORK/study-$name/overhead.txt"
      "$PY" tools/device/overhead.py "$dir" --json > "$WORK/study-$name/overhead.json" 2>&1
      cp -r "$dir" "$WORK/study-$name/results"
      provenance "$dir/study.json" "${PY} -m autotune.search --space $yaml --results-dir $RESULTS${TRIALS:+ --trials $TRIALS} $SEARCH_ARGS" \
        > "$WORK/study-$name/results/provenance.json"
    fi
    if [ -d /tmp/ray/session_latest/logs ]; then  # the newest 1 MB of each Ray log
      mkdir -p "$WORK/study-$name/raylogs"
      for f in /tmp/ray/session_latest/logs/*; do
        [ -f "$f" ] && tail -c 1000000 "$f" > "$WORK/study-$name/raylogs/$(basename "$f")"
      done
      "$PY" tools/device/serve_timeline.py "$WORK/study-$name/raylogs" > "$WORK/study-$name/serve_timeline.txt" 2>&1 \
        || log "serve_timeline.py found no slot trials in the Ray logs"
    fi
    pack "study-$name" -C "$WORK" "study-$name"
    if [ "$(stat -c %s "$OUT/study-$name.tgz")" -gt 15000000 ]; then
      rm -rf "$WORK/study-$name/raylogs"; pack "study-$name" -C "$WORK" "study-$name"
      log "study-$name.tgz was over 15 MB: packed again without the Ray logs"
    fi
  done
}

main 2>&1 | tee -a "$OUT/run.log"
main_rc=${PIPESTATUS[0]}
# exit code: the first failing step's (or main's own), 0 when every step that ran succeeded
rc=$("$PY" - "$WORK/steps.jsonl" "$OUT/summary.json" "$main_rc" "$(elapsed)" "$DEADLINE" <<'PYEOF'
import json, subprocess, sys
steps_path, out, main_rc, total, deadline = sys.argv[1:6]
steps = []
for line in open(steps_path):
    try:
        steps.append(json.loads(line))
    except ValueError:
        steps.append({"unparsed": line.strip(), "rc": 1})
failed = [s["rc"] for s in steps if s.get("rc") not in (0, None)]
rc = failed[0] if failed else int(main_rc)
try:
    gpus = subprocess.run(["nvidia-smi", "--query-gpu=name", "--format=csv,noheader"], capture_output=True,
                          text=True, timeout=20).stdout.split("\n")
except OSError:
    gpus = []
summary = {"rc": rc, "total_s": int(total), "deadline_s": int(deadline), "steps": steps,
           "gpus": [g.strip() for g in gpus if g.strip()]}
with open(out, "w") as fh:
    json.dump(summary, fh, indent=1)
print(rc)
PYEOF
)
echo "[call-b $(elapsed)s] done, exit ${rc:-1}; files in $OUT: $(ls "$OUT" | tr '\n' ' ')" | tee -a "$OUT/run.log"
exit "${rc:-1}"
