"""Where a finished trial's record waits for the searcher: held by trial id, taken once; the Ray actor is reached by the
study's owner tag from a task, as a trainable on another node reaches it."""

from __future__ import annotations

import pytest
import ray

from autotune.core.errors import AutotuneError
from autotune.trial import inbox


def test_a_record_is_taken_once_and_the_report_names_it() -> None:
    box = inbox.LocalInbox()
    assert box.take("t1") is None
    assert box.report("t1", {"number": 1}, "log") == {inbox.RECORD_REF: "t1"}
    assert box.take("t1") == inbox.Delivery({"number": 1}, "log")
    assert box.take("t1") is None  # taken: a second completion of the same trial finds nothing


@pytest.fixture(scope="module")
def local_ray():  # type: ignore[no-untyped-def]
    ray.init(address="local", num_cpus=1, include_dashboard=False, log_to_driver=False)  # never another local cluster
    yield
    ray.shutdown()


@pytest.mark.slow  # starts Ray
def test_a_trainable_delivers_to_the_drivers_inbox(local_ray: None) -> None:
    with pytest.raises(AutotuneError, match="inbox .* is not running"):
        inbox.deliver("no-such-study", "t0", {}, "")
    box = inbox.create("study-y")

    @ray.remote(num_cpus=0)
    def trainable() -> None:
        inbox.deliver("study-y", "t1", {"number": 1, "outcome": "complete"}, "server log")

    ray.get(trainable.remote())
    assert box.take("t1") == inbox.Delivery({"number": 1, "outcome": "complete"}, "server log")
    assert box.take("t1") is None
