"""The study's GPU slot pool (a named Ray actor): trials take distinct slots and give them back."""

from __future__ import annotations

import pytest
import ray

from autotune.core.errors import AutotuneError
from autotune.trial import slots

pytestmark = pytest.mark.slow  # starts Ray


@pytest.fixture(scope="module")
def local_ray():  # type: ignore[no-untyped-def]
    ray.init(address="local", num_cpus=1, include_dashboard=False, log_to_driver=False)  # never another local cluster
    yield
    ray.shutdown()


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
    assert slots.slot_app_name("study-x", a) == f"study-x-slot-{a}"
    del pool
