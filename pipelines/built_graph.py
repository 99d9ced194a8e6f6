"""What a batch's builders produce before it is written: nodes, edges and texts to embed.

The builders (pipelines/graph_builder.py, temporal_builder.py, resolve_entities.py,
summarize_documents.py, structured/link_rows.py) add to one `BuiltGraph`; add_data_points.py
writes it. Everything added is deduplicated within the batch and keeps all its provenance.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from core.models.graph import Edge, Node, Support


@dataclass
class EmbedItem:
    id: str
    text: str
    payload: dict[str, str]


@dataclass
class BuiltGraph:
    nodes: dict[str, Node] = field(default_factory=dict)
    edges: dict[tuple[str, str, str], Edge] = field(default_factory=dict)
    to_embed: dict[str, list[EmbedItem]] = field(default_factory=dict)
    # Custom graph model classes met in the batch -> their embedded fields.
    custom_fields: dict[str, tuple[str, ...]] = field(default_factory=dict)

    def add_node(self, node: Node) -> None:
        existing = self.nodes.get(node.id)
        if existing is None:
            self.nodes[node.id] = node
            return
        existing.properties.update({k: v for k, v in node.properties.items() if v})
        _union(existing.support, node.support)

    def add_edge(self, edge: Edge) -> None:
        key = (edge.source, edge.name, edge.target)
        existing = self.edges.get(key)
        if existing is None:
            self.edges[key] = edge
            return
        _union(existing.support, edge.support)
        known = {(c.document_id, c.chunk_id) for c in existing.claims}
        existing.claims.extend(c for c in edge.claims if (c.document_id, c.chunk_id) not in known)

    def embed(self, collection: str, item: EmbedItem) -> None:
        self.to_embed.setdefault(collection, []).append(item)


def _union(into: list[Support], more: list[Support]) -> None:
    seen = {(s.document_id, s.chunk_id) for s in into}
    into.extend(s for s in more if (s.document_id, s.chunk_id) not in seen)
