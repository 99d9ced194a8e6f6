"""Personalised PageRank over a small weighted graph held in numpy arrays (no scipy).

The graph is whatever bounded neighbourhood a retriever read (a few thousand nodes at most),
never a whole store. Each node has a normaliser, its total out-weight in the *full* graph
when that is known: mass a node sends along edges that were not read is lost rather than
poured into the few edges that were, so a hub whose neighbourhood was cut short does not
look like a node with a handful of strong links.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np


@dataclass
class WeightedGraph:
    """Nodes by id, directed weighted edges between their indexes, per-node normalisers."""

    index: dict[str, int] = field(default_factory=dict)
    sources: list[int] = field(default_factory=list)
    targets: list[int] = field(default_factory=list)
    weights: list[float] = field(default_factory=list)
    normalisers: dict[int, float] = field(default_factory=dict)
    # Edges added in bulk (`link_many`) as (sources, targets, weights) arrays; `sources` etc.
    # hold the ones `link` added since the last block, so `edges()` keeps the order of adding.
    blocks: list[tuple[np.ndarray, np.ndarray, np.ndarray]] = field(default_factory=list)

    def node(self, node_id: str) -> int:
        """The index of a node, added on first sight."""
        found = self.index.get(node_id)
        if found is None:
            found = self.index[node_id] = len(self.index)
        return found

    def link(self, a: str, b: str, weight_ab: float, weight_ba: float) -> None:
        """An undirected edge as two directed ones with their own weights (0 skips one)."""
        i, j = self.node(a), self.node(b)
        for s, t, w in ((i, j, weight_ab), (j, i, weight_ba)):
            if w > 0:
                self.sources.append(s)
                self.targets.append(t)
                self.weights.append(w)

    def link_many(
        self, pairs: Sequence[tuple[str, str]], weights_ab: Sequence[float], weight_ba: float
    ) -> None:
        """`link(a, b, w, weight_ba)` for each pair and its weight in `weights_ab`, in order,
        without a Python call per edge (GRAPH_PPR links thousands of chunk–entity pairs)."""
        index, flat = self.index, []
        for a, b in pairs:  # `node` inlined: new nodes get their indexes in the same order
            flat.append(index.setdefault(a, len(index)))
            flat.append(index.setdefault(b, len(index)))
        ends = np.array(flat, dtype=np.int64).reshape(-1, 2)
        self._flush()
        count = len(ends)
        both = np.empty((count, 2), dtype=np.float64)
        both[:, 0], both[:, 1] = weights_ab, weight_ba
        keep = (both > 0).ravel()  # per pair: a -> b, then b -> a, as `link` appends them
        self.blocks.append((ends.ravel()[keep], ends[:, ::-1].ravel()[keep], both.ravel()[keep]))

    def edges(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(sources, targets, weights) of every directed edge, in the order added."""
        self._flush()
        if not self.blocks:
            self.blocks.append((np.zeros(0, np.int64), np.zeros(0, np.int64), np.zeros(0)))
        elif len(self.blocks) > 1:
            src, dst, weight = (np.concatenate([b[k] for b in self.blocks]) for k in range(3))
            self.blocks[:] = [(src, dst, weight)]
        return self.blocks[0]

    def _flush(self) -> None:
        """Move the edges `link` added into a block of their own."""
        if self.sources:
            self.blocks.append(
                (
                    np.asarray(self.sources, dtype=np.int64),
                    np.asarray(self.targets, dtype=np.int64),
                    np.asarray(self.weights, dtype=np.float64),
                )
            )
            self.sources, self.targets, self.weights = [], [], []

    def __len__(self) -> int:
        return len(self.index)


def personalised_pagerank(
    graph: WeightedGraph,
    personalisation: dict[str, float],
    damping: float,
    iterations: int = 50,
    tolerance: float = 1e-8,
) -> dict[str, float]:
    """Scores of every node: (1 - damping) restarts at the seeds, damping follows edges.

    Out-weights are divided by each node's normaliser (its summed out-weight read here when
    none was given); mass that reaches a node with no out-edges stays lost, which ranks the
    same as redistributing it and keeps the sum below one.
    """
    if not 0 <= damping < 1:
        raise ValueError(f"damping must be in [0, 1), got {damping}")
    if iterations < 1:
        raise ValueError(f"iterations must be at least 1, got {iterations}")
    n = len(graph)
    restart = np.zeros(n)
    for node_id, seed in personalisation.items():
        if seed > 0 and node_id in graph.index:
            restart[graph.index[node_id]] += seed
    total = float(restart.sum())
    if n == 0 or total <= 0:
        return dict.fromkeys(graph.index, 0.0)
    restart /= total
    src, dst, weight = graph.edges()
    read_out = np.bincount(src, weights=weight, minlength=n)
    norm = read_out.copy()
    for i, value in graph.normalisers.items():
        norm[i] = max(value, read_out[i])  # never more than everything: at least what was read
    share = weight / np.where(norm[src] > 0, norm[src], 1.0)
    scores = restart.copy()
    for _ in range(iterations):
        spread = np.bincount(dst, weights=scores[src] * share, minlength=n)
        updated = (1 - damping) * restart + damping * spread
        done = np.abs(updated - scores).sum() < tolerance
        scores = updated
        if done:
            break
    return {node_id: float(scores[i]) for node_id, i in graph.index.items()}


def min_max(values: dict[str, float]) -> dict[str, float]:
    """Scores rescaled to [0, 1] so PageRank mass and cosine similarity can be added."""
    low, high = min(values.values(), default=0.0), max(values.values(), default=0.0)
    span = (high - low) or 1.0
    return {key: (value - low) / span for key, value in values.items()}
