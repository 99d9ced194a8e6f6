"""Settings of searches: result counts, multi-step bounds, sessions, GRAPH_PPR, response models.

One part of `Settings` (core/settings/__init__.py); each field maps to `COGMILL_<FIELD>`.
"""

from __future__ import annotations

from pydantic import BaseModel, Field


class RetrievalSettings(BaseModel):
    """How searches run: result counts, multi-step bounds, sessions, GRAPH_PPR, response models."""

    # Retrieval
    # Results a search returns when the caller gives no top-k and the query analysis none.
    search_top_k: int = Field(default=10, ge=1, le=1000)

    # Bounds of the multi-step search types: rounds of COT / context extension, sub-questions
    # of decomposition, tool calls of the agentic search.
    search_max_rounds: int = Field(default=3, ge=1, le=20)
    search_max_subquestions: int = Field(default=4, ge=1, le=20)
    search_max_tool_calls: int = Field(default=4, ge=1, le=50)

    # The node set CODING_RULES reads (`cogmill add rules.md --node-set coding_rules`).
    coding_rules_node_set: str = "coding_rules"

    # Session memory (retrieval/sessions.py): a session item expires this long after written.
    session_ttl_seconds: int = Field(default=7 * 86_400, ge=1)

    # GRAPH_PPR (retrieval/ppr/): seeds, the bounded neighbourhood, PageRank, the fusion.
    ppr_damping: float = Field(default=0.85, ge=0, lt=1, description="Share that follows edges")
    ppr_hops: int = Field(default=2, ge=1, le=4, description="Steps read out from the seeds")

    # Vector entry points (seeds) per collection: chunks, entity names, summaries. Entity and
    # summary hits of the whole question did not improve recall on MuSiQue, so they are off.
    ppr_chunk_seeds: int = Field(default=20, ge=0, le=1000)
    ppr_entity_seeds: int = Field(default=0, ge=0, le=1000)
    ppr_summary_seeds: int = Field(default=0, ge=0, le=1000)

    # Restart weights of the seeds of each kind.
    ppr_chunk_weight: float = Field(default=1.0, ge=0)
    ppr_entity_weight: float = Field(default=0.5, ge=0)
    ppr_summary_weight: float = Field(default=0.5, ge=0)
    ppr_exact_weight: float = Field(default=3.0, ge=0, description="Entities the query names")
    ppr_relation_weight: float = Field(default=0.0, ge=0, description="Entity-entity edges")

    # Extra weight of a relation whose name shares a word with the question (0: not read).
    ppr_relation_words: float = Field(default=2.0, ge=0, description="Question-word relations")

    # Relations of an entity in more chunks than this are not read (10 lost nothing against 50).
    ppr_relation_fanout: int = Field(default=10, ge=1, description="Chunks above: none read")

    ppr_specificity: float = Field(default=1.0, ge=0, description="Hub penalty exponent")
    ppr_entity_fanout: int = Field(default=50, ge=1, description="Chunks above which: a hub")
    ppr_chunk_fanout: int = Field(default=64, ge=1, description="Entities read per chunk")
    # Most nodes in the neighbourhood PageRank runs on, and its power iterations.
    ppr_max_nodes: int = Field(default=3000, ge=10, le=100_000)
    ppr_iterations: int = Field(default=50, ge=1, le=1000)

    ppr_dense_fusion: float = Field(default=0.2, ge=0, le=1, description="Dense score share")
    # Dense candidates scored for the fusion.
    ppr_dense_candidates: int = Field(default=100, ge=1, le=1000)
    # A capitalised name in the query is linked to this many entities whose names' vectors are
    # at least ppr_link_threshold alike (cosine).
    ppr_link_hits: int = Field(default=3, ge=0, le=100, description="Entities per query name")
    ppr_link_threshold: float = Field(default=0.75, ge=-1, le=1)

    ppr_seed_temperature: float = Field(default=0.05, gt=0, description="Chunk seed sharpness")

    # Share of a chunk's step into an entity the query names, which restarts there anyway
    # (0: a passage's mass moves on to the bridges it names; 1: as any entity).
    ppr_named_backflow: float = Field(default=0.0, ge=0, le=1)

    # A JSON Schema response_model's JSON size, nodes (a `$defs` entry once), properties,
    # nesting, enum values and alternatives are capped before it is built (retrieval/).
    response_model_max_bytes: int = Field(default=64 * 1024, ge=1)
    response_model_max_nodes: int = Field(default=2000, ge=1)
    response_model_max_properties: int = Field(default=500, ge=1)
    response_model_max_depth: int = Field(default=16, ge=1, le=64)
    response_model_max_enum_values: int = Field(default=1000, ge=1)
    response_model_max_alternatives: int = Field(default=500, ge=1)
