"""Disjoint CPU sets per GPU slot: partition, NUMA order, GPU-based parts, the 2-core fallback, pinning."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from autotune.core import cpusets
from autotune.core.cpusets import format_cpulist, numa_cpus, parse_cpulist, partition, plan_for_slot, slot_part


def test_cpulist_roundtrip() -> None:
    assert parse_cpulist("0-3,8,10-11\n") == [0, 1, 2, 3, 8, 10, 11]
    assert format_cpulist([11, 0, 1, 2, 3, 8, 10]) == "0-3,8,10-11"
    with pytest.raises(ValueError):
        parse_cpulist("a-b")


def test_partition_is_disjoint_covering_and_numa_ordered() -> None:
    # two sockets with interleaved numbering (node 0: even CPUs, node 1: odd), 16 CPUs, 4 slots
    numa = [list(range(0, 16, 2)), list(range(1, 16, 2))]
    parts = partition(range(16), 4, numa)
    assert parts == [(0, 2, 4, 6), (8, 10, 12, 14), (1, 3, 5, 7), (9, 11, 13, 15)]  # each inside one node
    assert sorted(c for p in parts for c in p) == list(range(16))
    uneven = partition(range(5), 2)
    assert uneven == [(0, 1, 2), (3, 4)]


def test_plan_for_slot_cases() -> None:
    numa = [[0, 1, 2, 3], [4, 5, 6, 7]]
    p = plan_for_slot(available=range(8), part=1, parts=2, numa=numa)
    assert (p.cpus, p.how, p.cpulist) == ((4, 5, 6, 7), "disjoint", "4-7") and "NUMA node(s) 1" in p.detail
    assert plan_for_slot(available=range(8), part=0, parts=1, numa=numa).how == "whole node"
    # the 2-core development machine with 4 slots: cannot be disjoint, says so, uses every core
    two = plan_for_slot(available=[0, 1], part=3, parts=4)
    assert (two.cpus, two.how) == ((0, 1), "shared") and "too few" in two.detail
    assert plan_for_slot(available=[0, 1], part=1, parts=2).cpus == (1,)
    assert plan_for_slot(available=range(8), part=1, parts=2, enabled=False).how == "off"


def test_slot_part_by_gpu_then_by_slot() -> None:
    assert slot_part(["5"], node_gpus=8, gpus_per_slot=1, slot=5, slots=8) == (5, 8)  # GPU 5 of 8
    assert slot_part(["5"], node_gpus=8, gpus_per_slot=1, slot=None, slots=None) == (5, 8)  # the pool did not answer
    assert slot_part(["2", "3"], node_gpus=8, gpus_per_slot=2, slot=0, slots=4) == (1, 4)
    assert slot_part(["0"], node_gpus=0, gpus_per_slot=1, slot=1, slots=2) == (1, 2)  # simulator: no physical GPU
    assert slot_part([], node_gpus=0, gpus_per_slot=1, slot=None, slots=None) is None


def test_a_study_with_fewer_slots_than_gpus_on_a_node_splits_its_cpus_among_its_slots() -> None:
    # --max-concurrent 1 on an 8-GPU node (one TP-1 slot, on GPU 3): alone on its node, it gets every CPU
    assert slot_part(["3"], node_gpus=8, gpus_per_slot=1, slot=0, slots=1) == (0, 1)
    assert plan_for_slot(available=range(64), part=0, parts=1).how == "whole node"
    # --max-concurrent 2: two halves, not two eighths with six left idle
    assert slot_part(["1"], node_gpus=8, gpus_per_slot=1, slot=1, slots=2) == (1, 2)


def test_numa_from_sysfs(tmp_path: Path) -> None:
    for i, cpus in enumerate(["0-3", "4-7"]):
        (tmp_path / f"node{i}").mkdir()
        (tmp_path / f"node{i}" / "cpulist").write_text(cpus + "\n")
    (tmp_path / "node2").mkdir()  # a memory-only node: no CPUs
    (tmp_path / "node2" / "cpulist").write_text("\n")
    assert numa_cpus(tmp_path) == [[0, 1, 2, 3], [4, 5, 6, 7]]


def test_apply_pins_a_child() -> None:
    import subprocess
    import sys

    mine = sorted(os.sched_getaffinity(0))
    plan = (
        plan_for_slot(available=mine, part=len(mine) - 1, parts=len(mine))
        if len(mine) > 1
        else plan_for_slot(available=mine, part=0, parts=1)
    )
    child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(5)"])
    try:
        assert cpusets.apply(child.pid, plan) == ""
        assert sorted(os.sched_getaffinity(child.pid)) == list(plan.cpus)
    finally:
        child.kill()
        child.wait()
