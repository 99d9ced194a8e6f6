"""The narrow interfaces every adapter (`core/stores/`, chosen in `core/stores/factory.py`)
implements and every other package talks through. Adapters raise `StoreError` (or a subclass)
when the backing store fails and `ValueError` for bad arguments, never a driver's exception.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any, BinaryIO, Protocol, runtime_checkable

import numpy as np

from core.errors import InvalidInput, Unavailable
from core.models.extraction import KnowledgeGraph
from core.models.lexical import CorpusStats, LexicalDoc, Posting
from core.models.vectors import VectorHit, VectorPoint
from core.ports.graph import GraphReader as GraphReader
from core.ports.graph import GraphStore as GraphStore
from core.ports.graph import GraphWriter as GraphWriter

# One search of a batch (VectorStore.search_batch): collection, query vector, limit.
VectorQuery = tuple[str, Sequence[float], int]


class StoreError(Unavailable):
    """A backing store failed or is unreachable."""

    code = "store_unavailable"
    public_message = "a store did not answer; retry later"


@runtime_checkable
class VectorStore(Protocol):
    def upsert(self, collection: str, points: Sequence[VectorPoint]) -> None:
        """Insert or replace points by id, creating the collection. ValueError: bad dim or id."""
        ...

    def search(
        self, collection: str, vector: Sequence[float], *, datasets: Sequence[str], limit: int = 10
    ) -> list[VectorHit]:
        """Nearest points (cosine, best first) within the datasets; [] for an unknown collection."""
        ...

    def search_batch(
        self, queries: Sequence[VectorQuery], *, datasets: Sequence[str]
    ) -> list[list[VectorHit]]:
        """`search` of each (collection, vector, limit), in order, as one round trip where the
        store can (one query's searches). ValueError as `search`."""
        ...

    def delete(self, ids: Sequence[str]) -> None:
        """Remove points with these ids from every collection. Raises StoreError."""
        ...

    def delete_dataset(self, dataset: str) -> None:
        """Remove every point of a dataset from every collection. Raises StoreError."""
        ...

    def count(self, collection: str, *, dataset: str | None = None) -> int:
        """Number of points in a collection (0 when it does not exist)."""
        ...

    def close(self) -> None:
        """Flush and release the store."""
        ...


@runtime_checkable
class StateStore(Protocol):
    def put(self, key: str, value: str, *, ttl: float | None = None) -> None:
        """Set a string value, expiring after `ttl` seconds when given. Raises StoreError."""
        ...

    def get(self, key: str) -> str | None:
        """The value, or None when missing or expired."""
        ...

    def get_many(self, keys: Sequence[str]) -> list[str | None]:
        """Each key's value in order (None where missing or expired), in one round trip."""
        ...

    def delete(self, *keys: str) -> None:
        """Remove keys of any kind (no error when missing), many in one round trip."""
        ...

    def keys(self, prefix: str) -> list[str]:
        """Live keys starting with `prefix`, sorted."""
        ...

    def incr(self, key: str, amount: int = 1) -> int:
        """Atomically add to an integer counter and return the new value."""
        ...

    def incr_many(self, amounts: Mapping[str, int]) -> None:
        """Add to several counters in one round trip, each atomically; none is read back.
        ValueError when a key does not hold an integer (the others are still added)."""
        ...

    def reserve(self, key: str, amount: int, limit: int, *, ttl: float) -> int | None:
        """Atomically add `amount` to counter `key` if the sum stays within `limit`: the new sum,
        else None. Expires `ttl` s after the last add. ValueError: no integer, or `ttl` <= 0."""
        ...

    def release(self, key: str, amount: int) -> None:
        """Take back a reserved `amount`; the counter is removed at zero or below."""
        ...

    def add_member(self, key: str, member: str, *, ttl: float | None = None) -> bool:
        """Add to a set; True when the member was new (idempotent completion counting). With
        `ttl`, the whole set expires `ttl` seconds from now (each such add pushes it out)."""
        ...

    def remove_member(self, key: str, member: str) -> bool:
        """Remove from a set; True when the member was there."""
        ...

    def count_members(self, key: str) -> int:
        """Size of a set (0 when missing)."""
        ...

    def add_members(self, members: Mapping[str, Sequence[str]]) -> dict[str, set[str]]:
        """Add members to several sets at once, then return each of those sets whole (a set
        given no members is only read).

        Atomic: of two callers adding to one set at the same time, the later sees both members.
        """
        ...

    def append_event(self, stream: str, event: str) -> int:
        """Append to an ordered stream and return the event's sequence number (from 1)."""
        ...

    def read_events(
        self, stream: str, *, after: int = 0, limit: int = 1000
    ) -> list[tuple[int, str]]:
        """Events with sequence numbers above `after`, oldest first."""
        ...

    def close(self) -> None:
        """Release connections."""
        ...


@runtime_checkable
class LexicalIndex(Protocol):
    """Persistent term postings of chunks, per dataset."""

    def add(self, dataset: str, docs: Sequence[LexicalDoc]) -> None:
        """Index chunks; a chunk id already indexed is left as it is. Raises StoreError."""
        ...

    def remove(self, dataset: str, ids: Sequence[str]) -> None:
        """Drop the postings of these ids (ids that are not indexed chunks are ignored)."""
        ...

    def remove_dataset(self, dataset: str) -> None:
        """Drop every posting of a dataset. Raises StoreError."""
        ...

    def count(self, dataset: str) -> int:
        """Number of chunks indexed for a dataset."""
        ...

    def corpus_stats(self, datasets: Sequence[str], terms: Sequence[str]) -> CorpusStats:
        """Chunk count, total length and document frequency of `terms` over the datasets."""
        ...

    def postings(self, datasets: Sequence[str], terms: Sequence[str]) -> Iterable[Posting]:
        """Every posting of `terms` in the datasets."""
        ...

    def close(self) -> None:
        """Release connections."""
        ...


@runtime_checkable
class RateLimiter(Protocol):
    """A request and token budget for LLM calls, shared by whoever holds the limiter."""

    async def acquire(self, tokens: int = 0) -> None:
        """Wait until one request using about `tokens` tokens may be sent. Raises StoreError
        when a shared budget's store fails."""
        ...


class CypherError(InvalidInput):
    """The database refused a query (syntax, unknown procedure, a write in read mode...);
    the message says why in cogmill's words, `detail` holds the database's own text."""

    code = "cypher_refused"


@runtime_checkable
class CypherRunner(Protocol):
    """Caller-supplied Cypher run read-only (CYPHER, NATURAL_LANGUAGE), rows as plain values."""

    def run_read(self, query: str, params: dict[str, Any], limit: int) -> list[dict[str, Any]]:
        """At most `limit` rows of `query`, each a dict of JSON-ready values (a node becomes
        its properties plus `labels`). Raises CypherError when the database refuses the query
        (a write included), StoreError when it fails."""
        ...

    def close(self) -> None:
        """Release connections."""
        ...


@runtime_checkable
class BlobStore(Protocol):
    def put(self, key: str, stream: BinaryIO) -> int:
        """Store bytes read from `stream` under `key` atomically; returns the size."""
        ...

    def open(self, key: str) -> BinaryIO:
        """Open a stored blob for reading. Raises FileNotFoundError."""
        ...

    def delete(self, key: str) -> None:
        """Remove a blob (no error when missing)."""
        ...


@runtime_checkable
class Embedder(Protocol):
    dim: int
    model_name: str

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        """L2-normalised float32 vectors, shape (len(texts), dim). Raises ValueError on []."""
        ...


@runtime_checkable
class Extractor(Protocol):
    name: str

    def extract(self, texts: Sequence[str]) -> list[KnowledgeGraph]:
        """One knowledge graph (entities, relationships, summary) per text, in order."""
        ...
