"""tools/device/serve_timeline.py on Ray log lines in the format Ray 2.60 wrote them on the H200 (CPU only)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tools.device.serve_timeline import build, main, read_lines

APP = "st-slot-0"
TRAINABLE = f"""\
:job_id:01000000
:actor_name:trainable
INFO 2026-11-30 20:17:13,144 serve 4870 -- Connecting to existing Serve app in namespace "serve". New http_options/controller_options will not be applied.
INFO 2026-11-30 20:17:18,310 serve 4870 -- Application '{APP}' is ready at http://127.0.0.1:8000/{APP}.
INFO 2026-11-30 20:19:08,195 serve 4870 -- Connecting to existing Serve app in namespace "serve". New http_options/controller_options will not be applied.
INFO 2026-11-30 20:19:09,214 serve 4870 -- Application '{APP}' is ready at http://127.0.0.1:8000/{APP}.
INFO 2026-11-30 20:20:48,595 serve 4870 -- Connecting to existing Serve app in namespace "serve". New http_options/controller_options will not be applied.
INFO 2026-11-30 20:20:49,615 serve 4870 -- Application '{APP}' is ready at http://127.0.0.1:8000/{APP}.
"""
REPLICA = f"""\
:actor_name:ServeReplica:{APP}:EngineServer
INFO 2026-11-30 20:18:42,270 {APP}_EngineServer 4m10etw6 c684 -- CALL wait_ready OK 83917.3ms
INFO 2026-11-30 20:19:08,003 {APP}_EngineServer 4m10etw6 7f31 -- CALL benchmark OK 25727.8ms
INFO 2026-11-30 20:19:08,079 {APP}_EngineServer 4m10etw6 c858 -- CALL info OK 70.1ms
INFO 2026-11-30 20:19:08,086 {APP}_EngineServer 4m10etw6 13ff -- CALL stop_server OK 3.0ms
INFO 2026-11-30 20:20:22,857 {APP}_EngineServer 4m10etw6 bf7f -- CALL wait_ready OK 60000.0ms
INFO 2026-11-30 20:20:22,900 {APP}_EngineServer 4m10etw6 db62 -- CALL stop_server OK 3.2ms
INFO 2026-11-30 20:21:51,179 {APP}_EngineServer 4m10etw6 bb6b -- CALL wait_ready OK 61000.0ms
INFO 2026-11-30 20:22:20,000 {APP}_EngineServer 4m10etw6 b184 -- CALL benchmark OK 28000.0ms
INFO 2026-11-30 20:22:20,500 {APP}_EngineServer 4m10etw6 9343 -- CALL stop_server OK 2.0ms
"""
CONTROLLER = f"""\
:actor_name:ServeController
INFO 2026-11-30 20:17:13,327 controller 3043 -- Adding 1 replica to Deployment(name='EngineServer', app='{APP}').
INFO 2026-11-30 20:19:08,377 controller 3043 -- Updating 1 replicas of Deployment(name='EngineServer', app='{APP}') with outdated deployment configs.
INFO 2026-11-30 20:20:48,733 controller 3043 -- Updating 1 replicas of Deployment(name='EngineServer', app='{APP}') with outdated deployment configs.
"""


@pytest.fixture()
def logs(tmp_path: Path) -> Path:
    for name, text in (("worker-a.err", TRAINABLE), ("worker-b.err", REPLICA), ("worker-c.err", CONTROLLER)):
        (tmp_path / name).write_text(text)
    return tmp_path


def test_trials_per_slot_with_an_upper_bound_of_the_overhead(logs: Path) -> None:
    tl = build(read_lines(logs))
    first, failed, last = tl.trials
    assert (first.replica, failed.replica, last.replica) == ("new", "reused", "reused")
    assert first.deploy_s == pytest.approx(5.166) and last.deploy_s == pytest.approx(1.02)
    # cycle: serve.run to the next serve.run on the slot; the last one ends at its stop_server
    assert first.cycle_s == pytest.approx(115.051)
    assert first.outside_s == pytest.approx(115.051 - 83.9173 - 25.7278)
    assert failed.bench_s is None and failed.cycle_s == pytest.approx(100.4)
    assert last.cycle_s == pytest.approx((22 * 60 + 20.5) - (20 * 60 + 48.595))
    assert last.outside_s == pytest.approx(last.cycle_s - 61.0 - 28.0)
    # the totals count the trials that ran a benchmark; a failed launch is listed but not in the share
    assert tl.cycle_s == pytest.approx(first.cycle_s + last.cycle_s)
    assert tl.share == pytest.approx((first.outside_s + last.outside_s) / tl.cycle_s)
    assert tl.reused_share == pytest.approx(last.outside_s / last.cycle_s)


def test_cli_table_json_and_errors(logs: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main([str(logs)]) == 0
    out = capsys.readouterr().out
    assert "| st-slot-0 | 0 |" in out and "completed trials: 2" in out and "goal of at most 3%" in out
    assert main([str(logs), "--json"]) == 0
    assert len(json.loads(capsys.readouterr().out)["trials"]) == 3
    empty = tmp_path / "empty"
    empty.mkdir()
    assert main([str(empty)]) == 1 and "no GPU-slot trials" in capsys.readouterr().err
    assert main([str(tmp_path / "missing")]) == 2
