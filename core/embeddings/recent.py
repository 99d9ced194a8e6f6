"""Vectors of short texts embedded lately, so a name met again is not embedded again.

Entity and relationship names recur across a job's batches (every batch writes the vectors of
all the names it mentions, stored or not); their vectors depend on the text alone. A bounded
least-recently-used map keeps the memory flat: `max_entries` vectors of `dim` float32s.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Sequence

import numpy as np


class RecentVectors:
    """A thread-safe LRU of text -> vector for texts of at most `max_chars` characters."""

    def __init__(self, max_entries: int, max_chars: int) -> None:
        if max_entries < 0 or max_chars < 1:
            raise ValueError(
                f"max_entries must be >= 0 and max_chars >= 1, got {max_entries}, {max_chars}"
            )
        self.max_entries, self.max_chars = max_entries, max_chars
        self._vectors: OrderedDict[str, np.ndarray] = OrderedDict()
        self._lock = threading.Lock()

    def find(self, texts: Sequence[str]) -> dict[int, np.ndarray]:
        """The rows of `texts` whose vector is held, with it (each marked as used lately)."""
        found: dict[int, np.ndarray] = {}
        if not self.max_entries:
            return found
        with self._lock:
            for row, text in enumerate(texts):
                vector = self._vectors.get(text)
                if vector is not None:
                    self._vectors.move_to_end(text)
                    found[row] = vector
        return found

    def keep(self, texts: Sequence[str], vectors: np.ndarray) -> None:
        """Hold the vectors of the short texts among `texts`; the least used go beyond the cap."""
        if not self.max_entries:
            return
        with self._lock:
            for text, vector in zip(texts, vectors, strict=True):
                if len(text) <= self.max_chars:
                    self._vectors[text] = vector.copy()
                    self._vectors.move_to_end(text)
            while len(self._vectors) > self.max_entries:
                self._vectors.popitem(last=False)

    def __len__(self) -> int:
        with self._lock:
            return len(self._vectors)
