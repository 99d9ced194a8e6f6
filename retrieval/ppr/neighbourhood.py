"""The bounded entity–chunk subgraph GRAPH_PPR reads around its seeds (retriever.py), hop by
hop, as a weighted graph for PageRank: a chunk's MENTIONS, an entity's chunks (a hub's are not
expanded), table rows' REFERENCES and, when weighted, the relations between entities.
"""

from __future__ import annotations

from collections.abc import Sequence

from core.models.graph import NodeChunks, frontier_ids
from core.models.vocabulary import ENTITY, MENTIONS, REFERENCES
from core.ports import GraphReader
from retrieval.ppr.pagerank import WeightedGraph
from retrieval.ppr.params import PPRParams
from retrieval.ppr.relations import link_steps, relation_read, relation_steps


class Neighbourhood:
    """The bounded entity–chunk subgraph around the seeds, as a weighted graph for PageRank."""

    def __init__(self, graph: GraphReader, params: PPRParams) -> None:
        self.graph, self.params = graph, params
        self.weighted = WeightedGraph()
        self.words: frozenset[str] = frozenset()  # the question's content words (stems)
        self.relation_out: dict[str, float] = {}  # entity id -> summed weight of its relations
        self.chunks: set[str] = set()
        self.entities: dict[str, list[str]] = {}  # entity id -> the chunks that mention it
        self.degrees: dict[str, int] = {}  # entity id -> how many ([] in `entities` for a hub)
        self.names: dict[str, str] = {}  # entity id -> its name (for the results' evidence)
        self._mentions: set[tuple[str, str]] = set()  # (chunk, entity) read from MENTIONS
        self.rows: set[str] = set()  # the passages that are table rows (REFERENCES are read)
        self.named: set[str] = set()  # the entities the query names (seeds)
        # The current hop's reads (`_read`): its chunks' MENTIONS, the entities reached.
        self._ends: list[tuple[str, str]] = []
        self._read_entities: dict[str, NodeChunks] = {}
        self._asked: set[str] = set()  # the entities that read asked for (found or not)
        self._relation_ends: list[tuple[str, str, str]] = []  # of the hop's `sources`
        self._weights = (params.relation_weight, params.relation_words)

    def mentioned(self) -> list[tuple[str, str]]:
        """(chunk, entity) of every mention read: MENTIONS edges and entities' provenance."""
        return [*self._mentions, *((c, e) for e, cs in self.entities.items() for c in cs)]

    def degree(self, entity: str) -> int:
        """How many chunks mention the entity (1 when unknown)."""
        return max(self.degrees.get(entity, 0), 1)

    def specificity(self, entity: str) -> float:
        """1 / (chunks mentioning the entity) ** specificity: rare names weigh more."""
        return 1.0 / self.degree(entity) ** self.params.specificity

    def full(self) -> bool:
        return len(self.chunks) + len(self.entities) >= self.params.max_nodes

    def expand(self, chunks: Sequence[str], entities: Sequence[str]) -> None:
        """Read `hops` steps out from the seeds, stopping early at `max_nodes`."""
        chunk_frontier = list(dict.fromkeys(chunks))
        self.chunks.update(chunk_frontier)
        named, hops = list(dict.fromkeys(entities)), self.params.hops
        self._read(chunk_frontier if hops else [], named, named if hops else [])
        entity_frontier = self._load_entities(named)
        for hop in range(hops):
            if self.full() or not (chunk_frontier or entity_frontier):
                break
            if hop:
                self._read(chunk_frontier, [], self._relation_sources(entity_frontier))
            new_entities = self._entities_of()
            new_chunks = self._chunks_of(entity_frontier) + self._referenced(chunk_frontier)
            far = self._relations()  # loaded now, stepped from at the next hop
            chunk_frontier, entity_frontier = new_chunks, far + self._load_entities(new_entities)
        self._link()

    def _read(self, chunks: list[str], entities: list[str], sources: list[str]) -> None:
        """One hop's reads at once (`GraphReader.frontier`): the chunks' MENTIONS, the relations
        of `sources`, names and chunks of the entities and those reached, but the loaded."""
        skip, fanout = list(self.entities), self.params.chunk_fanout
        relations = relation_read(sources, self.words, self._weights, len(sources) * fanout)
        self._ends, self._read_entities, self._relation_ends = [], {}, []
        if chunks or entities or relations:
            self._ends, self._read_entities, self._relation_ends = self.graph.frontier(
                chunks,
                entities,
                names=[MENTIONS],
                type=ENTITY,
                limit=len(chunks) * fanout,
                skip=skip,
                relations=relations,
                most=self.params.entity_fanout,
            )
        far = relations.far_ends(self._relation_ends) if relations else []
        self._asked = set(frontier_ids(chunks, entities, self._ends, skip, far))

    def _load_entities(self, ids: list[str]) -> list[str]:
        """Record each new entity's chunks (its provenance lists them; a hub's are not read:
        `_chunks_of` stops at hubs, and `_link` has their edges to the chunks read from
        MENTIONS); returns the new ids."""
        room = self.params.max_nodes - len(self.chunks) - len(self.entities)
        todo = [i for i in ids if i not in self.entities][: max(room, 0)]
        # Names and chunks only: whole nodes (properties, support records) cost ~3x the CPU.
        # Read with the hop's edges already (`_read`); anything else would be read now.
        unread = [i for i in todo if i not in self._asked]
        most = self.params.entity_fanout
        fresh = self.graph.node_chunks(unread, type=ENTITY, most=most) if unread else {}
        read = self._read_entities | fresh
        found = [i for i in todo if i in read]
        for eid in found:
            self.names[eid], self.entities[eid], self.degrees[eid] = read[eid]
        return found

    def _entities_of(self) -> list[str]:
        """The entities the hop's chunks mention (their MENTIONS, read with the hop: at most
        `chunk_fanout` per chunk)."""
        found = []
        for source, target in self._ends:
            if source in self.chunks:
                self._mentions.add((source, target))
                found.append(target)
        return list(dict.fromkeys(found))

    def _referenced(self, passages: list[str]) -> list[str]:
        """Table rows a frontier row references or is referenced by (a foreign key is a hop
        between two passages); the rows are linked both ways. Returns the new ones."""
        rows = [r for r in passages if r in self.rows]
        if not rows:
            return []
        limit = len(rows) * self.params.chunk_fanout
        new: list[str] = []
        for edge in self.graph.edges_of(rows, names=[REFERENCES], limit=limit):
            for end in (edge.source, edge.target):
                if end not in self.chunks and not self.full():
                    self.chunks.add(end)
                    new.append(end)
            if edge.source in self.chunks and edge.target in self.chunks:
                self.weighted.link(edge.source, edge.target, 1.0, 1.0)
        self.rows.update(new)
        return new

    def _chunks_of(self, entities: list[str]) -> list[str]:
        """The chunks mentioning non-hub entities, most specific entity first, while room."""
        new: list[str] = []
        room = self.params.max_nodes - len(self.chunks) - len(self.entities)  # as full()
        for eid in sorted(entities, key=self.degree):
            if self.degree(eid) > self.params.entity_fanout:
                break  # a hub: sorted, so every later entity is one too
            for chunk in self.entities[eid]:
                if room <= 0:
                    return new
                if chunk not in self.chunks:
                    self.chunks.add(chunk)
                    new.append(chunk)
                    room -= 1
        return new

    def _relation_sources(self, entities: list[str]) -> list[str]:
        """Whose relations are read: not an entity in over `relation_fanout` chunks (the cost),
        nor one in one chunk unless named (no chunk sends it mass, see _link: none to pass)."""
        fanout, named = self.params.relation_fanout, self.named
        return [e for e in entities if 1 < self.degree(e) <= fanout or e in named]

    def _relations(self) -> list[str]:
        """The relation steps read with the hop (relations.py): the ends of those the question
        names are loaded, and steps between two loaded entities are linked."""
        steps, asked = relation_steps(self._relation_ends, self.words, self._weights)
        far = self._load_entities([x for x in asked if x not in self.entities])
        link_steps(self.weighted, steps, self.entities, self.specificity, self.relation_out)
        return far

    def _link(self) -> None:
        """Chunk–entity edges among the nodes read, weighted toward specific entities."""
        g = self.weighted
        pairs = {(c, e) for c, e in self._mentions if e in self.entities}
        for eid, chunks in self.entities.items():
            pairs.update((c, eid) for c in chunks if c in self.chunks)
        for chunk in self.chunks:
            g.node(chunk)
        ordered = sorted(pairs)
        # An entity only this chunk mentions bridges nowhere: mass sent to it would only come
        # back, so the chunk does not send any (a seed on it still reaches the chunk).
        forward = {e: self.specificity(e) if self.degree(e) > 1 else 0.0 for e in self.entities}
        for eid in self.named & forward.keys():  # it restarts there anyway: the rest moves on
            forward[eid] *= self.params.named_backflow
        g.link_many(ordered, [forward[eid] for _, eid in ordered], 1.0)
        for eid, degree in self.degrees.items():
            # An entity's out-weight in the full graph: one per chunk that mentions it, and
            # the relation steps read.
            g.normalisers[g.node(eid)] = degree + self.relation_out.get(eid, 0.0)
