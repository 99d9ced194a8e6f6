"""Searches' embeddings, computed together when they arrive together.

A query embedding reads every weight matrix of the model (~42 MB) for a few dozen tokens, so
with many searches at once the model is bound by memory reads, and each call's reads compete
with the others'. `QueryEmbedder` lets the first caller run the model while later callers
queue; when it is done, the next in line runs every queued call's padded batches through the
model at once (`LocalEmbedder.encode`), which reads the weights once for all of them. With 16
threads embedding MuSiQue questions on two cores: 38–41 → 14–16 CPU-ms per question, 36 → 64–72
questions/s.

A call alone is encoded exactly as `LocalEmbedder.embed` would. A call encoded beside others
can differ from that by float rounding (at most 2.3e-7 per component over 400 questions), as
BLAS may round a row of a product differently with another row count. Ingestion does not go
through here, so stored vectors never depend on what else ran.
"""

from __future__ import annotations

import threading
from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np

from core.embeddings.bert import Padded
from core.embeddings.local import LocalEmbedder


@dataclass(eq=False)
class _Call:
    batches: list[Padded]
    woken: threading.Event = field(default_factory=threading.Event)
    leads: bool = False  # set before `woken`: this caller runs the next round
    pooled: list[np.ndarray] | None = None
    error: BaseException | None = None


class QueryEmbedder:
    """An `Embedder` for searches over a `LocalEmbedder`: concurrent calls share model runs."""

    def __init__(self, local: LocalEmbedder) -> None:
        self.local = local
        self.dim, self.model_name = local.dim, local.model_name
        self._lock = threading.Lock()
        self._queue: list[_Call] = []
        self._running = False  # a round is being run (by the caller whose `leads` is set)

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        """As `LocalEmbedder.embed`, a small call's batches encoded with whatever else waits."""
        return self.local.embed(texts, run=self._encode)

    def _encode(self, batches: list[Padded]) -> list[np.ndarray]:
        call = _Call(batches)
        with self._lock:
            self._queue.append(call)
            call.leads = not self._running
            self._running = True
        if not call.leads:
            call.woken.wait()  # until its round is done, or it is to run the next one
        if call.leads:
            self._round()
        if call.error is not None:
            raise call.error
        assert call.pooled is not None
        return call.pooled

    def _round(self) -> None:
        """Encode every queued call at once, then hand the next round to the first caller
        queued meanwhile (so no caller waits on more than one round beyond its own)."""
        with self._lock:
            calls, self._queue = self._queue, []
        try:
            if len(calls) == 1:
                calls[0].pooled = self.local.encode(calls[0].batches)
            else:
                pooled = iter(self.local.encode([b for call in calls for b in call.batches]))
                for call in calls:
                    call.pooled = [next(pooled) for _ in call.batches]
        except BaseException as err:  # noqa: BLE001 - every waiting caller gets it
            for call in calls:
                call.error = err
        with self._lock:
            if self._queue:
                self._queue[0].leads = True
                self._queue[0].woken.set()
            else:
                self._running = False
        for call in calls:
            call.woken.set()
