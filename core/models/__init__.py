"""Domain models: storage records, data points, extraction schemas, jobs."""

from core.models.graph import Edge, Node, Removed, Subgraph, Support

__all__ = ["Edge", "Node", "Removed", "Subgraph", "Support"]
