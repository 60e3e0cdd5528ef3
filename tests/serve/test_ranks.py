"""A multi-node server's placement and argv: one bundle per node, each pinned to its node; every rank told its rank and
rank 0's address."""

from __future__ import annotations

from autotune.serve.app import NODE_ID_LABEL, slot_placement
from autotune.serve.ranks import rank_argv, with_flag


def test_a_slot_is_one_bundle_per_node_pinned_by_node_id() -> None:
    assert slot_placement(1, ()) == {}  # a trial run outside the driver's placement: Ray places it
    one = slot_placement(2, ("n1",))
    assert one == {
        "placement_group_bundles": [{"CPU": 1, "GPU": 2}],
        "placement_group_strategy": "STRICT_PACK",
        "placement_group_bundle_label_selector": [{NODE_ID_LABEL: "n1"}],
    }
    two = slot_placement(4, ("n1", "n2"))
    assert two["placement_group_bundles"] == [{"CPU": 1, "GPU": 4}, {"CPU": 1, "GPU": 4}]
    assert two["placement_group_strategy"] == "STRICT_SPREAD"
    assert two["placement_group_bundle_label_selector"] == [{NODE_ID_LABEL: "n1"}, {NODE_ID_LABEL: "n2"}]


def test_each_rank_gets_its_rank_and_rank_zeros_address() -> None:
    argv = ["python", "-m", "sglang.launch_server", "--tp-size", "16", "--nnodes", "2", "--port", "30000"]
    assert rank_argv(argv, 1, "10.0.0.5:5000")[-4:] == ["--node-rank", "1", "--dist-init-addr", "10.0.0.5:5000"]
    again = rank_argv(rank_argv(argv, 0, "a:1"), 1, "b:2")  # replaced, never repeated
    assert again.count("--node-rank") == 1 and again[again.index("--node-rank") + 1] == "1"
    assert again[again.index("--dist-init-addr") + 1] == "b:2"
    assert with_flag(["--x", "1"], "--x", "2") == ["--x", "2"]
