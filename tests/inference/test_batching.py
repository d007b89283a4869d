"""DynamicBatcher on its own, with a plain function as the model's run (so that a test holds a batch running, makes
one fail, and sees every batch it got): merging, splitting, max_batch_size, preferred sizes, the delay, the queue
bound, deadlines, clients going away, failures and close. tests/inference/test_batching_served.py drives a real
daemon with tritonclient."""
from __future__ import annotations

import threading
from concurrent import futures

import numpy as np
import pytest

from tests.model_repository import Context
from xlacs_server.batching.dynamic_batcher import DynamicBatcher
from xlacs_server.errors import Cancelled, DeadlineExceeded, InvalidRequest, LimitExceeded, Unavailable
from xlacs_server.execute.executable import RunTimes

WAIT_S = 30  # every wait in these tests is bounded by this


class Model:
    """A run that doubles "x" into "y" and records each batch's rows; while `hold` is clear a batch blocks in it
    (`running` is set), so that requests queue behind it."""
    made: list[Model] = []

    def __init__(self, fail: Exception | None = None):
        self.made.append(self)
        self.batches: list[int] = []
        self.times: list[RunTimes] = []
        self.hold, self.running = threading.Event(), threading.Event()
        self.hold.set()
        self.fail = fail

    def run(self, batch):
        self.batches.append(batch["x"].shape[0])
        self.running.set()
        assert self.hold.wait(WAIT_S)
        if self.fail is not None:
            raise self.fail
        self.times.append(RunTimes(infer_s=0.001 * len(self.batches)))  # what the run says of its time
        return {"y": batch["x"] * 2, "rows": np.arange(batch["x"].shape[0])}, self.times[-1]


class Gone(Context):
    """A client that goes away once `gone` is set."""

    def __init__(self):
        super().__init__()
        self.gone = threading.Event()

    def is_active(self) -> bool:
        return not self.gone.is_set()


def rows(n: int, start: float = 0) -> dict[str, np.ndarray]:
    return {"x": np.arange(start, start + n * 2, dtype=np.float32).reshape(n, 2)}


@pytest.fixture
def pool():
    """Threads for the requests; a failed test's held batches are released so that they end."""
    with futures.ThreadPoolExecutor(16) as executor:
        yield executor
        for model in Model.made:
            model.hold.set()


def batcher(model: Model, **kwargs) -> DynamicBatcher:
    kwargs = {"name": "m/1", "max_batch_size": 8, "max_queue_delay_s": WAIT_S * 10, **kwargs}
    return DynamicBatcher(model.run, **kwargs)


def queue_behind_a_running_batch(model: Model, batching: DynamicBatcher, pool, sizes, context=None):
    """Holds a first, full batch (8 rows) running, then queues requests of `sizes` rows behind it; their futures."""
    model.hold.clear()
    first = pool.submit(batching.infer, rows(8, 100), Context())
    assert model.running.wait(WAIT_S)
    submitted = []
    for i, size in enumerate(sizes):
        submitted.append(pool.submit(batching.infer, rows(size, 10 * i), context or Context()))
        wait_until(lambda: batching.queued == i + 1)
    return first, submitted


def wait_until(condition) -> None:
    event = threading.Event()
    for _ in range(WAIT_S * 100):
        if condition():
            return
        event.wait(0.01)
    raise AssertionError("the condition did not hold in time")


def test_requests_merge_along_the_batch_dim_and_each_gets_its_own_rows_back(pool):
    model = Model()
    batching = batcher(model)
    first, submitted = queue_behind_a_running_batch(model, batching, pool, [1, 3, 2, 2])
    model.hold.set()
    first.result(WAIT_S)
    for i, (future, size) in enumerate(zip(submitted, [1, 3, 2, 2])):
        outputs, queue_s, times = future.result(WAIT_S)
        np.testing.assert_array_equal(outputs["y"], rows(size, 10 * i)["x"] * 2)
        assert queue_s > 0 and times is model.times[1]  # the times of the run of its batch, the second
    assert model.batches == [8, 8]  # the four queued requests filled one batch of max_batch_size rows
    rows_of = [f.result()[0]["rows"].tolist() for f in submitted]
    assert rows_of == [[0], [1, 2, 3], [4, 5], [6, 7]]  # in the order they queued
    batching.close()


def test_a_batch_never_passes_max_batch_size_and_a_request_is_never_passed_over(pool):
    model = Model()
    batching = batcher(model, max_queue_delay_s=0)
    first, submitted = queue_behind_a_running_batch(model, batching, pool, [3, 4, 2, 1, 8])
    model.hold.set()
    for future in [first, *submitted]:
        future.result(WAIT_S)
    assert model.batches == [8, 7, 3, 8]  # 3+4 (2 more would pass 8), 2+1 (8 more would), 8
    batching.close()


def test_a_batch_waits_out_the_delay_unless_it_is_full(pool):
    model = Model()
    batching = batcher(model, max_queue_delay_s=0.2)
    outputs, queue_s, _ = batching.infer(rows(2), Context())
    assert queue_s >= 0.2  # alone, it waited for others that never came
    np.testing.assert_array_equal(outputs["y"], rows(2)["x"] * 2)
    long = batcher(Model(), max_queue_delay_s=WAIT_S * 10)  # a full batch leaves at once, long before the delay
    _, queue_s, _ = long.infer(rows(8), Context(deadline_s=WAIT_S))
    assert queue_s < WAIT_S
    batching.close()
    long.close()


def test_the_largest_preferred_batch_size_leaves_at_once(pool):
    model = Model()
    batching = batcher(model, preferred_batch_sizes=(2, 4, 16))  # 16 > max_batch_size: 4 is the largest
    first, submitted = queue_behind_a_running_batch(model, batching, pool, [3])
    submitted.append(pool.submit(batching.infer, rows(1), Context(deadline_s=WAIT_S)))
    model.hold.set()
    for future in [first, *submitted]:
        future.result(WAIT_S)
    assert model.batches == [8, 4]
    batching.close()


def test_past_max_queue_size_a_request_is_refused_naming_the_setting(pool):
    model = Model()
    batching = batcher(model, max_queue_delay_s=0, max_queue_size=2)
    first, submitted = queue_behind_a_running_batch(model, batching, pool, [1, 1])
    with pytest.raises(LimitExceeded, match="max_queue_size=2") as refused:
        batching.infer(rows(1), Context())
    assert refused.value.setting == "dynamic_batching.default_queue_policy.max_queue_size"
    assert "raise it with the model's config.pbtxt" in str(refused.value)
    model.hold.set()
    for future in [first, *submitted]:
        future.result(WAIT_S)
    assert model.batches == [8, 2]
    batching.close()


def test_a_request_leaves_the_queue_at_its_deadline(pool):
    model = Model()
    batching = batcher(model, max_queue_delay_s=0)
    first, (kept,) = queue_behind_a_running_batch(model, batching, pool, [2])
    with pytest.raises(DeadlineExceeded, match="deadline"):
        batching.infer(rows(3), Context(deadline_s=0.1))
    assert batching.queued == 1
    model.hold.set()
    first.result(WAIT_S)
    kept.result(WAIT_S)
    assert model.batches == [8, 2]  # the 3 rows of the one that left never ran
    batching.close()


def test_a_request_whose_client_goes_away_leaves_the_queue(pool):
    model = Model()
    batching = batcher(model, max_queue_delay_s=0)
    client = Gone()
    first, (leaving,) = queue_behind_a_running_batch(model, batching, pool, [3], context=client)
    client.gone.set()
    with pytest.raises(Cancelled, match="went away"):
        leaving.result(WAIT_S)
    assert batching.queued == 0
    model.hold.set()
    first.result(WAIT_S)
    assert batching.infer(rows(1), Context())[0]["y"].shape == (1, 2)
    assert model.batches == [8, 1]
    batching.close()


def test_a_failing_batch_fails_each_of_its_requests_with_its_error(pool):
    model = Model(fail=InvalidRequest("the batch is wrong"))
    batching = batcher(model, max_queue_delay_s=0)
    first, submitted = queue_behind_a_running_batch(model, batching, pool, [2, 2])
    model.hold.set()
    for future in [first, *submitted]:
        with pytest.raises(InvalidRequest, match="the batch is wrong"):
            future.result(WAIT_S)
    model.fail = None
    assert batching.infer(rows(1), Context())[0]["y"].shape == (1, 2)  # the batcher goes on
    batching.close()


def test_close_fails_the_queued_requests_with_unavailable_and_lets_the_running_batch_finish(pool):
    model = Model()
    batching = batcher(model)
    first, submitted = queue_behind_a_running_batch(model, batching, pool, [2, 2])
    closing = pool.submit(batching.close)
    for future in submitted:
        with pytest.raises(Unavailable, match="unloaded"):
            future.result(WAIT_S)
    model.hold.set()
    closing.result(WAIT_S)
    np.testing.assert_array_equal(first.result(WAIT_S)[0]["y"], rows(8, 100)["x"] * 2)
    with pytest.raises(Unavailable, match="unloading"):
        batching.infer(rows(1), Context())
    assert model.batches == [8]


def test_with_a_concurrency_of_two_two_batches_run_side_by_side(pool):
    model = Model()
    model.hold.clear()
    batching = batcher(model, max_queue_delay_s=0, concurrency=2)
    submitted = [pool.submit(batching.infer, rows(8, 10 * i), Context()) for i in range(2)]
    wait_until(lambda: len(model.batches) == 2)  # both in the run at once, neither released yet
    model.hold.set()
    for i, future in enumerate(submitted):
        np.testing.assert_array_equal(future.result(WAIT_S)[0]["y"], rows(8, 10 * i)["x"] * 2)
    batching.close()
