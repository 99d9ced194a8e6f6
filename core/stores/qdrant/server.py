"""Vectors in a Qdrant server through `qdrant-client` (distributed mode), or its local mode.

A collection `<Type>_<field>` is the Qdrant collection `<namespace>_<Type>_<field>` (cosine,
`dim`), so deletes across collections never touch other applications' collections on a shared
server. Points carry their dataset in the payload, indexed as the tenant key.

Facts this adapter leans on (qdrant-client 1.20, checked by experiment):
- Local mode (`path=`) speaks the same client API but is not thread-safe and ignores payload
  indexes (with a warning), so we serialise its calls and skip the index there.
- Creating an existing collection fails (409 on a server, ValueError locally): a lost race
  between processes shows up that way, so we look again before reporting it.
- Local mode reports its own failures as ValueError/RuntimeError; a server's as ApiException.
"""

from __future__ import annotations

import contextlib
import re
import threading
from collections.abc import Iterator, Sequence
from contextlib import AbstractContextManager, contextmanager
from pathlib import Path
from urllib.parse import urlsplit

import httpx
from qdrant_client import QdrantClient, models
from qdrant_client.http.exceptions import ApiException

from core.models.vectors import VectorHit, VectorPoint, check_collection, check_dim, point_id
from core.ports import StoreError, VectorQuery
from core.sequences import batched

_NAMESPACE = re.compile(r"[A-Za-z][A-Za-z0-9]{0,31}")  # no "_": prefixes stay unambiguous
_DATASET = "dataset"  # payload key of the dataset a point belongs to
_UPSERT_BATCH = 512  # points per request: ~1.6 MB of JSON at 384 dims
_DELETE_BATCH = 1024
# Failures of the store, as opposed to our own ValueErrors, which are raised before any call.
_CLIENT_ERRORS = (ApiException, httpx.HTTPError, ValueError, RuntimeError, OSError)


def _dataset_filter(datasets: Sequence[str]) -> models.Filter:
    """A filter matching points of any of the datasets."""
    match = models.MatchAny(any=list(datasets))
    return models.Filter(must=[models.FieldCondition(key=_DATASET, match=match)])


def _where(url: str | None, path: Path | None) -> str:
    """The server (scheme://host:port, never credentials) or the local folder, for messages."""
    if url is None:
        return f"local Qdrant at {path}"
    parts = urlsplit(url)
    return f"Qdrant at {parts.scheme}://{parts.hostname}:{parts.port or 6333}"


class QdrantVectorStore:
    """VectorStore on Qdrant collections named `<namespace>_<collection>`, cosine distance."""

    def __init__(
        self,
        dim: int,
        *,
        url: str | None = None,
        api_key: str | None = None,
        path: Path | None = None,
        namespace: str = "cogmill",
        timeout: int = 30,
    ) -> None:
        if dim < 1:
            raise ValueError(f"vector dimension must be positive, got {dim}")
        if (url is None) == (path is None):
            raise ValueError("give exactly one of url (a Qdrant server) or path (local mode)")
        if not _NAMESPACE.fullmatch(namespace):
            raise ValueError(f"bad namespace {namespace!r}: a letter, then letters or digits")
        self.dim, self.url, self.path, self.namespace = dim, url, path, namespace
        self.where = _where(url, path)
        self._local = path is not None
        self._lock = threading.Lock()  # guards collection creation and `_known`
        self._serial: AbstractContextManager[object] = (
            threading.Lock() if self._local else contextlib.nullcontext()
        )
        self._known: set[str] = set()  # collections known to exist with our config
        self._closed = False
        with self._errors("open", None):
            if self._local:
                self._client = QdrantClient(path=str(path))
            else:
                # No compatibility probe: opening a store must not need the server to be up.
                self._client = QdrantClient(
                    url=url, api_key=api_key, timeout=timeout, check_compatibility=False
                )

    @contextmanager
    def _errors(self, action: str, collection: str | None) -> Iterator[None]:
        """Serialise local-mode calls; turn client failures into StoreError naming the server."""
        if self._closed:
            raise StoreError(f"vector store on {self.where} is closed")
        on = f" on collection {collection!r}" if collection else ""
        with self._serial:
            try:
                yield
            except StoreError:
                raise  # ours, already worded (StoreError is a RuntimeError too)
            except _CLIENT_ERRORS as err:
                raise StoreError(f"{self.where}: {action}{on} failed: {err}") from err

    def _name(self, collection: str) -> str:
        return f"{self.namespace}_{collection}"

    def _verify(self, collection: str) -> None:
        """Refuse a collection of another dim or distance; add the dataset index if missing."""
        info = self._client.get_collection(self._name(collection))
        params = info.config.params.vectors
        if not isinstance(params, models.VectorParams) or (params.size, params.distance) != (
            self.dim,
            models.Distance.COSINE,
        ):
            raise StoreError(
                f"{self.where}: collection {self._name(collection)!r} has vectors {params}; "
                f"this store needs {self.dim}-d Cosine"
            )
        # Also repairs a crash between creating the collection and indexing it.
        if not self._local and _DATASET not in info.payload_schema:
            self._client.create_payload_index(
                self._name(collection),
                _DATASET,
                models.KeywordIndexParams(type=models.KeywordIndexType.KEYWORD, is_tenant=True),
                wait=True,
            )

    def _exists(self, collection: str) -> bool:
        """Whether a collection exists; another process may have created it since we looked."""
        check_collection(collection)
        if collection in self._known:
            return True
        with self._lock, self._errors("lookup", collection):
            if not self._client.collection_exists(self._name(collection)):
                return False
            self._verify(collection)
            self._known.add(collection)
        return True

    def _ensure(self, collection: str) -> None:
        """Create the collection when missing (once per process, race-safe across processes)."""
        if self._exists(collection):
            return
        with self._lock, self._errors("create", collection):
            if collection in self._known:
                return
            try:
                self._client.create_collection(
                    self._name(collection),
                    vectors_config=models.VectorParams(
                        size=self.dim, distance=models.Distance.COSINE
                    ),
                )
            except _CLIENT_ERRORS:
                if not self._client.collection_exists(self._name(collection)):
                    raise  # not a lost race with another process
            self._verify(collection)
            self._known.add(collection)

    def _our_collections(self) -> list[str]:
        """Qdrant names of every collection of this namespace, including other processes'."""
        with self._errors("list collections", None):
            found = self._client.get_collections().collections
        prefix = f"{self.namespace}_"
        return [c.name for c in found if c.name.startswith(prefix)]

    def upsert(self, collection: str, points: Sequence[VectorPoint]) -> None:
        """Insert or replace points by id, creating the collection; ValueError on a bad dim/id."""
        check_collection(collection)
        # Validate the whole call before writing, so a bad point writes nothing.
        for p in points:
            check_dim(p.vector, self.dim, f"vector of point {p.id!r}")
        structs = [
            models.PointStruct(
                id=point_id(p.id),
                vector=[float(x) for x in p.vector],
                payload={**p.payload, _DATASET: p.dataset},
            )
            for p in points
        ]
        if not structs:
            return
        self._ensure(collection)
        with self._errors("upsert", collection):
            for chunk in batched(structs, _UPSERT_BATCH):
                self._client.upsert(self._name(collection), points=list(chunk), wait=True)

    def search(
        self, collection: str, vector: Sequence[float], *, datasets: Sequence[str], limit: int = 10
    ) -> list[VectorHit]:
        """Nearest points (cosine, best first) within the datasets; [] for an unknown collection."""
        check_dim(vector, self.dim, "query vector")
        if limit < 1:
            raise ValueError(f"search limit must be positive, got {limit}")
        if not self._exists(collection) or not datasets:
            return []
        with self._errors("search", collection):
            found = self._client.query_points(
                self._name(collection),
                query=[float(x) for x in vector],
                query_filter=_dataset_filter(datasets),
                limit=limit,
                with_payload=True,
            ).points
        return [VectorHit(id=str(p.id), score=p.score, payload=p.payload or {}) for p in found]

    def search_batch(
        self, queries: Sequence[VectorQuery], *, datasets: Sequence[str]
    ) -> list[list[VectorHit]]:
        """`search` of each (collection, vector, limit), in order."""
        return [self.search(c, v, datasets=datasets, limit=n) for c, v, n in queries]

    def delete(self, ids: Sequence[str]) -> None:
        """Remove points with these ids from every collection. Raises StoreError."""
        point_ids: list[models.ExtendedPointId] = [point_id(i) for i in ids]
        if not point_ids:
            return
        for name in self._our_collections():
            with self._errors("delete", name):
                for chunk in batched(point_ids, _DELETE_BATCH):
                    selector = models.PointIdsList(points=list(chunk))
                    self._client.delete(name, points_selector=selector, wait=True)

    def delete_dataset(self, dataset: str) -> None:
        """Remove every point of a dataset from every collection. Raises StoreError."""
        selector = models.FilterSelector(filter=_dataset_filter([dataset]))
        for name in self._our_collections():
            with self._errors("delete_dataset", name):
                self._client.delete(name, points_selector=selector, wait=True)

    def count(self, collection: str, *, dataset: str | None = None) -> int:
        """Number of points in a collection (0 when it does not exist)."""
        if not self._exists(collection):
            return 0
        where = _dataset_filter([dataset]) if dataset is not None else None
        with self._errors("count", collection):
            result = self._client.count(self._name(collection), count_filter=where, exact=True)
        return result.count

    def close(self) -> None:
        """Release the client (and a local folder's lock); later calls raise StoreError."""
        with self._lock:
            if self._closed:
                return  # closing twice is harmless
            self._closed = True
        # Nothing to flush first: every write was acknowledged (wait=True).
        with self._serial:
            try:
                self._client.close()
            except _CLIENT_ERRORS as err:
                raise StoreError(f"{self.where}: close failed: {err}") from err
