"""What crosses the Serve boundary: the server log a replica sends back keeps its launch and its end."""

from __future__ import annotations

from autotune.engines.base import parse_log_phases
from autotune.trial.replica import LOG_KEEP, clip_log

LAUNCH = (
    "[2026-12-02 02:27:10] Load weight end. elapsed=0.14 s, type=LlamaForCausalLM, avail mem=136.74 GB\n"
    "[2026-12-02 02:27:11] KV Cache is allocated. dtype: torch.bfloat16, #tokens: 3838, K size: 0.23 GB\n"
    "[2026-12-02 02:27:15] Capture cuda graph end. Time elapsed: 2.25 s\n"
)
DECODE = "[2026-12-02 02:29:29] Decode batch, #running-req: 64, #token: 9000, token usage: 0.01, cuda graph: True\n"


def test_a_long_log_keeps_the_launch_its_phases_are_read_from_and_its_end() -> None:
    log = LAUNCH + DECODE * 10_000 + "RuntimeError: the end of the log\n"  # a long benchmark: about 1 MB
    clipped = clip_log(log)
    assert len(clipped) <= LOG_KEEP + 100 and clipped.startswith(LAUNCH)
    assert clipped.endswith("RuntimeError: the end of the log\n")
    assert "characters of the log left out" in clipped
    assert parse_log_phases(clipped).kv_cache_tokens == 3838
    assert parse_log_phases(log[-LOG_KEEP:]).kv_cache_tokens is None  # the tail alone loses the launch
    assert all(
        line == DECODE.strip() or "left out" in line or line in (LAUNCH + "RuntimeError: the end of the log")
        for line in clipped.splitlines()
    )  # whole lines only


def test_a_short_log_crosses_whole() -> None:
    assert clip_log(LAUNCH) == LAUNCH
    assert clip_log("") == ""
