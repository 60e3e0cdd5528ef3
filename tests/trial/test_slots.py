"""The study's GPU slot pool (a named Ray actor): trials take distinct slots and give them back."""

from __future__ import annotations

import pytest
import ray

from autotune.core.errors import AutotuneError
from autotune.trial import slots


def test_each_node_gets_slots_from_its_own_gpus() -> None:
    nodes = [slots.NodeGpus("a", 4), slots.NodeGpus("b", 1), slots.NodeGpus("c", 8), slots.NodeGpus("d", 3)]
    plan = slots.plan_slots(nodes, 2)
    assert [(s.index, s.node_id, s.local, s.node_slots) for s in plan] == [
        (0, "a", 0, 2),
        (1, "a", 1, 2),
        (2, "c", 0, 4),
        (3, "c", 1, 4),
        (4, "c", 2, 4),
        (5, "c", 3, 4),
        (6, "d", 0, 1),
    ]  # b's one GPU cannot hold a 2-GPU slot; d's third GPU is left over: a slot never spans nodes
    assert slots.plan_slots(nodes, 16) == []
    assert [s.index for s in slots.plan_slots([slots.NodeGpus("e", 2)], 1, first_index=7)] == [7, 8]


def test_a_multi_node_slot_takes_one_place_on_each_of_distinct_nodes() -> None:
    nodes = [slots.NodeGpus("a", 8), slots.NodeGpus("b", 8), slots.NodeGpus("c", 4)]
    plan = slots.plan_slots(nodes, 4, nnodes=2)  # 2 + 2 + 1 places of 4 GPUs: two 2-node slots, one place left
    assert len(plan) == 2 and all(len(set(s.nodes)) == 2 and s.gpus == 4 for s in plan)
    used = [nid for s in plan for nid in s.nodes]
    assert used.count("a") <= 2 and used.count("b") <= 2 and used.count("c") <= 1
    assert slots.plan_slots([slots.NodeGpus("a", 16)], 8, nnodes=2) == []  # one node cannot hold a 2-node slot


def test_a_cap_takes_slots_across_nodes_and_counts_each_node_s_share_again() -> None:
    plan = slots.plan_slots([slots.NodeGpus("a", 8), slots.NodeGpus("b", 8)], 1)
    kept = slots.take(plan, 3)
    assert [(s.index, s.node_id, s.local, s.node_slots) for s in kept] == [
        (0, "a", 0, 2),
        (8, "b", 0, 1),
        (1, "a", 1, 2),
    ]
    alone = slots.take(slots.plan_slots([slots.NodeGpus("a", 8)], 1), 1)
    assert [(s.local, s.node_slots) for s in alone] == [(0, 1)]  # alone on its node: all of its CPUs (cpusets)
    assert sorted(slots.take(plan, None), key=lambda s: s.index) == plan  # no cap: every slot, counted as planned


@pytest.fixture(scope="module")
def local_ray():  # type: ignore[no-untyped-def]
    ray.init(address="local", num_cpus=1, include_dashboard=False, log_to_driver=False)  # never another local cluster
    yield
    ray.shutdown()


@pytest.mark.slow  # starts Ray
def test_slots_are_distinct_returned_and_found_by_owner(local_ray: None) -> None:
    assert slots.find("nobody") is None and slots.find(None) is None
    pool = slots.create("study-x", 2)
    found = slots.find("study-x")
    assert found is not None and slots.size(found) == 2
    a, b = slots.acquire(found), slots.acquire(found)
    assert {a, b} == {0, 1}
    with pytest.raises(AutotuneError, match="no free GPU slot"):
        slots.acquire(found, timeout_s=0.2, poll_s=0.05)
    ray.get(found.release.remote(b))
    ray.get(found.release.remote(b))  # twice: still one slot
    assert slots.acquire(found) == b
    assert slots.slot_app_name("study-x", "/r/study-x", a).endswith(f"-slot-{a}")
    del pool


@pytest.mark.slow  # starts Ray
def test_a_lost_node_takes_its_slots_and_names_its_trials_a_joined_node_adds_some(local_ray: None) -> None:
    pool = slots.create("study-y", slots.plan_slots([slots.NodeGpus("a", 2), slots.NodeGpus("b", 1)], 1))
    assert slots.acquire(pool, number=10) == 0 and slots.acquire(pool, number=11) == 1
    ray.get(pool.interrupted.remote(1))  # its runner saw the node lost, then gave the slot back
    ray.get(pool.release.remote(1))
    assert ray.get(pool.try_acquire.remote(12)) == 2  # not the lost slot 1, though it was released
    ray.get(pool.release.remote(2))
    gone = ray.get(pool.drop_node.remote("a"))
    assert gone == {"slots": [0, 1], "trials": [10, 11]}
    ray.get(pool.release.remote(0))  # the interrupted trial gives its slot back: it does not come back
    assert slots.size(pool) == 1 and slots.acquire(pool) == 2
    new = ray.get(pool.add_node.remote(slots.NodeGpus("c", 2), 1))
    assert [s.index for s in new] == [3, 4] and slots.size(pool) == 3
    assert ray.get(pool.add_node.remote(slots.NodeGpus("c", 2), 1)) == []  # known already
    described = slots.describe(pool, 4)
    assert described is not None and described.node_id == "c" and slots.describe(pool, 0) is None
    # the newest node lost, another joins: its slots are new numbers, not the lost node's again
    assert ray.get(pool.drop_node.remote("c"))["slots"] == [3, 4]
    assert [s.index for s in ray.get(pool.add_node.remote(slots.NodeGpus("d", 1), 1))] == [5]
