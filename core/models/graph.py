"""Storage-level graph records and the identity rules that give them deterministic ids.

Every stored thing is a `Node` or an `Edge`. Ids are uuid5 values derived from content, so
writing the same thing twice is an upsert of the same record (docs/architecture.md, "Data model").
Provenance is kept as `Support`: the (document, chunk) pairs an item came from. Deleting a
document removes its support; an item with no support left is removed.
"""

from __future__ import annotations

import hashlib
import re
import unicodedata
import uuid
from collections.abc import Sequence
from functools import cached_property
from typing import Any, NamedTuple

from pydantic import BaseModel, Field

_NAMESPACE = uuid.UUID("6f1c2a43-5d0e-4c1b-9a8e-2b7c3d4e5f60").bytes


def stable_id(*parts: str) -> str:
    """A deterministic uuid5 string for the given parts: `str(uuid.uuid5(namespace, name))`
    spelled out (1.9 against 5.5 µs; ingestion makes about 80 per chunk)."""
    digest = bytearray(hashlib.sha1(_NAMESPACE + "\x1f".join(parts).encode()).digest()[:16])
    digest[6] = (digest[6] & 0x0F) | 0x50  # version 5
    digest[8] = (digest[8] & 0x3F) | 0x80  # RFC 4122 variant
    x = digest.hex()
    return f"{x[:8]}-{x[8:12]}-{x[12:16]}-{x[16:20]}-{x[20:]}"


_SPACES = re.compile(r"\s+")
_EDGE_PUNCT = "\"'`“”‘’.,;:!?()[]{}"


def normalise_name(name: str) -> str:
    """Canonical form of an entity name: NFKC, case-folded, single spaces, no edge punctuation."""
    text = unicodedata.normalize("NFKC", name).casefold()
    text = _SPACES.sub(" ", text).strip().strip(_EDGE_PUNCT).strip()
    if text.startswith("the "):
        text = text[4:]
    return text


def dataset_id(dataset: str) -> str:
    return stable_id("dataset", dataset)


def document_id(dataset: str, sha256: str) -> str:
    return stable_id("document", dataset, sha256)


def chunk_id(doc_id: str, index: int) -> str:
    return stable_id("chunk", doc_id, str(index))


def entity_id(dataset: str, name: str) -> str:
    """Entities are scoped to a dataset and keyed by normalised name (types are IS_A edges)."""
    return stable_id("entity", dataset, normalise_name(name))


def entity_type_id(dataset: str, type_name: str) -> str:
    return stable_id("entity_type", dataset, normalise_name(type_name))


def summary_id(chunk: str) -> str:
    return stable_id("summary", chunk)


def edge_type_id(dataset: str, name: str) -> str:
    """Relationship names are embedded once per dataset, keyed by name."""
    return stable_id("edge_type", dataset, name)


def alias_id(dataset: str, name: str) -> str:
    """Alias nodes are keyed by the alias's normalised name within a dataset."""
    return stable_id("alias", dataset, normalise_name(name))


def edge_id(source: str, name: str, target: str) -> str:
    """The id of an edge is its key (source, name, target); used for edge vectors."""
    return stable_id("edge", source, name, target)


class Support(BaseModel):
    """One piece of provenance: the document (and chunk, if any) an item came from."""

    document_id: str
    chunk_id: str = ""


class FactClaim(BaseModel):
    """When one supporting passage says its fact held: world time in days since 1970-01-01
    (core/temporal.py; None: the passage does not say), and the system time (epoch seconds)
    the store first kept the claim, which the store sets. One per (document, chunk) of an
    edge; the store derives the edge's validity from its claims (core/stores/fact_intervals.py).
    """

    document_id: str
    chunk_id: str = ""
    start: int | None = None  # the day it held from
    end: int | None = None  # the first day it no longer held
    # The time is the document's date, not one the text gives: the fact held by then.
    from_document: bool = False
    recorded_at: float | None = None


class Node(BaseModel):
    """A node as stored: id, type, dataset, free-form properties and its provenance."""

    id: str
    type: str
    dataset: str
    name: str = ""
    properties: dict[str, Any] = Field(default_factory=dict)
    support: list[Support] = Field(default_factory=list)


class Edge(BaseModel):
    """A directed, named edge; (source, name, target) is its identity."""

    source: str
    target: str
    name: str
    dataset: str
    properties: dict[str, Any] = Field(default_factory=dict)
    support: list[Support] = Field(default_factory=list)
    # What each supporting passage says about when the fact held (a relationship between
    # entities; other edges have none). Stores read them back only when asked.
    claims: list[FactClaim] = Field(default_factory=list)

    @cached_property
    def id(self) -> str:
        """The edge's key as a uuid (computed once: edges are not renamed after creation)."""
        return edge_id(self.source, self.name, self.target)


class Subgraph(BaseModel):
    """A bounded piece of the graph returned by neighbourhood reads."""

    nodes: list[Node] = Field(default_factory=list)
    edges: list[Edge] = Field(default_factory=list)


class Removed(BaseModel):
    """What a delete took away, so vectors of the same ids can be removed too."""

    node_ids: list[str] = Field(default_factory=list)
    edge_ids: list[str] = Field(default_factory=list)


class Merged(Removed):
    """What a merge took away, and the support each merged-away node handed to its target."""

    support: dict[str, list[Support]] = Field(default_factory=dict)


class RelationRead(NamedTuple):
    """The relations `GraphReader.frontier` reads with a hop (GRAPH_PPR's relation steps):
    `relation_ends(ids, exclude=exclude, containing=containing, limit=limit)`, and the names
    and chunks of both ends of those whose name, lower-cased, holds one of `far`."""

    ids: Sequence[str]
    exclude: Sequence[str]
    containing: Sequence[str] | None
    far: Sequence[str]
    limit: int

    def far_ends(self, relations: Sequence[tuple[str, str, str]]) -> list[str]:
        """Both ends of each relation whose name holds a `far` word, in order."""
        named = [(s, t) for s, n, t in relations if any(w in n.lower() for w in self.far)]
        return [end for pair in named for end in pair]


class NodeChunks(NamedTuple):
    """A node's name and the chunks supporting it (`GraphReader.node_chunks`), and how many:
    `len(chunks)`, or, for a node past the read's `most` (a hub, its chunks left unread),
    the number of its support records."""

    name: str
    chunks: list[str]
    chunk_count: int


class Frontier(NamedTuple):
    """What `GraphReader.frontier` read: edge ends, node chunks by id, relation ends."""

    ends: list[tuple[str, str]]
    nodes: dict[str, NodeChunks]
    relations: list[tuple[str, str, str]]


def frontier_ids(
    chunks: Sequence[str],
    entities: Sequence[str],
    ends: Sequence[tuple[str, str]],
    skip: Sequence[str] = (),
    far: Sequence[str] = (),
) -> list[str]:
    """The nodes `GraphReader.frontier` reads: `entities`, each edge's end reached from
    `chunks` (its target from its source, its source from its target), then the `far` ends of
    relations, in order, once each, `skip` left out."""
    asked, skipped = set(chunks), set(skip)
    reached = [t for s, t in ends if s in asked] if asked else []
    reached += [s for s, t in ends if t in asked] if asked else []
    return [i for i in dict.fromkeys([*entities, *reached, *far]) if i not in skipped]
