"""Purging what a document derived, in one order for every caller.

Deleting a document (core/catalog.py), re-writing it (pipelines/add_data_points.py) and
relinking its tables (pipelines/structured/link_rows.py) all remove the same things the same
way: what only the document supported in the graph (shared nodes and edges lose only its
support), then the vectors of what went, then the lexical postings of the chunks that went.
"""

from __future__ import annotations

from core.models.graph import Removed
from core.ports import GraphStore, LexicalIndex, VectorStore


def purge_document(
    graph: GraphStore,
    vectors: VectorStore,
    lexical: LexicalIndex | None,
    dataset: str,
    doc_id: str,
    *,
    with_record: bool = False,
    keep_node_vectors: bool = False,
) -> Removed:
    """Remove a document's derived data; returns what the graph lost.

    `with_record` removes the Document node too (the catalog record, which has no support of
    its own, so a purge alone keeps it). `keep_node_vectors` deletes only the removed edges'
    vectors, for a caller that writes the same nodes again with the same texts.
    """
    removed = graph.delete_document(dataset, doc_id)
    if with_record:
        record = graph.delete_nodes([doc_id])
        removed.node_ids += record.node_ids
        removed.edge_ids += record.edge_ids
    # Vectors go after the graph: a crash in between leaves vectors without nodes, which
    # searches skip and a repeated purge removes, never nodes that cannot be found.
    gone = removed.edge_ids if keep_node_vectors else removed.node_ids + removed.edge_ids
    vectors.delete(gone)
    if lexical is not None:
        lexical.remove(dataset, removed.node_ids)
    return removed
