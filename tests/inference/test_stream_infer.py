"""inference/stream_infer.py on its own: a stream's requests run concurrently, its answers keep the order of the
requests, it reads ahead only what fits in its window, and it stops reading once nobody takes its answers.
(tests/inference/test_grpc_batching.py drives it through a real daemon and tritonclient.)"""
from __future__ import annotations

import threading
import time

import pytest

from xlacs_server.inference.stream_infer import StreamRuns


def counted(n: int, pulled: list) -> iter:
    for i in range(n):
        pulled.append(i)
        yield i


def test_answers_keep_the_order_of_the_requests_while_they_run_at_once():
    started, release = [], threading.Event()

    def answer(i):  # the first request finishes last: it waits until all have started
        started.append(i)
        if i == 0:
            assert release.wait(30)
        elif len(started) == 4:
            release.set()
        return i * 10
    assert list(StreamRuns(4, 1 << 20).answers(iter(range(4)), answer, lambda _: 1)) == [0, 10, 20, 30]
    assert sorted(started) == [0, 1, 2, 3]


def test_a_stream_reads_ahead_only_what_fits_in_its_window():
    pulled = []
    answers = StreamRuns(4, 25).answers(counted(10, pulled), lambda i: i, lambda _: 10)
    assert next(answers) == 0
    deadline = time.monotonic() + 10  # the reader takes 1 and 2 (20 bytes of 25), and waits holding 3
    while len(pulled) < 4 and time.monotonic() < deadline:
        time.sleep(0.01)
    time.sleep(0.3)  # and reads no further
    assert pulled == [0, 1, 2, 3]
    assert list(answers) == list(range(1, 10))


def test_it_stops_reading_when_its_answers_are_no_longer_taken():
    pulled = []
    answers = StreamRuns(2, 10).answers(counted(100, pulled), lambda i: i, lambda _: 10)
    assert next(answers) == 0
    answers.close()  # the client went away
    deadline = time.monotonic() + 10
    while any(t.name == "stream-requests" for t in threading.enumerate()) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not any(t.name == "stream-requests" for t in threading.enumerate())
    assert len(pulled) < 5


def test_an_answer_that_raises_ends_the_answers_with_its_error():
    with pytest.raises(ZeroDivisionError):
        list(StreamRuns(2, 100).answers(iter([1, 0]), lambda i: 1 // i, lambda _: 1))
