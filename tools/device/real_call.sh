#!/usr/bin/env bash
# tools/device/real_call.sh CHUNK_DIR [COMMAND ...]   (device side; run with bash, from the repo root)
#
# One call of a round staged by tools/device/real_stage.py: installs the wheels of every chunk up to CHUNK_DIR
# (tools/device/bootstrap.sh: a chunk installed in an earlier call on this warm machine is skipped by its stamp),
# copies CHUNK_DIR/blob/* into /tmp/realblobs, reassembles each file whose parts are all there into /tmp/realfiles/NAME
# (sha256 checked against the manifest), then runs COMMAND with the bootstrap's environment and REAL_FILES=/tmp/realfiles.
# The first call of a round must carry c1, the next c2, ...; a call that lands on a fresh machine (the previous one went
# back) stops at bootstrap ("no wheels ... and no stamp"): start the round again from c1.
set -o pipefail
CH="${1:?usage: real_call.sh CHUNK_DIR [COMMAND ...]}"; shift
[ -f "$CH/manifest.json" ] || { echo "[real_call] no $CH/manifest.json: carry the chunk folder (run(carry=['$CH']))" >&2; exit 2; }
mapfile -t _sets < <(python3 - "$CH" <<'PY'
import json, os, sys
ch = os.path.normpath(sys.argv[1])
m = json.load(open(os.path.join(ch, "manifest.json")))
for e in m["chunks"]:
    if e["wheels"]:
        print(os.path.join(e["dir"], "whl"))
    if os.path.normpath(e["dir"]) == ch:
        break
PY
)
if [ ${#_sets[@]} -gt 0 ]; then
  source tools/device/bootstrap.sh "${_sets[@]}" || exit 1
fi
export REAL_FILES=/tmp/realfiles
export REAL_SETS="${_sets[*]}"   # every wheel set of the round so far (for tools/device/run_call_b.sh --sets)
mkdir -p /tmp/realblobs "$REAL_FILES"
[ -d "$CH/blob" ] && cp "$CH"/blob/* /tmp/realblobs/
python3 - "$CH" <<'PY' || exit 1
import hashlib, json, os, sys
m = json.load(open(os.path.join(sys.argv[1], "manifest.json")))
for name, f in m["files"].items():
    dst = os.path.join("/tmp/realfiles", name)
    parts = [os.path.join("/tmp/realblobs", f"{name}.part{i:02d}") for i in range(f["parts"])]
    if os.path.exists(dst) or not all(os.path.exists(p) for p in parts):
        state = "ready" if os.path.exists(dst) else f"{sum(map(os.path.exists, parts))}/{len(parts)} parts"
        print(f"[real_call] {name}: {state}")
        continue
    h = hashlib.sha256()
    with open(dst + ".tmp", "wb") as out:
        for p in parts:
            data = open(p, "rb").read()
            h.update(data)
            out.write(data)
    if h.hexdigest() != f["sha256"]:
        sys.exit(f"[real_call] {name}: sha256 mismatch after reassembly; stage again (tools/device/real_stage.py)")
    os.replace(dst + ".tmp", dst)
    for p in parts:
        os.remove(p)
    print(f"[real_call] {name}: reassembled ({f['bytes']} bytes, sha256 ok)")
PY
[ $# -gt 0 ] && exec "$@"
exit 0
