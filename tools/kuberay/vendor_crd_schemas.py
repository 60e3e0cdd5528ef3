"""Vendor KubeRay's published CRD schemas (``openAPIV3Schema`` of one API version) for the manifest tests.

Reads ``ray-operator/config/crd/bases/ray.io_<kind>.yaml`` at a git ref of a ``ray-project/kuberay`` clone (or from a
directory holding those files), takes the schema of the requested version unchanged, and writes it as JSON to
``deploy/kuberay/crd-schemas/<kind>.<version>.schema.json`` with ``SOURCE.json`` naming the ref, the commit and each
source file's SHA-256. Nothing is trimmed or edited.

    python tools/kuberay/vendor_crd_schemas.py --repo /path/to/kuberay/.git --ref v1.7.0
    python tools/kuberay/vendor_crd_schemas.py --crd-dir ./bases --ref v1.7.0   # files fetched by hand
"""

from __future__ import annotations

import argparse
import hashlib
import json
import subprocess
import sys
from pathlib import Path

import yaml

CRD_DIR = "ray-operator/config/crd/bases"
KINDS = ("rayjobs", "rayservices")
OUT = Path(__file__).resolve().parents[2] / "deploy" / "kuberay" / "crd-schemas"


def read_crd(kind: str, *, repo: str | None, ref: str, crd_dir: Path | None) -> bytes:
    name = f"ray.io_{kind}.yaml"
    if crd_dir is not None:
        return (crd_dir / name).read_bytes()
    return subprocess.run(
        ["git", "--git-dir", str(repo), "show", f"{ref}:{CRD_DIR}/{name}"], check=True, capture_output=True
    ).stdout


def version_schema(crd: dict, version: str) -> dict:
    for v in crd["spec"]["versions"]:
        if v["name"] == version:
            return v["schema"]["openAPIV3Schema"]
    names = [v["name"] for v in crd["spec"]["versions"]]
    raise SystemExit(f"{crd['metadata']['name']} has no version {version!r} (it has {names})")


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--repo", help="a ray-project/kuberay git directory (read with git show)")
    p.add_argument("--crd-dir", type=Path, help="a directory with ray.io_<kind>.yaml files instead of --repo")
    p.add_argument("--ref", required=True, help="the KubeRay tag or commit the files come from (e.g. v1.7.0)")
    p.add_argument("--version", default="v1", help="CRD API version to vendor (default: v1)")
    p.add_argument("--out", type=Path, default=OUT)
    args = p.parse_args(argv)
    if (args.repo is None) == (args.crd_dir is None):
        p.error("give exactly one of --repo and --crd-dir")
    commit = args.ref
    if args.repo is not None:
        commit = subprocess.run(
            ["git", "--git-dir", args.repo, "rev-parse", f"{args.ref}^{{commit}}"],
            check=True,
            capture_output=True,
            text=True,
        ).stdout.strip()
    args.out.mkdir(parents=True, exist_ok=True)
    files = {}
    for kind in KINDS:
        raw = read_crd(kind, repo=args.repo, ref=args.ref, crd_dir=args.crd_dir)
        schema = version_schema(yaml.safe_load(raw), args.version)
        target = args.out / f"{kind}.{args.version}.schema.json"
        target.write_text(json.dumps(schema, indent=1, sort_keys=True) + "\n")
        files[target.name] = {
            "source": f"{CRD_DIR}/ray.io_{kind}.yaml",
            "source_sha256": hashlib.sha256(raw).hexdigest(),
        }
        print(f"wrote {target} ({target.stat().st_size:,} bytes)")
    source = {
        "repository": "https://github.com/ray-project/kuberay",
        "ref": args.ref,
        "commit": commit,
        "version": args.version,
        "files": files,
    }
    (args.out / "SOURCE.json").write_text(json.dumps(source, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
