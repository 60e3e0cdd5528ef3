"""The greedy sample: the workload's first prompts, one at a time at temperature 0, and the output token ids each
gives. Recorded per trial (``BenchResult.greedy``) so the output-equality gate (``autotune.export.output_gate``) can
compare a speculative configuration's outputs with a non-speculative server's, token for token, without a new launch.
"""

from __future__ import annotations

import json

import httpx

from autotune.bench.types import GreedySample, WorkloadSpec
from autotune.bench.workloads import build_requests


def greedy_body(text: str | None, input_ids: tuple[int, ...] | None, max_new_tokens: int, ignore_eos: bool) -> bytes:
    payload: dict = {"input_ids": list(input_ids)} if input_ids is not None else {"text": text}
    payload["sampling_params"] = {"max_new_tokens": max_new_tokens, "temperature": 0.0, "ignore_eos": ignore_eos}
    return json.dumps(payload).encode()


async def greedy_sample(client: httpx.AsyncClient, spec: WorkloadSpec, n: int, max_new_tokens: int) -> GreedySample:
    """Send the workload's first ``n`` prompts one after another (``max_new_tokens`` each, capped by the row's own)
    and keep each response's ``output_ids``. A failed request leaves an empty output and a line in ``errors``."""
    outputs: list[tuple[int, ...]] = []
    errors: list[str] = []
    for k, req in enumerate(build_requests(spec, n)):
        body = greedy_body(req.text, req.input_ids, min(max_new_tokens, req.max_new_tokens), spec.ignore_eos)
        try:
            resp = await client.post("/generate", content=body, headers={"Content-Type": "application/json"})
            data = resp.json() if resp.status_code == 200 else None
        except (httpx.HTTPError, ValueError) as exc:
            data, resp = None, None
            errors.append(f"prompt {k}: {type(exc).__name__}: {exc}"[:200])
        if data is not None and isinstance(data.get("output_ids"), list):
            outputs.append(tuple(int(t) for t in data["output_ids"]))
            continue
        if resp is not None:
            errors.append(f"prompt {k}: HTTP {resp.status_code}, no output_ids in the response"[:200])
        outputs.append(())
    return GreedySample(max_new_tokens=max_new_tokens, outputs=tuple(outputs), errors=tuple(errors))
