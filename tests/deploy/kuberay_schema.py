"""Validate a KubeRay manifest against KubeRay's published CRD schema (vendored in ``deploy/kuberay/crd-schemas``).

The API server prunes, and ``kubectl apply --validate=strict`` rejects, fields a structural schema does not name; a
plain JSON-Schema check of an OpenAPI v3 schema without ``additionalProperties`` would accept them. So every object
schema with ``properties`` (and without ``x-kubernetes-preserve-unknown-fields`` or its own ``additionalProperties``)
is closed before validating: a misspelt field fails here as it would on the cluster. The vendored files stay as KubeRay
publishes them; the closing happens in memory.
"""

from __future__ import annotations

import copy
import functools
import json
from pathlib import Path
from typing import Any

import jsonschema

SCHEMAS = Path(__file__).resolve().parents[2] / "deploy" / "kuberay" / "crd-schemas"
FILES = {"RayJob": "rayjobs.v1.schema.json", "RayService": "rayservices.v1.schema.json"}


def _closed(node: Any) -> Any:
    if isinstance(node, dict):
        out = {k: _closed(v) for k, v in node.items()}
        if (
            "properties" in out
            and "additionalProperties" not in out
            and not out.get("x-kubernetes-preserve-unknown-fields")
        ):
            out["additionalProperties"] = False
        return out
    if isinstance(node, list):
        return [_closed(v) for v in node]
    return node


@functools.cache
def schema(kind: str) -> dict[str, Any]:
    return _closed(json.loads((SCHEMAS / FILES[kind]).read_text()))


def errors(doc: dict[str, Any]) -> list[str]:
    """Every schema violation of ``doc`` (empty: valid), as ``path: message``."""
    kind = doc.get("kind")
    if kind not in FILES:
        return [f"kind: {kind!r} is not one of {sorted(FILES)}"]
    out = []
    if doc.get("apiVersion") != "ray.io/v1":
        out.append(f"apiVersion: {doc.get('apiVersion')!r}, the vendored schema is ray.io/v1")
    if not isinstance(doc.get("metadata", {}).get("name"), str):
        out.append("metadata.name: missing")
    validator = jsonschema.Draft7Validator(schema(kind))
    for err in sorted(validator.iter_errors(copy.deepcopy(doc)), key=lambda e: list(e.absolute_path)):
        out.append(f"{'.'.join(str(p) for p in err.absolute_path) or '.'}: {err.message}")
    return out
