"""What both graph adapters do alike when nodes are merged: re-point edges, follow redirects.

A merge (`GraphWriter.merge_nodes`) removes the merged-away nodes and records a redirect from
each to the node it went into, so an edge written later that still names one (a batch that
upserted the entity before another batch merged it) lands where a write before the merge
would have ended up, instead of failing. The adapters look redirects up inside their write
transaction; these pure functions decide what the edges become.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping

from core.models.graph import Edge, Support

# Redirects followed from one id before giving up: a chain grows by one only when a node that
# absorbed others is merged in turn, which canonical names make rare.
MAX_HOPS = 8


def repoint(edges: Iterable[Edge], moves: Mapping[str, str]) -> list[Edge]:
    """The edges with each end in `moves` replaced by its new node, sorted by key.

    Edges that now join a node to itself are dropped (two merged entities were linked); edges
    that now share a key become one, support and claims unioned, properties merged in the
    given order.
    """
    merged: dict[tuple[str, str, str], Edge] = {}
    for edge in edges:
        source, target = moves.get(edge.source, edge.source), moves.get(edge.target, edge.target)
        if source == target:
            continue
        key = (source, edge.name, target)
        earlier = merged.get(key)
        if earlier is None:  # a new record (not model_copy): an Edge caches its id
            merged[key] = Edge(
                source=source,
                target=target,
                name=edge.name,
                dataset=edge.dataset,
                properties=dict(edge.properties),
                support=list(edge.support),
                claims=list(edge.claims),
            )
        else:
            earlier.properties.update(edge.properties)
            earlier.support[:] = union_support([earlier.support, edge.support])
            known = {(c.document_id, c.chunk_id) for c in earlier.claims}
            earlier.claims += [c for c in edge.claims if (c.document_id, c.chunk_id) not in known]
    return [merged[key] for key in sorted(merged)]


def union_support(groups: Iterable[Iterable[Support]]) -> list[Support]:
    """The distinct (document, chunk) pairs of several support lists, first seen first."""
    seen: dict[tuple[str, str], Support] = {}
    for group in groups:
        for item in group:
            seen.setdefault((item.document_id, item.chunk_id), item)
    return list(seen.values())


def resolve(
    missing: Iterable[str],
    redirects_of: Callable[[list[str]], dict[str, str]],
    stored: Callable[[list[str]], set[str]],
) -> dict[str, str]:
    """Each missing id that a chain of redirects leads to a stored node: id -> that node.

    `redirects_of` maps ids to the node each was merged into (ids never merged are absent),
    `stored` says which ids are stored nodes; both run in the caller's transaction.
    """
    at = {i: i for i in missing}  # original id -> where its chain has reached
    resolved: dict[str, str] = {}
    for _ in range(MAX_HOPS):
        hops = redirects_of(sorted(set(at.values())))
        at = {i: hops[now] for i, now in at.items() if now in hops and hops[now] != i}
        if not at:
            break
        found = stored(sorted(set(at.values())))
        resolved |= {i: now for i, now in at.items() if now in found}
        at = {i: now for i, now in at.items() if now not in found}
    return resolved
