#!/usr/bin/env bash
# tools/device/bootstrap.sh: source it FIRST in a device command, from the repo root:
#
#     source tools/device/bootstrap.sh [WHEEL_DIR ...]      # default: .device/whl
#
# Adapted from the team's shared/device/bootstrap.sh (same install logic) for this repo's wheel folders:
#   .device/whl        SGLang 0.5.17 set   (bash ../shared/device/stage-sglang.sh .device/whl)   48.6 MiB
#   .device-extra/whl  datasets + multiprocess for `python -m sglang.bench_serving` (tools/device/stage_extra.sh)
#   .device-ray/whl    Ray 2.60 + Optuna 5 (bash ../shared/device/stage-ray.sh .device-ray/whl)    33.4 MiB
# All three are git-ignored (.git/info/exclude) and travel only when a call names them in `carry`.
#
# Installs the wheels of each WHEEL_DIR, in the order given, into /tmp/site with pip --no-index --no-deps, then exports:
#   PYTHONPATH=/tmp/site:<repo root>  (the wheels shadow the image's transformers 5.17 / tokenizers 0.23.2;
#                                     the repo root makes `autotune` and `serve_app` importable without installing)
#   CUDA_HOME, PATH                   (nvcc for SGLang's / tvm-ffi's JIT kernels; /tmp/site/bin)
#   NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
#                                     (workplace rule: never turn NVLink multicast on;
#                                      also never pass --enable-nccl-nvls / --enable-symm-mem)
#   HF_HUB_OFFLINE=1 HF_DATASETS_OFFLINE=1 TRANSFORMERS_OFFLINE=1   (the device reaches no network)
#   SGLDEV_SITE, SGLDEV_DIR, AUTOTUNE_ROOT  (install dir; this folder; the repo root.
#                                     Not SGL_*: sglang copies SGL_X to SGLANG_X)
# Source it: run with plain `bash`, it installs but its exports are lost with the subshell.
#
# Several wheel sets over several calls (each call carries at most 64 MiB):
#   call A, carry=['.device', '.device-extra']:  source tools/device/bootstrap.sh .device/whl .device-extra/whl
#   call B, carry=['.device-ray']:     source tools/device/bootstrap.sh .device/whl .device-extra/whl .device-ray/whl
# while the machine is still warm (30 s after a call).  Per directory:
#   - a stamp /tmp/site/.bootstrap_ok.<dir> marks it installed; with the stamp present
#     the directory is skipped, even when it was not carried this time;
#   - the first set goes straight into /tmp/site (pip --target --upgrade);
#   - a later set skips every wheel whose distribution already has a *.dist-info in
#     /tmp/site, installs the rest into a staging folder, and merges that into /tmp/site
#     file by file WITHOUT overwriting anything already there (so /tmp/site/bin and
#     shared namespace packages such as opentelemetry/ keep the first set's files).
_sgldev_py="${PYTHON:-python3}"  # the interpreter to install into and run (PYTHON: a venv not first on PATH)
_sgldev_dirs=("$@")
[ ${#_sgldev_dirs[@]} -eq 0 ] && _sgldev_dirs=(.device/whl)
export SGLDEV_SITE="${SGLDEV_SITE:-/tmp/site}"
export SGLDEV_DIR="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
export AUTOTUNE_ROOT="$(cd "$SGLDEV_DIR/../.." && pwd)"
_sgldev_t0=$(date +%s.%N)
_sgldev_rc=0
for _sgldev_whl in "${_sgldev_dirs[@]}"; do
  _sgldev_t1=$(date +%s.%N)
  _sgldev_stamp="$SGLDEV_SITE/.bootstrap_ok.$(printf '%s' "$_sgldev_whl" | tr -c 'A-Za-z0-9._-' '_')"
  if [ -f "$_sgldev_stamp" ] && { [ ! -d "$_sgldev_whl" ] || [ ! "$_sgldev_whl" -nt "$_sgldev_stamp" ]; }; then
    echo "[bootstrap] $_sgldev_whl: already installed in $SGLDEV_SITE (stamp), skipped"
    continue
  fi
  if ! ls "$_sgldev_whl"/*.whl >/dev/null 2>&1; then
    echo "[bootstrap] no wheels in $_sgldev_whl and no stamp for it in $SGLDEV_SITE (carry the folder that holds it, e.g. run(carry=['.device']))" >&2
    _sgldev_rc=1; break
  fi
  mkdir -p "$SGLDEV_SITE"
  if ! ls -d "$SGLDEV_SITE"/*.dist-info >/dev/null 2>&1; then
    # first set: plain install into the empty site
    "$_sgldev_py" -m pip install -q --no-index --no-deps --no-compile --no-cache-dir \
        --upgrade --target "$SGLDEV_SITE" "$_sgldev_whl"/*.whl 2>&1 | grep -v -e '^WARNING' -e 'already exists' >&2
    _sgldev_pip=${PIPESTATUS[0]}; _sgldev_n=$(ls "$_sgldev_whl"/*.whl | wc -l); _sgldev_skip=0
  else
    # later set: only distributions not installed yet, merged without overwriting
    _sgldev_todo=(); _sgldev_skip=0
    for _w in "$_sgldev_whl"/*.whl; do
      _d=$(basename "$_w" | cut -d- -f1 | tr 'A-Z.-' 'a-z__')
      if ls -d "$SGLDEV_SITE"/*.dist-info 2>/dev/null | sed 's#.*/##; s#-[^-]*\.dist-info$##' \
          | tr 'A-Z.-' 'a-z__' | grep -qx "$_d"; then
        _sgldev_skip=$((_sgldev_skip + 1)); echo "[bootstrap]   skip $(basename "$_w") (already installed)"
      else
        _sgldev_todo+=("$_w")
      fi
    done
    _sgldev_n=${#_sgldev_todo[@]}; _sgldev_pip=0
    if [ "$_sgldev_n" -gt 0 ]; then
      _sgldev_stage="$SGLDEV_SITE.stage.$$"; rm -rf "$_sgldev_stage"
      "$_sgldev_py" -m pip install -q --no-index --no-deps --no-compile --no-cache-dir \
          --upgrade --target "$_sgldev_stage" "${_sgldev_todo[@]}" 2>&1 | grep -v -e '^WARNING' -e 'already exists' >&2
      _sgldev_pip=${PIPESTATUS[0]}
      [ "$_sgldev_pip" -eq 0 ] && "$_sgldev_py" - "$_sgldev_stage" "$SGLDEV_SITE" <<'PYEOF'
import os, shutil, sys
src, dst = sys.argv[1], sys.argv[2]
moved, kept = 0, []
for root, dirs, files in os.walk(src):
    rel = os.path.relpath(root, src)
    droot = dst if rel == "." else os.path.join(dst, rel)
    for d in list(dirs):                      # whole new folders move in one step
        if not os.path.lexists(os.path.join(droot, d)):
            shutil.move(os.path.join(root, d), os.path.join(droot, d)); moved += 1; dirs.remove(d)
    for f in files:
        t = os.path.join(droot, f)
        if os.path.lexists(t):
            kept.append(os.path.relpath(t, dst)); continue
        shutil.move(os.path.join(root, f), t); moved += 1
print(f"[bootstrap]   merged {moved} new entries; kept {len(kept)} existing files"
      + (f" (e.g. {', '.join(kept[:6])})" if kept else ""))
PYEOF
      rm -rf "$_sgldev_stage"
    fi
  fi
  if [ "$_sgldev_pip" -ne 0 ]; then
    echo "[bootstrap] pip install of $_sgldev_whl into $SGLDEV_SITE failed (exit $_sgldev_pip)" >&2
    _sgldev_rc=1; break
  fi
  touch "$_sgldev_stamp"
  echo "[bootstrap] $_sgldev_whl: installed $_sgldev_n wheels, skipped $_sgldev_skip, in $("$_sgldev_py" -c "print(round($(date +%s.%N)-$_sgldev_t1,1))") s"
done
if [ "$_sgldev_rc" -eq 0 ] && [[ " ${_sgldev_dirs[*]} " == *" .device/whl "* ]] && [ ! -d "$SGLDEV_SITE/sglang" ]; then
  echo "[bootstrap] $SGLDEV_SITE has no sglang after installing .device/whl" >&2
  _sgldev_rc=1
fi
if [ "$_sgldev_rc" -ne 0 ]; then
  unset _sgldev_dirs _sgldev_whl _sgldev_t0 _sgldev_t1 _sgldev_stamp _sgldev_n _sgldev_skip _sgldev_todo _sgldev_pip _sgldev_stage _w _d
  return 1 2>/dev/null || exit 1
fi
case ":${PYTHONPATH:-}:" in *":$SGLDEV_SITE:"*) ;; *) export PYTHONPATH="$SGLDEV_SITE${PYTHONPATH:+:$PYTHONPATH}";; esac
case ":$PYTHONPATH:" in *":$AUTOTUNE_ROOT:"*) ;; *) export PYTHONPATH="$PYTHONPATH:$AUTOTUNE_ROOT";; esac
case ":$PATH:" in *":$SGLDEV_SITE/bin:"*) ;; *) export PATH="$SGLDEV_SITE/bin:$PATH";; esac
if ! command -v nvcc >/dev/null 2>&1; then
  for d in /usr/local/cuda /usr/local/cuda-13.0 /opt/cuda; do
    [ -x "$d/bin/nvcc" ] && export PATH="$d/bin:$PATH" && break
  done
fi
if [ -z "${CUDA_HOME:-}" ] && command -v nvcc >/dev/null 2>&1; then
  export CUDA_HOME="$(dirname "$(dirname "$(readlink -f "$(command -v nvcc)")")")"
fi
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
export PYTHONUNBUFFERED=1 TOKENIZERS_PARALLELISM=false HF_HUB_OFFLINE=1 HF_DATASETS_OFFLINE=1 TRANSFORMERS_OFFLINE=1
if ! "$_sgldev_py" -c "import autotune, serve_app" 2>/dev/null; then
  echo "[bootstrap] warning: autotune / serve_app do not import from $AUTOTUNE_ROOT (PYTHONPATH=$PYTHONPATH)" >&2
fi
echo "[bootstrap] site=$SGLDEV_SITE ready in $("$_sgldev_py" -c "print(round($(date +%s.%N)-$_sgldev_t0,1))") s; CUDA_HOME=${CUDA_HOME:-none}"
unset _sgldev_dirs _sgldev_whl _sgldev_t0 _sgldev_t1 _sgldev_stamp _sgldev_n _sgldev_skip _sgldev_todo _sgldev_pip _sgldev_stage _sgldev_rc _w _d
