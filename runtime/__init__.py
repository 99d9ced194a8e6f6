"""The stores and models one process works with, built lazily from settings.

A Runtime is what steps are built from (`pipelines.base.StepServices`; each step declares
how, see `Pipeline.build_step`) and what retrievers read (`retrieval()`).

The CLI and the API build a Runtime and install it with `use_runtime`; a worker process that
starts from `celery -A workers.celery_app worker` builds one from the environment on first use.
Tests install their own.
"""

from __future__ import annotations

import logging
import threading
from functools import cached_property
from typing import TYPE_CHECKING

from core.catalog import Catalog
from core.entity_keys import EntityKeyIndex
from core.ports import (
    BlobStore,
    CypherRunner,
    Embedder,
    Extractor,
    GraphStore,
    LexicalIndex,
    StateStore,
    VectorStore,
)
from core.priority import Priority
from core.settings import Settings
from core.stores import factory
from retrieval.base import RetrievalContext

if TYPE_CHECKING:
    from core.llm.client import LLMClient

log = logging.getLogger("cogmill.runtime")


class Runtime:
    """Lazily opened stores and models; `close()` releases whatever was opened. Satisfies
    `pipelines.base.StepServices`."""

    def __init__(self, settings: Settings) -> None:
        self.settings = settings
        settings.home.mkdir(parents=True, exist_ok=True)
        self._lock = threading.RLock()
        # Searches before jobs in this process: a job's model work waits while one runs. Made
        # here, not on first use, so that racing first uses cannot make two.
        self.priority = Priority()

    @cached_property
    def graph(self) -> GraphStore:
        with self._lock:
            return factory.graph_store(self.settings)

    @cached_property
    def embedder(self) -> Embedder:
        with self._lock:
            embedder = factory.embedder(self.settings, self.priority.wait_turn)
            if embedder.dim != self.settings.embedding_dim:
                raise factory.NotAvailableError(
                    f"the embedder {embedder.model_name} makes {embedder.dim}-d vectors but "
                    f"COGMILL_EMBEDDING_DIM is {self.settings.embedding_dim}; "
                    f"set it to {embedder.dim}"
                )
            return embedder

    @cached_property
    def query_embedder(self) -> Embedder:
        """The embedder searches use: concurrent calls share model runs (embeddings/together)."""
        from core.embeddings.local import LocalEmbedder  # as the factory: only when used
        from core.embeddings.together import QueryEmbedder

        with self._lock:
            embedder = self.embedder
            return QueryEmbedder(embedder) if isinstance(embedder, LocalEmbedder) else embedder

    @cached_property
    def vectors(self) -> VectorStore:
        with self._lock:
            return factory.vector_store(self.settings, self.settings.embedding_dim)

    @cached_property
    def state(self) -> StateStore:
        with self._lock:
            return factory.state_store(self.settings)

    @cached_property
    def entity_keys(self) -> EntityKeyIndex:
        """Which stored entities an alias rule could join a name to (see core/entity_keys)."""
        with self._lock:
            keys = EntityKeyIndex(self.state)
            keys.upgrade()
            return keys

    @cached_property
    def lexical(self) -> LexicalIndex:
        """BM25 postings of chunks (CHUNKS_LEXICAL), kept up to date on writes and deletes."""
        with self._lock:
            return factory.lexical_index(self.settings)

    @cached_property
    def cypher(self) -> CypherRunner:
        """Read-only Cypher on the graph (CYPHER, NATURAL_LANGUAGE); ValueError on the
        embedded graph, which has none."""
        with self._lock:
            return factory.cypher_runner(self.settings)

    @cached_property
    def blobs(self) -> BlobStore:
        return factory.blob_store(self.settings)

    @cached_property
    def extractor(self) -> Extractor:
        client = self.llm  # one client per process: its in-flight cap covers every LLM step
        with self._lock:
            return factory.extractor(self.settings, client, self.priority.wait_turn)

    @cached_property
    def llm(self) -> LLMClient | None:
        """The LLM client when one is configured (retrievers answer with it), else None."""
        with self._lock:
            return factory.llm_client(self.settings, self.state)

    def retrieval(self) -> RetrievalContext:
        """What the retrievers read: the stores, the embedder and the LLM (if any)."""
        return RetrievalContext(
            graph=self.graph,
            vectors=self.vectors,
            embedder=self.query_embedder,
            settings=self.settings,
            state=self.state,
            llm=self.llm,
            cypher=lambda: self.cypher,
            extras={"lexical": self.lexical},
        )

    @cached_property
    def catalog(self) -> Catalog:
        return Catalog(
            self.graph,
            self.vectors,
            self.blobs,
            self.settings.max_file_bytes,
            self.lexical,
            self.entity_keys,
        )

    def open(self) -> None:
        """Open what ingestion steps use before the first step: a worker would otherwise import
        the drivers and connect (about a CPU-second) inside its first batch. What fails to open
        (a store still starting) is logged and opened at first use."""
        for name in ("state", "graph", "vectors", "lexical", "embedder", "extractor"):
            try:
                getattr(self, name)
            except Exception as err:  # noqa: BLE001 - first use raises it again, with context
                log.warning("not opened ahead of use: %s (%s)", name, err)

    def close(self) -> None:
        for name in ("graph", "vectors", "state", "lexical", "cypher"):
            store = self.__dict__.pop(name, None)
            if store is not None:
                store.close()


def share_cores_between_threads(threads: int) -> None:
    """One BLAS thread per call when several worker threads embed at once.

    Each worker thread then keeps one core busy with the whole forward pass (numpy's
    element-wise work included), instead of every call spawning BLAS threads that fight the
    other worker threads for the same cores (measured: 15-20% faster ingestion on 2 cores).
    """
    if threads > 1:
        import numpy  # noqa: F401 - BLAS must be loaded for threadpoolctl to find it
        from threadpoolctl import threadpool_limits

        threadpool_limits(limits=1, user_api="blas")


_current: Runtime | None = None


def use_runtime(runtime: Runtime | None) -> None:
    """Install the runtime that tasks in this process use (None to reset)."""
    global _current
    _current = runtime


def current_runtime() -> Runtime:
    """The installed runtime, or one built from the environment on first use."""
    global _current
    if _current is None:
        _current = Runtime(Settings())
    return _current
