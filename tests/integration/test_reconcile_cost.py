"""ReconcileEntities on the embedded stores: what it embeds does not grow with the store.

An abbreviation such as "J.S." is a candidate of every stored "J... S...", so the pairs a new
name forms grow with the store; an abbreviation that already fits two full names can never be
merged, and its candidates' names must not be embedded to find that out.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import numpy as np
import pytest

from core.entity_keys import EntityKeyIndex
from core.models.graph import Edge, Node, Support, entity_id, entity_type_id
from core.models.vocabulary import ENTITY, ENTITY_TYPE, IS_A
from core.ports import Embedder
from core.stores.qdrant.edge import QdrantEdgeVectorStore
from core.stores.sqlite.graph import SQLiteGraphStore
from core.stores.sqlite.state import SQLiteStateStore
from pipelines.models import WriteReport
from pipelines.reconcile_entities import ReconcileEntities

DATASET = "people"


class CountingEmbedder:
    """The real embedder, recording the texts it is asked to embed."""

    def __init__(self, embedder: Embedder) -> None:
        self.embedder, self.texts = embedder, list[str]()
        self.dim, self.model_name = embedder.dim, embedder.model_name

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        self.texts.extend(texts)
        return self.embedder.embed(texts)


def write_people(graph: SQLiteGraphStore, keys: EntityKeyIndex, names: list[str]) -> dict:
    """Person entities (with their IS_A edge), filed in the key index as a batch would."""
    support = [Support(document_id="d", chunk_id="c")]
    tid = entity_type_id(DATASET, "Person")
    person = Node(id=tid, type=ENTITY_TYPE, dataset=DATASET, name="Person")
    nodes = [
        Node(id=entity_id(DATASET, n), type=ENTITY, dataset=DATASET, name=n, support=support)
        for n in names
    ]
    graph.upsert_nodes([person, *nodes])
    graph.upsert_edges(
        [
            Edge(source=n.id, target=person.id, name=IS_A, dataset=DATASET, support=support)
            for n in nodes
        ]
    )
    written = {n.id: n.name for n in nodes}
    keys.file_and_find(DATASET, written)
    return written


@pytest.mark.parametrize("stored", [1, 2, 40])
def test_an_ambiguous_abbreviation_costs_no_embedding_however_many_names_it_fits(
    tmp_path: Path, models: dict[str, object], stored: int
) -> None:
    graph = SQLiteGraphStore(tmp_path / "graph.sqlite")
    vectors = QdrantEdgeVectorStore(tmp_path / "vectors", 384)
    state = SQLiteStateStore(tmp_path / "state.sqlite")
    keys = EntityKeyIndex(state)
    embedder = CountingEmbedder(models["embedder"])  # type: ignore[arg-type]
    try:
        # Stored: `stored` full names "J. Smith" fits ("Jaan Smith", "Jabn Smith", ...) and
        # "M. Lopez"; the batch writes "J. Smith" (its candidates: every "J... Smith") and
        # "Maria Lopez" (its candidate: "M. Lopez", which fits nothing else).
        full = [f"Ja{chr(97 + i // 26)}{chr(97 + i % 26)}n Smith" for i in range(stored)]
        write_people(graph, keys, [*full, "M. Lopez"])
        reconcile = ReconcileEntities(graph, vectors, embedder, keys)  # type: ignore[arg-type]
        batch = write_people(graph, keys, ["J. Smith", "Maria Lopez"])
        reconcile.run(WriteReport(dataset=DATASET, entity_names=batch))

        left = {n.name for n in graph.find_nodes(DATASET, ENTITY, limit=1000)}
        assert "M. Lopez" not in left and "Maria Lopez" in left
        if stored == 1:  # one name fits: both pairs embedded, both merged
            assert sorted(embedder.texts) == ["J. Smith", "Jaaan Smith", "M. Lopez", "Maria Lopez"]
            assert "J. Smith" not in left
        else:  # several fit: never merged, and none of its pairs embedded to find that out
            assert sorted(embedder.texts) == ["M. Lopez", "Maria Lopez"]
            assert {"J. Smith", *full} <= left
    finally:
        graph.close()
        vectors.close()
        state.close()
