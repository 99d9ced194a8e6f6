"""Concurrent batches sharing entity names end exactly like a serial run (tests/merge_stress.py).

A short version of bench/merge_stress.py: a few shuffled concurrent runs per backend, each
compared with the serial run of the same corpus on the same backend.
"""

from __future__ import annotations

import uuid
from pathlib import Path

import pytest

from core.ports import Embedder
from core.settings import Settings
from tests.backends import EMBEDDED, NEO4J
from tests.merge_stress import (
    MemoEmbedder,
    differences,
    distributed_settings,
    forget,
    make_corpus,
    run_corpus,
    writers_on,
)
from tests.services import neo4j_uri, redis_url

RUNS, WRITERS = 3, 4


@pytest.fixture(scope="module")
def embedder(embedder: Embedder) -> MemoEmbedder:
    """The session's local embedder, remembering what it embedded."""
    return MemoEmbedder(embedder)


@pytest.fixture(params=[EMBEDDED, pytest.param(NEO4J, marks=pytest.mark.services)])
def settings(request: pytest.FixtureRequest, tmp_path: Path) -> Settings:
    if request.param == NEO4J:
        prefix = f"cogmill-test:{uuid.uuid4().hex[:8]}:"
        return distributed_settings(tmp_path / "home", neo4j_uri(), redis_url(), prefix)
    return Settings(home=tmp_path / "home")


@pytest.mark.slow
def test_concurrent_batches_sharing_names_end_like_a_serial_run(
    settings: Settings, embedder: MemoEmbedder
) -> None:
    corpus = make_corpus(f"merge-stress-{uuid.uuid4().hex[:8]}")
    with writers_on(settings, 1, embedder) as [serial]:
        try:
            expected = run_corpus(corpus, [serial])
        finally:
            forget(serial.runtime, corpus.dataset)
    assert expected.errors == []
    names = {name for _, name, _, _ in expected.snapshot["nodes"].values()}
    # The corpus merges what it should and keeps namesakes apart.
    assert {"New York City", "John Smith", "Mary Smith", "Maria Lopez", "Carlos Lopez"} <= names
    assert not {"NYC", "J. Smith", "M. Lopez", "U.S."} & {
        name for kind, name, _, _ in expected.snapshot["nodes"].values() if kind == "Entity"
    }
    for run in range(RUNS):
        with writers_on(settings, WRITERS, embedder) as writers:
            try:
                result = run_corpus(corpus, writers, order_seed=run)
            finally:
                forget(writers[0].runtime, corpus.dataset)
        assert result.errors == [], f"run {run}"
        assert differences(expected.snapshot, result.snapshot) == [], f"run {run}"
