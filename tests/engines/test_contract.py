"""The engine contract, run over every registered engine (``autotune.engines.ENGINES``), as Optuna's storage tests
run over every backend: what a second engine must pass before a study may launch it.

Each engine brings its cases (``CASES``): configurations its rules must accept and reject, a ready log and failing log
tails with what they mean. The simulated engine speaks SGLang's flags and log lines, so it shares SGLang's cases; its
log is also produced by the simulator itself, and a real simulated server is launched. Where an engine is not
installed here (real SGLang without a GPU), the checks that need it say so and skip; ``tests/gpu`` runs them on the
GPU machine.
"""

from __future__ import annotations

import socket
import sys
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from importlib import util
from pathlib import Path
from typing import Any

import pytest

from autotune.core.errors import LaunchError, UnknownFlagError
from autotune.core.failures import FailureKind
from autotune.core.trial import TrialConfig
from autotune.engines import ENGINES, engine_class, engine_for, engine_model, get_engine
from autotune.engines.base import RAY_INJECTED_ENV, Engine, EngineModel, flags_in_help
from autotune.engines.memory import from_model_dir
from autotune.engines.preflight import check_argv, preflight
from autotune.space import StudyOverrides, load_study

ROOT = Path(__file__).resolve().parents[2]
H200 = 143771 * 1024 * 1024


@dataclass(frozen=True)
class Point:
    flags: Mapping[str, Any]
    env: Mapping[str, str] = field(default_factory=dict)
    tp_size: int = 1

    def config(self) -> TrialConfig:
        return TrialConfig(model_path="/models/m", tp_size=self.tp_size, flags=dict(self.flags), env=dict(self.env))


@dataclass(frozen=True)
class EngineCases:
    good: tuple[Point, ...]  # launchable: no violation
    bad: tuple[Point, ...]  # each rejected before a launch
    ready_log: str  # what a server that became ready printed
    phases: Mapping[str, float | int]  # what the parser must read from ready_log
    failures: tuple[tuple[str, FailureKind], ...]  # a dead server's log tail -> why
    installed: bool  # whether the engine's own command runs here (its --help, a real launch)


EAGLE = {
    "speculative-algorithm": "EAGLE3",
    "speculative-draft-model-path": "/models/drafter",
    "speculative-num-steps": 3,
    "speculative-eagle-topk": 1,
}
SGLANG_CASES = EngineCases(
    good=(
        Point({}),
        Point({"mem-fraction-static": 0.8, "max-running-requests": 64, "cuda-graph-max-bs": 64}),
        Point({**EAGLE, "mem-fraction-static": 0.85}),
        Point({**EAGLE, "speculative-eagle-topk": 2, "speculative-num-draft-tokens": 6, "max-running-requests": 128}),
        Point({"speculative-algorithm": "NGRAM", "speculative-ngram-capacity": 1000}),
        Point({}, env={"NCCL_ALGO": "allreduce:tree"}, tp_size=2),
    ),
    bad=(
        Point({"speculative-algorithm": "BOGUS"}),
        Point({"speculative-algorithm": "EAGLE3"}),  # no drafter
        Point({**EAGLE, "speculative-eagle-topk": 2}),  # topk > 1 without draft tokens
        Point({**EAGLE, "speculative-num-steps": 2, "speculative-eagle-topk": 2, "speculative-num-draft-tokens": 32}),
        Point({"speculative-algorithm": "NGRAM", "speculative-ngram-capacity": 4}),  # below the trie depth
        Point({}, env={"NCCL_ALGO": "tree"}, tp_size=2),  # AllGather left without an algorithm
    ),
    ready_log=(
        "Load weight end. elapsed=0.53 s, type=LlamaForCausalLM, dtype=torch.bfloat16, mem usage=2.3 GB.\n"
        "KV Cache is allocated. dtype: torch.bfloat16, #tokens: 3569454, K size: 54.47 GB, V size: 54.47 GB\n"
        "Capture target decode CUDA graph end. elapsed=2.34 s, mem usage=0.41 GB, avail mem=19.2 GB.\n"
        "max_total_num_tokens=3569454, chunked_prefill_size=8192, max_running_requests=48, context_len=131072\n"
        "The server is fired up and ready to roll!\n"
    ),
    phases={
        "weights_loaded_s": 0.53,
        "kv_cache_tokens": 3569454,
        "graph_capture_s": 2.34,
        "max_total_num_tokens": 3569454,
        "max_running_requests": 48,
    },
    failures=(
        ("RuntimeError: Not enough memory. Please try to increase --mem-fraction-static.", FailureKind.OOM_AT_LAUNCH),
        ("Exception: Capture cuda graph failed: CUDA out of memory", FailureKind.GRAPH_CAPTURE_FAILED),
        ("launch_server.py: error: unrecognized arguments: --foo 1", FailureKind.UNKNOWN_FLAG),
        ("NCCL WARN Error : no algorithm/protocol available", FailureKind.NCCL_ERROR),
        ("Segmentation fault", FailureKind.CRASHED_AT_LAUNCH),
    ),
    installed=util.find_spec("sglang") is not None,
)
CASES: dict[str, EngineCases] = {"sglang": SGLANG_CASES, "sim": replace(SGLANG_CASES, installed=True)}


def engines() -> list[str]:
    return sorted(ENGINES)


def cases(name: str) -> EngineCases:
    return CASES[name]


def needs_installed(name: str) -> None:
    if not cases(name).installed:
        pytest.skip(f"engine {name!r} is not installed here (tests/gpu checks it on the GPU machine)")


def argv_flags(argv: tuple[str, ...]) -> dict[str, str | bool]:
    """``--a 1 --b`` -> ``{"a": "1", "b": True}`` (the flags after the command)."""
    out: dict[str, str | bool] = {}
    for i, token in enumerate(argv):
        if token.startswith("--"):
            nxt = argv[i + 1] if i + 1 < len(argv) else None
            out[token[2:]] = nxt if nxt is not None and not nxt.startswith("--") else True
    return out


def test_every_registered_engine_brings_its_cases() -> None:
    assert set(CASES) == set(ENGINES), "a registered engine must add its cases to CASES here"


@pytest.mark.parametrize("name", engines())
def test_the_registry_builds_the_adapter(name: str) -> None:
    cls = engine_class(name)
    assert issubclass(cls, Engine) and cls.name == name
    assert isinstance(engine_model(name), EngineModel)
    engine = get_engine(name)
    assert engine.command() and isinstance(engine.simulated, bool)
    assert engine.release().strip()


@pytest.mark.parametrize("name", engines())
def test_a_study_on_the_engine_gets_it(name: str) -> None:
    spec = load_study(ROOT / "search_spaces" / "smoke.yaml", overrides=StudyOverrides(engine=name, model_path="/m"))
    engine = engine_for(spec)
    assert type(engine) is engine_class(name) and engine.model is engine_model(name)


@pytest.mark.parametrize("name", engines())
def test_the_record_names_the_engine(name: str) -> None:
    """A server that never answered is still named: the engine, simulated or not, the GPUs it was given."""
    engine = get_engine(name)
    ident = engine.identity(release=None, server_info={}, gpu_names=[], gpus=2)
    assert ident.engine == name and ident.simulated is engine.simulated and ident.gpu_count == 2
    assert ident.version and ident.gpu_name
    if engine.simulated:
        assert ident.gpu_name.startswith("SIMULATED"), "simulated figures are never presented as measurements"


@pytest.mark.parametrize("name", engines())
def test_memory_sizes_are_known_or_none(name: str) -> None:
    spec = load_study(
        ROOT / "search_spaces" / "smoke.yaml", overrides=StudyOverrides(engine=name, model_path="llama-1b")
    )
    engine = engine_for(spec)
    try:
        sizes = engine.memory_sizes("/tmp/models/llama-1b", ())
    except OSError as exc:  # a real engine reads the GPUs of this node
        pytest.skip(f"{name}: the GPUs here cannot be read ({exc})")
    if sizes is None:
        assert not engine.simulated, "a simulated engine knows its profile's sizes"
        return
    assert sizes.gpu_mem_bytes > sizes.weight_bytes / spec.server.tp_size > 0 and sizes.kv_bytes_per_token > 0


@pytest.mark.parametrize("name", engines())
def test_launch_spec_shape(name: str) -> None:
    engine = get_engine(name)
    cfg = Point(EAGLE, env={"MY_VAR": "1"}, tp_size=2).config()
    spec = engine.launch_spec(cfg, port=31000, nccl_port=31001, ready_timeout_s=77.0)
    assert spec.engine == name and spec.port == 31000 and spec.host == cfg.host and spec.gpus == cfg.gpus == 2
    assert spec.argv[: len(engine.command())] == engine.command()
    flags = argv_flags(spec.argv[len(engine.command()) :])
    assert flags["model-path"] == "/models/m" and flags["tp-size"] == "2" and flags["port"] == "31000"
    assert all(str(flags[k]) == str(v) for k, v in EAGLE.items())
    assert spec.env["MY_VAR"] == "1" and spec.ready_timeout_s == 77.0
    assert set(spec.unset_env) == set(RAY_INJECTED_ENV), "Ray's actor variables are removed from the server"
    kept = engine.launch_spec(replace(cfg, env={"OMP_NUM_THREADS": "4"}), port=1)
    assert "OMP_NUM_THREADS" not in kept.unset_env and kept.env["OMP_NUM_THREADS"] == "4"


@pytest.mark.parametrize("name", engines())
def test_normalize_is_idempotent_and_drops_omitted_flags(name: str) -> None:
    engine = get_engine(name)
    for point in (*cases(name).good, *cases(name).bad):
        cfg = replace(point.config(), flags={**point.flags, "omitted": None, "off": False})
        once = engine.normalize(cfg)
        assert engine.normalize(once) == once, point
        assert "omitted" not in once.flags and "off" not in once.flags


@pytest.mark.parametrize("name", engines())
def test_violations_reject_the_known_bad_and_pass_the_good(name: str) -> None:
    engine = get_engine(name)
    for point in cases(name).good:
        assert engine.violations(engine.normalize(point.config())) == [], point
    for point in cases(name).bad:
        problems = engine.violations(engine.normalize(point.config()))
        assert problems, f"{name} should reject {point}"
        assert all("Fix" in p for p in problems), "every violation says how to fix the point"


@pytest.mark.parametrize("name", engines())
def test_ready_and_failure_log_lines_are_read(name: str) -> None:
    engine, c = get_engine(name), cases(name)
    phases = engine.parse_log_phases(c.ready_log)
    for key, want in c.phases.items():
        assert getattr(phases, key) == pytest.approx(want), key
    empty = engine.parse_log_phases("nothing a server prints")
    assert empty.kv_cache_tokens is None and empty.weights_loaded_s is None
    for tail, kind in c.failures:
        assert engine.classify_failure(tail, ready=False) is kind, tail
    assert engine.classify_failure("Segmentation fault", ready=True) is FailureKind.CRASHED_UNDER_LOAD


@pytest.mark.parametrize("name", engines())
def test_the_memory_model_reads_what_is_launched(name: str) -> None:
    """What the policy reads of a point (running cap, memory fraction, drafter, graph ceiling) is what the launch's
    argv carries, under the flag names the model declares."""
    engine = get_engine(name)
    model = engine.model
    for point in cases(name).good:
        cfg = engine.normalize(point.config())
        argv = argv_flags(engine.launch_spec(cfg, port=1).argv)
        cap = argv.get(model.running_cap_flag)
        if cap is not None:
            assert model.running_cap(cfg.flags) == int(str(cap))
        frac = argv.get(model.memory_fraction_flag)
        assert model.memory_fraction(cfg.flags) == (float(str(frac)) if frac is not None else None)
        if model.speculation(cfg.flags) is not None:
            assert model.drafter(cfg.flags) == argv.get(model.drafter_flag)
            assert model.graph_tokens_per_request(cfg.flags) >= 1
        else:
            assert model.drafter(cfg.flags) is None and model.graph_tokens_per_request(cfg.flags) == 1
        ceilings = [argv[f] for f in model.graph_ceiling_flags if f in argv]
        assert model.graph_ceiling(cfg.flags) == (float(str(ceilings[0])) if ceilings else None)


@pytest.mark.parametrize("name", engines())
def test_kv_bytes_per_token_split_over_tensor_parallel_and_grow_with_a_drafter(name: str) -> None:
    model = engine_model(name)
    sizes = replace(from_model_dir("/tmp/models/llama-1b", H200), drafters={"/models/drafter": (1e9, 1)})
    plain = model.kv_bytes_per_token(sizes, {}, tp_size=1)
    assert plain == sizes.kv_bytes_per_token
    assert model.kv_bytes_per_token(sizes, {}, tp_size=2) == pytest.approx(plain / 2)
    assert model.kv_bytes_per_token(sizes, EAGLE, tp_size=1) > plain


@pytest.mark.parametrize("name", engines())
def test_tied_caps_are_read_back_as_the_running_cap(name: str) -> None:
    model = engine_model(name)
    tied = model.tie_caps(EAGLE, 256)
    assert model.running_cap(tied) == 256 and model.graph_ceiling(tied) == 256
    assert model.tie_caps({}, 256) == {}  # a point without speculation is left alone


@pytest.mark.parametrize("name", engines())
def test_the_model_flags_and_a_launch_pass_the_engines_own_help(name: str) -> None:
    """Preflight: the flags the model reads are ones the installed release knows, a launch's argv passes, and a flag
    it does not know is refused before the launch."""
    needs_installed(name)
    engine = get_engine(name)
    model = engine.model
    known = flags_in_help(engine.help_text(sys.executable))
    declared = {model.running_cap_flag, model.memory_fraction_flag, model.drafter_flag}
    assert declared <= known and set(model.graph_ceiling_flags) & known
    release = engine.release()
    spec = engine.launch_spec(engine.normalize(Point(EAGLE).config()), port=1)
    start = len(engine.command())
    assert check_argv(spec.argv[start:], known, engine.FLAG_ALIASES, release=release) == list(spec.argv[start:])
    bad = replace(spec, argv=(*spec.argv, "--no-such-flag-anywhere", "1"))
    with pytest.raises(UnknownFlagError, match="no-such-flag-anywhere"):
        preflight(engine, bad, release=release)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.mark.parametrize("name", engines())
def test_a_real_server_becomes_ready_and_its_failure_is_read(name: str, tmp_path: Path) -> None:
    """One real launch that becomes ready (its log parsed: the phases the record keeps) and one that dies at start
    (its log classified). Only engines that start on this machine in seconds (the simulator)."""
    needs_installed(name)
    if not engine_class(name).simulated:
        pytest.skip(f"a real {name} launch takes minutes and a GPU: tests/gpu launches it")
    from autotune.trial.launcher import launched

    engine = get_engine(name)

    cfg = replace(Point({"mem-fraction-static": 0.8}).config(), model_path="m")
    spec = engine.launch_spec(cfg, port=free_port(), ready_timeout_s=60.0)
    with launched(spec, tmp_path / "ready.log") as server:
        assert server.ready_at is not None
    phases = engine.parse_log_phases((tmp_path / "ready.log").read_text())
    assert phases.kv_cache_tokens and phases.weights_loaded_s is not None and phases.max_running_requests
    oom = engine.launch_spec(replace(cfg, flags={"mem-fraction-static": 0.01}), port=free_port(), ready_timeout_s=60.0)
    with pytest.raises(LaunchError) as exc:
        with launched(oom, tmp_path / "oom.log"):
            pass
    assert exc.value.kind is FailureKind.OOM_AT_LAUNCH
    assert engine.classify_failure((tmp_path / "oom.log").read_text(), ready=False) is FailureKind.OOM_AT_LAUNCH
