"""Searches' embeddings computed together (core/embeddings/together.py), on the real model."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable

import numpy as np
import pytest
from threadpoolctl import threadpool_limits

from core.embeddings.bert import Padded
from core.embeddings.local import LocalEmbedder
from core.embeddings.together import QueryEmbedder

QUESTIONS = [
    "Who founded the company that makes the Model S?",
    "When did the Berlin Wall fall?",
    "What river flows through the capital of Hungary?",
    "Which author wrote the novel that inspired Blade Runner?",
    "Where was Marie Curie born?",
    "How tall is the Eiffel Tower?",
]
CALLERS = 12


@pytest.fixture(scope="module")
def local() -> LocalEmbedder:
    return LocalEmbedder()


def calls(i: int) -> list[str]:
    """A question alone, or with names from it."""
    question = QUESTIONS[i % len(QUESTIONS)]
    return [question] if i % 2 else [question, question.split()[-1].strip("?"), "Berlin"]


def counting(local: LocalEmbedder, first: Callable[[], None]) -> list[int]:
    """Replace the embedder's `encode` by one recording each round's batch count; `first`
    runs before the first round."""
    rounds: list[int] = []
    encode = LocalEmbedder.encode

    def counted(batches: list[Padded]) -> list[np.ndarray]:
        if not rounds:
            first()
        rounds.append(len(batches))
        return encode(local, batches)

    local.encode = counted  # type: ignore[method-assign]
    return rounds


def test_a_call_alone_is_embedded_exactly_as_by_the_local_embedder(local: LocalEmbedder) -> None:
    together = QueryEmbedder(local)
    with threadpool_limits(1):
        for i in range(4):
            assert np.array_equal(together.embed(calls(i)), local.embed(calls(i)))


def test_calls_waiting_together_run_as_one_round(local: LocalEmbedder) -> None:
    together = QueryEmbedder(LocalEmbedder())
    with threadpool_limits(1):
        alone = [local.embed(calls(i)) for i in range(CALLERS)]

        def all_queued() -> None:  # the first round holds until every other caller waits
            deadline = time.monotonic() + 30
            while len(together._queue) < CALLERS - 1:
                assert time.monotonic() < deadline, len(together._queue)
                time.sleep(0.005)

        rounds = counting(together.local, all_queued)
        found: dict[int, np.ndarray] = {}

        def caller(i: int) -> None:
            found[i] = together.embed(calls(i))

        threads = [threading.Thread(target=caller, args=(i,)) for i in range(CALLERS)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(60)
    # The first caller's round, then one round for the batches of the other eleven.
    assert len(rounds) == 2 and rounds[1] >= CALLERS - 1, rounds
    assert sorted(found) == list(range(CALLERS))
    for i in range(CALLERS):
        assert found[i].shape == alone[i].shape
        assert np.abs(found[i] - alone[i]).max() < 1e-6, i  # float rounding at most


def test_a_failed_round_fails_each_of_its_callers_and_the_next_call_works() -> None:
    together = QueryEmbedder(LocalEmbedder())
    encode = LocalEmbedder.encode
    broken = threading.Event()

    def failing(batches: list[Padded]) -> list[np.ndarray]:
        if not broken.is_set():
            broken.set()
            raise MemoryError("no room for the activations")
        return encode(together.local, batches)

    together.local.encode = failing  # type: ignore[method-assign]
    with pytest.raises(MemoryError, match="no room"):
        together.embed(calls(0))
    assert together.embed(calls(1)).shape == (1, together.dim)
    assert not together._running and not together._queue
