"""Why GRAPH_PPR ranked a passage: the entities that carried its PageRank mass to it, and the
entity one hop back that their mass came through, read off the neighbourhood and the scores
already in memory (no store round trip).

A chunk receives mass only from the entities it mentions (and a table row from the rows it
references); the entities that sent it the most are its carriers. A carrier got its own mass
from a chunk that mentions it too (or from its seed weight, when the query names it); the
entity that sent that chunk the most, other than the carrier, is where the path came from.
Each carrier becomes one line, `upstream —MENTIONED WITH→ carrier` (the "A —relation→ B" form
GRAPH_COMPLETION's triplets take in `evidence`), or the carrier's name alone when nothing
upstream sent it mass.
"""

from __future__ import annotations

import numpy as np

from core.models.graph import Node
from retrieval.chunks import chunk_source
from retrieval.models import SearchResult
from retrieval.ppr.pagerank import WeightedGraph

CO_MENTION = "MENTIONED WITH"
RELATED = "RELATED TO"  # an entity–entity edge (read when COGMILL_PPR_RELATION_WEIGHT > 0)


class MassFlows:
    """The mass each directed edge of the PageRank graph carried at the final scores."""

    def __init__(self, graph: WeightedGraph, scores: dict[str, float]) -> None:
        n = len(graph)
        self.ids = list(graph.index)  # indexes are given in insertion order
        self.index = graph.index
        self.src, self.dst, weight = graph.edges()
        score = np.array([scores.get(node, 0.0) for node in self.ids], dtype=np.float64)
        read_out = np.bincount(self.src, weights=weight, minlength=n)
        norm = read_out.copy()
        for i, value in graph.normalisers.items():
            norm[i] = max(value, read_out[i])  # as personalised_pagerank divides
        self.flow = (
            score[self.src] * weight / np.where(norm[self.src] > 0, norm[self.src], 1.0)
            if n
            else np.zeros(0)
        )
        self._by_target: np.ndarray | None = None
        self._starts = np.zeros(0, dtype=np.int64)

    def senders(self, node: str, skip: str | None = None) -> list[str]:
        """The nodes that sent `node` mass, the most first (`skip` left out)."""
        at = self.index.get(node)
        if at is None or not len(self.flow):
            return []
        if self._by_target is None:  # edges that carried mass, grouped by target in edge order
            carried = np.nonzero(self.flow > 0)[0]
            self._by_target = carried[np.argsort(self.dst[carried], kind="stable")]
            self._starts = np.searchsorted(self.dst[self._by_target], np.arange(len(self.ids) + 1))
        into = self._by_target[self._starts[at] : self._starts[at + 1]]
        ranked = into[np.argsort(-self.flow[into], kind="stable")]
        found = (self.ids[int(self.src[i])] for i in ranked)
        return [sender for sender in found if sender != skip]


def provenance(flows: MassFlows, chunk: str, names: dict[str, str], limit: int = 3) -> list[str]:
    """At most `limit` lines naming the entities that carried mass to `chunk` and where theirs
    came from; `names` maps the neighbourhood's entity ids to their names."""
    lines: list[str] = []
    for carrier in flows.senders(chunk):
        if len(lines) >= limit:
            break
        if carrier not in names:
            continue  # a referencing table row: no entity on that step
        line = names[carrier]
        for via in flows.senders(carrier, skip=chunk)[:1]:
            if via in names:
                line = f"{names[via]} —{RELATED}→ {names[carrier]}"
                continue
            upstream = [e for e in flows.senders(via, skip=carrier) if e in names][:1]
            if upstream:
                line = f"{names[upstream[0]]} —{CO_MENTION}→ {names[carrier]}"
        if line not in lines:
            lines.append(line)
    return lines


def passage(chunk: Node, score: float, evidence: list[str]) -> SearchResult:
    """A GRAPH_PPR result: the passage, its score and what led to it."""
    text = str(chunk.properties.get("text", ""))
    return SearchResult(
        text=text, score=round(score, 6), sources=[chunk_source(chunk)], evidence=evidence
    )
