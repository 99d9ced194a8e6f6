"""The graph store's port: what the Neo4j and SQLite adapters (core/stores/) implement.

Re-exported by core.ports, where the other ports are.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol, runtime_checkable

from core.models.graph import (
    Edge,
    Frontier,
    Merged,
    Node,
    NodeChunks,
    RelationRead,
    Removed,
    Subgraph,
)


@runtime_checkable
class GraphReader(Protocol):
    def get_nodes(self, ids: Sequence[str]) -> list[Node]:
        """Nodes with these ids (missing ids are skipped). Raises StoreError."""
        ...

    def existing(self, ids: Sequence[str]) -> set[str]:
        """Which of these node ids are stored (without loading the nodes). Raises StoreError."""
        ...

    def find_nodes(
        self,
        dataset: str,
        type: str,
        *,
        name: str | None = None,
        names: Sequence[str] | None = None,
        limit: int = 1000,
        offset: int = 0,
    ) -> list[Node]:
        """Nodes of one type in a dataset by id, optionally by exact name or any of `names`
        (one round trip for a batch of names). Raises StoreError."""
        ...

    def find_in_time(
        self,
        datasets: Sequence[str],
        types: Sequence[str],
        *,
        start: int | None = None,
        end: int | None = None,
        limit: int = 1000,
    ) -> list[Node]:
        """Nodes whose [start_epoch, end_epoch) overlaps [start, end) (seconds, None open),
        earliest first (core/stores/timeline.py), at most `limit`. ValueError: empty range."""
        ...

    def edges_of(
        self,
        node_ids: Sequence[str],
        *,
        names: Sequence[str] | None = None,
        exclude: Sequence[str] = (),
        limit: int = 1000,
        claims: bool = False,
    ) -> list[Edge]:
        """Edges touching `node_ids` (only `names` if given, never `exclude`), at most `limit`;
        their `claims` are read only when asked. Raises StoreError."""
        ...

    def relation_ends(
        self,
        node_ids: Sequence[str],
        *,
        exclude: Sequence[str],
        containing: Sequence[str] | None = None,
        limit: int = 1000,
    ) -> list[tuple[str, str, str]]:
        """(source, name, target) of the edges `edges_of(node_ids, exclude=exclude)` finds
        (only names holding one of `containing`, lower-cased, if given), without properties or
        support (one read); a hit `limit` may keep others than edges_of would. Raises
        StoreError."""
        ...

    def edge_ends(
        self, node_ids: Sequence[str], *, names: Sequence[str], limit: int = 1000
    ) -> list[tuple[str, str]]:
        """(source, target) of the edges `edges_of` finds for `node_ids` and `names`, in its
        order, without properties or support (one read). Raises StoreError."""
        ...

    def node_chunks(
        self, ids: Sequence[str], *, type: str, most: int | None = None
    ) -> dict[str, NodeChunks]:
        """Name and supporting chunk ids (distinct, non-empty) of each stored node of `type`
        among `ids`, in the order asked; one read, no properties. A node with more than
        `most` support records comes with their count and no ids (a hub's thousands are
        most of a GRAPH_PPR read otherwise). Raises StoreError."""
        ...

    def frontier(
        self,
        chunks: Sequence[str],
        entities: Sequence[str],
        *,
        names: Sequence[str],
        type: str,
        limit: int = 1000,
        skip: Sequence[str] = (),
        relations: RelationRead | None = None,
        most: int | None = None,
    ) -> Frontier:
        """`edge_ends(chunks, names=names, limit=limit)`, the `relations` asked, and
        `node_chunks(..., type=type, most=most)` of `frontier_ids` (`skip` left out), as one
        read where the store can (GRAPH_PPR's hop). Raises StoreError."""
        ...

    def neighbourhood(
        self, node_ids: Sequence[str], *, hops: int = 1, limit: int = 500
    ) -> Subgraph:
        """The nodes within `hops` of the seeds and the edges among them, bounded by `limit`."""
        ...

    def count(
        self, dataset: str, *, edge_names: bool = False, documents: Sequence[str] | None = None
    ) -> dict[str, int]:
        """Node counts per type and the edge count (key "edges") of a dataset; with
        `edge_names`, also the edges per name (key "edges:NAME"); with `documents`, only of
        the nodes and edges those documents support."""
        ...

    def total(self, datasets: Sequence[str], node_type: str, key: str) -> int:
        """The sum of the integer property `key` over the datasets' nodes of a type (in the
        store, without loading them; 0 when none has it)."""
        ...


@runtime_checkable
class GraphWriter(Protocol):
    def upsert_nodes(self, nodes: Sequence[Node]) -> None:
        """Insert or merge nodes by id (properties merged, support unioned). Raises StoreError."""
        ...

    def upsert_edges(self, edges: Sequence[Edge]) -> None:
        """Insert or merge edges by (source, name, target); an end merged away by `merge_nodes`
        stands for the node it went into. Claims are kept per (edge, document, chunk), the
        first kept staying; in the same transaction the validity of every fact whose subject
        the write touched is derived again (core/stores/fact_intervals.py), as it is by the
        deletes and merges. Raises ValueError on an end that is not stored."""
        ...

    def delete_document(self, dataset: str, document_id: str) -> Removed:
        """Drop one document's support; remove what has no support left. Raises StoreError."""
        ...

    def delete_dataset(self, dataset: str) -> Removed:
        """Remove every node and edge of a dataset. Raises StoreError."""
        ...

    def delete_nodes(self, ids: Sequence[str]) -> Removed:
        """Remove nodes by id, whatever their support, with their edges. Raises StoreError."""
        ...

    def merge_nodes(self, ids: Sequence[str], into: str) -> Merged:
        """Atomically move the nodes' support and edges onto `into`, remove them and redirect
        their ids to it (until the dataset is deleted). ValueError when `into` is not stored."""
        ...


@runtime_checkable
class GraphStore(GraphReader, GraphWriter, Protocol):
    def close(self) -> None:
        """Release connections."""
        ...
