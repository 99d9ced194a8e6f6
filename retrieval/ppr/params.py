"""The seeds, bounds and weights of a GRAPH_PPR search, read from the COGMILL_PPR_* settings."""

from __future__ import annotations

from dataclasses import dataclass, fields

from core.settings import Settings


@dataclass(frozen=True)
class PPRParams:
    """Seeds, bounds and weights of one GRAPH_PPR search (COGMILL_PPR_* settings)."""

    damping: float = 0.85
    hops: int = 2
    chunk_seeds: int = 20
    entity_seeds: int = 0
    summary_seeds: int = 0
    chunk_weight: float = 1.0
    entity_weight: float = 0.5
    summary_weight: float = 0.5
    exact_weight: float = 3.0
    relation_weight: float = 0.0
    relation_words: float = 2.0
    relation_fanout: int = 10
    specificity: float = 1.0
    entity_fanout: int = 50
    chunk_fanout: int = 64
    max_nodes: int = 3000
    iterations: int = 50
    dense_fusion: float = 0.2
    dense_candidates: int = 100
    link_hits: int = 3
    seed_temperature: float = 0.05
    link_threshold: float = 0.75
    named_backflow: float = 0.0

    @classmethod
    def from_settings(cls, settings: Settings) -> PPRParams:
        """The `ppr_<name>` fields of the settings."""
        return cls(**{f.name: getattr(settings, f"ppr_{f.name}") for f in fields(cls)})
