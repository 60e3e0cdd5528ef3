"""All-reduce cost: NCCL's own tuning model (algorithm x protocol, channels, buffer size) and SGLang's custom all-reduce.

Pure functions. The NCCL part follows ``src/graph/tuning.cc`` of NCCL 2.x: for each enabled (algorithm, protocol) the
time is ``latency + bytes / algorithm_bandwidth`` and NCCL runs the cheapest one. ``NCCL_ALGO`` / ``NCCL_PROTO`` restrict
the set (global lists, or ``allreduce:...`` per-collective lists of NCCL >= 2.24). Sources and assumptions:
``docs/simulator.md``.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass

from autotune.sim.profile import Hardware

ALGOS = ("tree", "ring")
PROTOS = ("ll", "ll128", "simple")
_PROTO_INDEX = {p: i for i, p in enumerate(PROTOS)}

# NCCL tuning.cc: base latency (us) per algorithm, protocol (LL, LL128, Simple).
BASE_LAT: Mapping[str, tuple[float, float, float]] = {"tree": (4.4, 4.4, 0.0), "ring": (3.6, 10.0, 8.4)}
# Per-hop hardware latency (us).
HW_LAT: Mapping[str, Mapping[str, tuple[float, float, float]]] = {
    "nvlink": {"tree": (0.52, 1.25, 28.0), "ring": (0.47, 1.9, 3.4)},
    "pcie": {"tree": (1.0, 1.9, 28.0), "ring": (1.0, 2.5, 5.7)},
}
LL128_MAX_BW_PER_CH = 16.7  # GB/s, all-reduce
MAX_TREE_BW = 110.0
# Trees deviate from the model at medium sizes; NCCL applies these factors (powers of two, 64 B to 128 MiB).
TREE_CORRECTION: Mapping[str, tuple[float, ...]] = {
    "ll": (
        1.0,
        1.0,
        1.0,
        1.0,
        0.9,
        0.8,
        0.7,
        0.7,
        0.7,
        0.7,
        0.6,
        0.5,
        0.4,
        0.4,
        0.5,
        0.6,
        0.7,
        0.8,
        0.9,
        1.0,
        1.0,
        1.0,
    ),
    "ll128": (
        1.0,
        1.0,
        1.0,
        1.0,
        1.0,
        0.9,
        0.8,
        0.8,
        0.8,
        0.7,
        0.6,
        0.6,
        0.6,
        0.5,
        0.6,
        0.6,
        0.7,
        0.7,
        0.8,
        0.9,
        0.9,
        1.0,
    ),
    "simple": (
        0.9,
        0.9,
        0.9,
        0.9,
        0.9,
        0.9,
        0.9,
        0.8,
        0.7,
        0.6,
        0.6,
        0.5,
        0.5,
        0.5,
        0.5,
        0.5,
        0.5,
        0.6,
        0.6,
        0.7,
        0.8,
        0.9,
    ),
}
DEFAULT_BUFFSIZE = 4 * 1024 * 1024
_ALGO_NAMES = {"tree": "tree", "ring": "ring", "collnet": None, "collnetdirect": None, "collnetchain": None}
_ALGO_NAMES.update({"nvls": None, "nvlstree": None, "pat": None})


class NcclConfigError(ValueError):
    """An NCCL_* value NCCL itself would reject (``invalid usage``)."""


@dataclass(frozen=True)
class NcclSettings:
    """What the server's ``NCCL_*`` environment selects, for all-reduce and for the other collectives."""

    allreduce_algos: frozenset[str] = frozenset(ALGOS)
    allreduce_protos: frozenset[str] = frozenset(PROTOS)
    ll128_forced: bool = False  # NCCL_PROTO named LL128 explicitly (NCCL enables it by default only on NVLink)
    other_algos: frozenset[str] = frozenset(ALGOS)  # what AllGather / ReduceScatter may use
    other_protos: frozenset[str] = frozenset(PROTOS)
    min_channels: int | None = None
    max_channels: int | None = None
    buffsize: int = DEFAULT_BUFFSIZE
    p2p_disabled: bool = False
    algo_env: str | None = None
    proto_env: str | None = None

    @property
    def global_algo_breaks_allgather(self) -> bool:
        """AllGather only has Ring (here): a global NCCL_ALGO without Ring leaves it no algorithm (graph capture fails)."""
        return "ring" not in self.other_algos


def _parse_list(
    text: str, universe: tuple[str, ...], aliases: Mapping[str, str | None], what: str
) -> dict[str, set[str]]:
    """NCCL's ``parseList``: ``"a,b"``, ``"^a"``, ``"x;allreduce:a"``. Returns {"*": set, "allreduce": set, ...}."""
    out: dict[str, set[str]] = {}
    for i, part in enumerate(p.strip() for p in text.split(";")):
        if not part:
            continue
        prefix = "*"
        if ":" in part:
            prefix, part = (s.strip().lower() for s in part.split(":", 1))
        elif i > 0:
            raise NcclConfigError(f"{what}={text!r}: only the first list may lack a collective prefix")
        negate = part.startswith("^")
        names: set[str] = set()
        for tok in (t.strip().lower() for t in part.lstrip("^").split(",")):
            if not tok:
                continue
            if tok not in aliases:
                raise NcclConfigError(f"{what}={text!r}: unknown value {tok!r}")
            mapped = aliases[tok]
            if mapped is not None:
                names.add(mapped)
        out[prefix] = (set(universe) - names) if negate else names
    return out


def parse_nccl_env(env: Mapping[str, str]) -> NcclSettings:
    """Read the ``NCCL_*`` variables the model uses. Raises NcclConfigError on values NCCL rejects."""
    algo_env = env.get("NCCL_ALGO")
    proto_env = env.get("NCCL_PROTO")
    ar_algos, other_algos = set(ALGOS), set(ALGOS)
    if algo_env:
        parsed = _parse_list(algo_env, ALGOS, _ALGO_NAMES, "NCCL_ALGO")
        base = parsed.get("*", set(ALGOS))
        other_algos = parsed.get("allgather", base) & parsed.get("reducescatter", base)
        ar_algos = parsed.get("allreduce", base)
    protos_ar, protos_other, ll128_forced = set(PROTOS), set(PROTOS), False
    if proto_env:
        aliases: dict[str, str | None] = {"ll": "ll", "ll128": "ll128", "simple": "simple"}
        parsed = _parse_list(proto_env, PROTOS, aliases, "NCCL_PROTO")
        base = parsed.get("*", set(PROTOS))
        protos_other = base
        protos_ar = parsed.get("allreduce", base)
        ll128_forced = "ll128" in protos_ar and "^" not in proto_env and "ll128" in proto_env.lower()
    if not ar_algos or not protos_ar:
        raise NcclConfigError("NCCL_ALGO/NCCL_PROTO leave all-reduce no algorithm/protocol")

    def _int(name: str) -> int | None:
        raw = env.get(name)
        if raw is None or raw == "":
            return None
        try:
            value = int(raw, 0)
        except ValueError as exc:
            raise NcclConfigError(f"{name}={raw!r} is not an integer") from exc
        if value <= 0:
            raise NcclConfigError(f"{name}={raw!r} must be positive")
        return value

    return NcclSettings(
        allreduce_algos=frozenset(ar_algos),
        allreduce_protos=frozenset(protos_ar),
        ll128_forced=ll128_forced,
        other_algos=frozenset(other_algos),
        other_protos=frozenset(protos_other),
        min_channels=_int("NCCL_MIN_NCHANNELS") or _int("NCCL_MIN_CTAS"),
        max_channels=_int("NCCL_MAX_NCHANNELS") or _int("NCCL_MAX_CTAS"),
        buffsize=_int("NCCL_BUFFSIZE") or DEFAULT_BUFFSIZE,
        p2p_disabled=env.get("NCCL_P2P_DISABLE", "0").strip() not in ("", "0"),
        algo_env=algo_env,
        proto_env=proto_env,
    )


def channels(hw: Hardware, s: NcclSettings) -> int:
    n = hw.nccl_default_channels
    if s.min_channels is not None:
        n = max(n, s.min_channels)
    if s.max_channels is not None:
        n = min(n, s.max_channels)
    return max(1, min(n, hw.nccl_max_channels))


def nccl_buffer_gb(hw: Hardware, s: NcclSettings) -> float:
    """Per-GPU memory of NCCL's buffers: per channel, two ring peers, Simple (BUFFSIZE) + LL128 + LL buffers."""
    per_peer = s.buffsize + 4.6 * 2**20 + 0.25 * 2**20
    return channels(hw, s) * 2 * per_peer / 1e9


def _buffsize_factor(buffsize: int) -> float:
    """Simple-protocol bandwidth vs NCCL_BUFFSIZE (assumed): smaller chunks pipeline worse; larger gain little."""
    ratio = buffsize / DEFAULT_BUFFSIZE
    if ratio < 1:
        return 1.0 / (1.0 + 0.2 * math.log2(1.0 / ratio))
    return min(1.05, 1.0 + 0.02 * math.log2(ratio))


def nccl_allreduce_us(nbytes: float, ranks: int, hw: Hardware, s: NcclSettings) -> tuple[float, str]:
    """Time (us) of one NCCL all-reduce and the (algorithm/protocol) NCCL picks, e.g. ``"ring/ll"``."""
    if ranks <= 1:
        return 0.0, "none"
    link = "nvlink" if hw.interconnect == "nvlink" else "pcie"
    nch = channels(hw, s)
    speed = hw.nccl_channel_bw_gbps * (0.5 if s.p2p_disabled else 1.0)
    bus = min(nch * speed, hw.link_bw_gbps * (0.5 if s.p2p_disabled else 1.0))
    nsteps = 2 * (ranks - 1)
    # NCCL enables LL128 by default only on NVLink; on PCIe only when NCCL_PROTO names it
    ll128_ok = "ll128" in s.allreduce_protos and (link == "nvlink" or s.ll128_forced)
    best: tuple[float, str] | None = None
    for algo in ALGOS:
        if algo not in s.allreduce_algos:
            continue
        for proto in PROTOS:
            if proto not in s.allreduce_protos or (proto == "ll128" and not ll128_ok):
                continue
            i = _PROTO_INDEX[proto]
            bw = bus
            if algo == "ring":
                if proto == "ll":
                    bw *= 0.25
                elif proto == "ll128":
                    bw = min(bw * 0.92, LL128_MAX_BW_PER_CH * nch)
                algbw = bw * ranks / nsteps
                lat = BASE_LAT[algo][i] + nsteps * HW_LAT[link][algo][i] * hw.nccl_hw_lat_scale
            else:
                bw = min(bw * 0.9, MAX_TREE_BW)
                if proto == "ll":
                    bw /= 3.8
                elif proto == "ll128":
                    bw = min(bw * 7.0 / 9.0, LL128_MAX_BW_PER_CH * nch * 7.0 / 9.0)
                algbw = bw * 0.5
                lat = BASE_LAT[algo][i] + 2 * (ranks - 1) * HW_LAT[link][algo][i] * hw.nccl_hw_lat_scale
                log_size = int(math.log2(max(1.0, nbytes / 64)))
                if log_size < 22:
                    algbw *= TREE_CORRECTION[proto][log_size]
            if proto == "simple":
                algbw *= _buffsize_factor(s.buffsize)
            if s.p2p_disabled:
                lat *= 1.5
            lat += 0.15 * max(0, nch - hw.nccl_default_channels)  # more channels: more blocks to launch and sync
            t = lat + nbytes / (1000.0 * algbw)
            if best is None or t < best[0]:
                best = (t, f"{algo}/{proto}")
    if best is None:
        raise NcclConfigError("no algorithm/protocol available for AllReduce")
    return hw.nccl_call_overhead_us + best[0], best[1]


def custom_ar_supported(hw: Hardware, ranks: int) -> bool:
    """SGLang's custom all-reduce: world size 2, 4, 6 or 8, and NVLink unless only two GPUs on PCIe."""
    return ranks in (2, 4, 6, 8) and (hw.interconnect == "nvlink" or ranks == 2)


def custom_allreduce_us(nbytes: float, ranks: int, hw: Hardware) -> float | None:
    """Time (us) of SGLang's custom all-reduce, or None when the message is above its buffer (falls back to NCCL)."""
    if nbytes > hw.custom_ar_max_bytes:
        return None
    # one-shot below 512 KiB (each rank reads every peer's buffer), two-shot (reduce-scatter + all-gather) above
    shots = 1.0 if nbytes <= 512 * 1024 else 2.0
    return hw.custom_ar_latency_us + nbytes * shots * (ranks - 1) / ranks / (1000.0 * hw.custom_ar_bw_gbps)
