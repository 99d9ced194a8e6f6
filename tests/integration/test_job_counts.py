"""A finished job's counts are the graph's: its entities and relationships are those its
documents support in the graph after it, and what its batches wrote onto ones written already
(by another batch, or merged by entity resolution) is counted apart as merged. Names shared
across batches (one document per batch) make batches write the same entities and
relationships, which the batches' own reports count twice."""

from __future__ import annotations

from pathlib import Path

import pytest

from core.models.vocabulary import ENTITY, STRUCTURAL_EDGES
from core.ports import GraphReader
from runtime import Runtime
from tests.backends import (
    Backend,
    ingest,
    succeeded,
    write_files,
)
from workers.jobs import JobTracker
from workers.orchestration import cognify

pytestmark = pytest.mark.integration

# Every document names Ada Lovelace and Charles Babbage: with a document per batch, several
# batches write the same two entities and the relationship between them.
FIRST = {
    f"note{i}.txt": f"Ada Lovelace worked with Charles Babbage in London. Ada Lovelace wrote "
    f"Note {i} about Engine {i}. Charles Babbage built Engine {i} in Workshop {i}."
    for i in range(4)
}
SECOND = {
    "later.txt": "Ada Lovelace worked with Charles Babbage in London. Mary Somerville met "
    "Ada Lovelace in London."
}


def graph_counts(graph: GraphReader, dataset: str) -> dict[str, int]:
    """Entities and relationships (non-structural edges) as the graph holds them."""
    counts = graph.count(dataset, edge_names=True)
    relationships = sum(
        n
        for key, n in counts.items()
        if key.startswith("edges:") and key.removeprefix("edges:") not in STRUCTURAL_EDGES
    )
    return {"entities": counts.get(ENTITY, 0), "relationships": relationships}


def reported(rt: Runtime, job_id: str) -> dict[str, int]:
    """What the job's batches reported writing, summed."""
    job = JobTracker(rt.state).get(job_id, live=False)
    return JobTracker(rt.state)._totals(job)[0]  # without a graph: the reports summed


@pytest.mark.slow
def test_job_counts_equal_the_graph_after_the_job(
    backend: Backend, embedder: object, tmp_path: Path
) -> None:
    dataset = backend.dataset("counted")
    with backend.runtime({"embedder": embedder}, batch_size=1) as rt:
        first = ingest(rt, dataset, write_files(tmp_path / "a", FIRST))
        after_first = graph_counts(rt.graph, dataset)
        written = reported(rt, first.id)
        assert first.counts["entities"] == after_first["entities"] > 0, (first.counts, after_first)
        assert first.counts["relationships"] == after_first["relationships"] > 0
        # The batches wrote the shared entities more than once: those writes are "merged".
        assert written["entities"] > after_first["entities"], (written, after_first)
        for name in ("entities", "relationships"):
            assert first.counts[name] + first.counts[f"{name}_merged"] == written[name]
        assert first.counts["entities_merged"] > 0

        # A job on more documents counts what its documents support, shared entities too.
        second = ingest(rt, dataset, write_files(tmp_path / "b", SECOND))
        after_second = graph_counts(rt.graph, dataset)
        gained = after_second["entities"] - after_first["entities"]
        assert gained < second.counts["entities"] <= after_second["entities"], second.counts

        # Everything again: the job's documents support the whole graph, which it reports.
        again = succeeded(rt, cognify(rt, dataset, mode="all"))
        after_again = graph_counts(rt.graph, dataset)
        assert after_again == after_second
        assert again.counts["entities"] == after_again["entities"], (again.counts, after_again)
        assert again.counts["relationships"] == after_again["relationships"]
