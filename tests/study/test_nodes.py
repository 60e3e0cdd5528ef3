"""The study's GPU nodes while it runs: node events as the report lists them, and the searcher wrapper whose limit is
the slots there are now (nodes lost and joined)."""

from __future__ import annotations

import pickle

from ray.tune.search import Searcher

from autotune.study.nodes import NodeEvent, SlotLimiter


def test_node_event_text_names_the_retried_trials() -> None:
    lost = NodeEvent("2026-12-03T10:00:00+00:00", "lost", "abcdef0123456789", "10.0.0.2", (2, 3), (7,))
    assert lost.text() == (
        "2026-12-03T10:00:00+00:00: GPU node abcdef012345 (10.0.0.2) lost, its slot(s) [2, 3] "
        "removed; trial(s) 7 running there retried on another slot"
    )
    joined = NodeEvent("t", "joined", "ff", "", (4,))
    assert joined.text() == "t: GPU node ff joined, slot(s) [4] added" and joined.to_json()["trials"] == []
    assert NodeEvent.from_json(lost.to_json()) == lost


class _Counting(Searcher):
    def __init__(self) -> None:
        super().__init__(metric="objective0", mode="max")
        self.n = 0
        self.completed: list[str] = []

    def suggest(self, trial_id: str) -> dict:
        self.n += 1
        return {"number": self.n}

    def on_trial_complete(self, trial_id: str, result: dict | None = None, error: bool = False) -> None:
        self.completed.append(trial_id)


def test_the_limit_follows_the_slots_there_are_now() -> None:
    capacity = [2]
    limiter = SlotLimiter(_Counting(), lambda: capacity[0])
    assert limiter.suggest("a") == {"number": 1} and limiter.suggest("b") == {"number": 2}
    assert limiter.suggest("c") is None  # both slots busy
    capacity[0] = 1  # a node was lost: a and b still run (one of them is retried by Tune), nothing new starts
    limiter.on_trial_complete("a", {"objective0": 1.0})
    assert limiter.suggest("c") is None
    limiter.on_trial_complete("b", {"objective0": 1.0})
    assert limiter.suggest("c") == {"number": 3}
    capacity[0] = 3  # a node joined with two slots
    assert limiter.suggest("d") == {"number": 4} and limiter.suggest("e") == {"number": 5}
    assert limiter.suggest("f") is None


def test_a_cap_holds_and_no_slot_left_finishes_the_search() -> None:
    capacity = [4]
    limiter = SlotLimiter(_Counting(), lambda: capacity[0], cap=1)
    assert limiter.suggest("a") == {"number": 1} and limiter.suggest("b") is None
    limiter.on_trial_complete("a", {"objective0": 1.0})
    capacity[0] = 0  # every GPU node lost
    assert limiter.suggest("b") == Searcher.FINISHED
    assert "every GPU node of the Ray cluster was lost" in limiter.stop_reason
    state = limiter.get_state()  # Tune checkpoints the search state: the live callback is not part of it
    assert "_capacity" not in state and "searcher" not in state
    pickle.dumps(state)
    import threading

    lock = threading.Lock()  # a capacity read from a live object (the node watcher holds a thread)
    copy = pickle.loads(pickle.dumps(SlotLimiter(_Counting(), lambda: 1 if lock else 0)))
    assert copy.max_concurrent == 1  # a copy without its callback answers one slot
