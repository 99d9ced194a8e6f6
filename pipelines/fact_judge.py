"""The LLM judge of look-alike facts (pipelines/date_facts.py, when an LLM is configured).

Candidate pairs: two relationships with one subject (the same source, or the same target),
names sharing a word (or equal), different objects, not both in a group by the rules; one
from this batch, the other from the batch or the store (the subjects' stored relationships,
read once). They go to the LLM grouped by subject, at most `PAIRS_PER_CALL` in one call, at
most `max_pairs` per batch. Each call is the LLM client's: cached (the same pairs are asked
once), metered against the job and its documents, and deferred to the Batch API in batch
mode like every call of a step on the LLM queue.

A conflict puts both relations in one group for that subject: the rules' group of one of
them, else `judged:<the first name>`. The batch's relationships are tagged; the subject's
stored edges of those relations are re-tagged with an upsert of their group (the store then
derives the subject's validity again). `since` starts the later fact's claim when that fact
is in this batch. A call the endpoint gives up on leaves its pairs unjudged.
"""

from __future__ import annotations

import asyncio
import logging
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from pydantic import BaseModel, Field

from core.facts.functional import DATE_TYPES, FunctionalRelations, words_of
from core.llm import usage as accounting
from core.llm.aio import run_sync
from core.llm.client import LLMClient, LLMError
from core.models.extraction import ExtractedRelationship, KnowledgeGraph
from core.models.facts import FACT_GROUP, FACT_SIDE
from core.models.graph import Edge, entity_id, normalise_name
from core.models.vocabulary import STRUCTURAL_EDGES
from core.ports import GraphStore
from core.time_expressions import parse_time
from pipelines.models import Chunk

log = logging.getLogger("cogmill.facts")
PROMPT_PATH = Path(__file__).parents[1] / "core" / "llm" / "prompts" / "judge_facts.txt"
PAIRS_PER_CALL = 8
STORED_PER_SUBJECT = 200
PASSAGE_CHARS = 300
_FILLER = frozenset(
    {
        "of",
        "in",
        "at",
        "to",
        "by",
        "for",
        "the",
        "a",
        "an",
        "is",
        "was",
        "as",
        "on",
        "with",
        "from",
        "has",
        "had",
        "be",
    }
)


class FactVerdict(BaseModel):
    """The judge's answer for one pair."""

    pair: int
    conflict: bool
    later: int = 0
    since: str = ""


class FactVerdicts(BaseModel):
    """The judge's answers for the pairs of one call."""

    verdicts: list[FactVerdict] = Field(default_factory=list)


@dataclass(frozen=True)
class Side:
    """One fact of a pair: its key, passage, and where it is in the batch (None: stored)."""

    source: str  # names, as the passages give them
    name: str
    target: str
    passage: str
    grouped: bool
    at: tuple[int, int] | None = None  # (chunk, relationship) in the batch
    ids: tuple[str, str] = ("", "")  # a stored fact's source and target node ids


@dataclass(frozen=True)
class Pair:
    subject: str  # the shared end's entity id
    side: str  # "source" or "target": which end of both facts it is
    first: Side
    second: Side


class FactJudge:
    """Asks an LLM whether look-alike facts of one subject conflict, and when."""

    def __init__(
        self,
        client: LLMClient,
        graph: GraphStore,
        relations: FunctionalRelations,
        max_pairs: int,
        *,
        concurrency: int = 8,
        prompt: str | None = None,
    ) -> None:
        if max_pairs < 1 or concurrency < 1:
            raise ValueError(
                f"max_pairs and concurrency must be >= 1, got {max_pairs}, {concurrency}"
            )
        self.client, self.graph, self.relations = client, graph, relations
        self.max_pairs, self.concurrency = max_pairs, concurrency
        self.prompt = prompt if prompt is not None else PROMPT_PATH.read_text(encoding="utf-8")

    def run(
        self, dataset: str, chunks: Sequence[Chunk], graphs: list[KnowledgeGraph]
    ) -> list[KnowledgeGraph]:
        """The graphs with judged groups and dates; stored edges re-tagged."""
        pairs = self.candidates(dataset, graphs)
        if not pairs:
            return graphs
        by_subject: dict[str, list[Pair]] = defaultdict(list)
        for pair in pairs:
            by_subject[pair.subject].append(pair)
        calls = [
            group[i : i + PAIRS_PER_CALL]
            for group in by_subject.values()
            for i in range(0, len(group), PAIRS_PER_CALL)
        ]
        owners = {c.id: c.document_id for c in chunks}
        answers = run_sync(
            self._ask_all(calls, [self._owner(call, chunks, owners) for call in calls])
        )
        graphs = [g.model_copy(deep=True) for g in graphs]
        retag: dict[tuple[str, str, str], Edge] = {}
        for call, verdicts in zip(calls, answers, strict=True):
            for verdict in verdicts:
                if 1 <= verdict.pair <= len(call) and verdict.conflict:
                    self._apply(dataset, call[verdict.pair - 1], verdict, graphs, retag)
        if retag:
            self.graph.upsert_edges(sorted(retag.values(), key=lambda e: (e.source, e.target)))
        return graphs

    def candidates(self, dataset: str, graphs: list[KnowledgeGraph]) -> list[Pair]:
        """The pairs to ask about, batch facts first, at most `max_pairs`."""
        new: list[tuple[str, str, Side]] = []  # (subject id, side, fact)
        for ci, graph in enumerate(graphs):
            for ri, rel in enumerate(graph.relationships):
                if rel.group.startswith("~") or _timeless(rel, graph):
                    continue
                fact = Side(
                    rel.source, rel.name, rel.target, rel.description, bool(rel.group), (ci, ri)
                )
                new.append((entity_id(dataset, rel.source), "source", fact))
                new.append((entity_id(dataset, rel.target), "target", fact))
        stored = self._stored(dataset, sorted({s for s, _, _ in new}))
        pairs: dict[tuple, Pair] = {}
        for subject, side, fact in new:
            for other in [f for s, d, f in new if (s, d) == (subject, side)] + stored.get(
                (subject, side), []
            ):
                if len(pairs) >= self.max_pairs:
                    return list(pairs.values())
                if _pairable(fact, other, side):
                    first, second = sorted((fact, other), key=_key)
                    pairs.setdefault(
                        (subject, side, _key(first), _key(second)),
                        Pair(subject, side, first, second),
                    )
        return list(pairs.values())

    def _stored(self, dataset: str, subjects: list[str]) -> dict[tuple[str, str], list[Side]]:
        """The subjects' stored relationships, as pair sides."""
        if not subjects:
            return {}
        edges = self.graph.edges_of(
            subjects, exclude=sorted(STRUCTURAL_EDGES), limit=STORED_PER_SUBJECT * len(subjects)
        )
        names = {
            n.id: n.name
            for n in self.graph.get_nodes(sorted({i for e in edges for i in (e.source, e.target)}))
        }
        found: dict[tuple[str, str], list[Side]] = defaultdict(list)
        wanted = set(subjects)
        for e in edges:
            if e.source not in names or e.target not in names:
                continue
            description = str(e.properties.get("description", ""))
            fact = Side(
                names[e.source],
                e.name,
                names[e.target],
                description,
                FACT_GROUP in e.properties,
                ids=(e.source, e.target),
            )
            for end, side in ((e.source, "source"), (e.target, "target")):
                if end in wanted:
                    found[(end, side)].append(fact)
        return found

    def messages(self, pairs: Sequence[Pair]) -> list[dict[str, str]]:
        """The chat messages asking about one subject's pairs."""
        lines = []
        for n, pair in enumerate(pairs, 1):
            lines.append(f"Pair {n}:")
            for k, fact in enumerate((pair.first, pair.second), 1):
                passage = " ".join(fact.passage.split())[:PASSAGE_CHARS]
                lines.append(
                    f"  Fact {k}: {fact.source} —{fact.name}→ {fact.target}. Passage: {passage}"
                )
        return [
            {"role": "system", "content": self.prompt},
            {"role": "user", "content": "\n".join(lines)},
        ]

    async def _ask_all(self, calls: list[list[Pair]], owners: list[str]) -> list[list[FactVerdict]]:
        semaphore = asyncio.Semaphore(self.concurrency)
        return list(
            await asyncio.gather(
                *(self._ask(semaphore, c, o) for c, o in zip(calls, owners, strict=True))
            )
        )

    async def _ask(
        self, semaphore: asyncio.Semaphore, pairs: list[Pair], owner: str
    ) -> list[FactVerdict]:
        if owner:
            accounting.about_document(owner)
        async with semaphore:
            try:
                reply = await self.client.structured(self.messages(pairs), FactVerdicts)
            except LLMError as err:  # unjudged: the rules' groups stand
                log.warning("fact_judge_failed pairs=%d error=%s", len(pairs), err)
                return []
        return reply.verdicts

    @staticmethod
    def _owner(pairs: list[Pair], chunks: Sequence[Chunk], owners: dict[str, str]) -> str:
        """The document whose fact made the call (its first batch fact's chunk)."""
        for pair in pairs:
            for fact in (pair.first, pair.second):
                if fact.at is not None:
                    return owners.get(chunks[fact.at[0]].id, "")
        return ""

    def _apply(
        self,
        dataset: str,
        pair: Pair,
        verdict: FactVerdict,
        graphs: list[KnowledgeGraph],
        retag: dict[tuple[str, str, str], Edge],
    ) -> None:
        """Group both facts' relations for the subject; date the later one."""
        ruled = [self.relations.of(f.name) for f in (pair.first, pair.second)]
        known = next((r for r in ruled if r is not None), None)
        group = (
            known.group
            if known
            else f"judged:{'_'.join(words_of(min(pair.first.name, pair.second.name)))}"
        )
        side = known.side if known else pair.side
        later = (pair.first, pair.second)[verdict.later - 1] if verdict.later in (1, 2) else None
        since = parse_time(verdict.since[:64]) if verdict.since.strip() else None
        for fact in (pair.first, pair.second):
            if fact.at is not None:
                ci, ri = fact.at
                rel = graphs[ci].relationships[ri]
                rel.group, rel.side = group, side
                if (
                    fact is later
                    and since is not None
                    and since.start is not None
                    and rel.end is None
                ):
                    rel.start = since.start
            elif not fact.grouped:
                source, target = fact.ids
                retag[(source, fact.name, target)] = Edge(
                    source=source,
                    target=target,
                    name=fact.name,
                    dataset=dataset,
                    properties={FACT_GROUP: group, FACT_SIDE: side},
                )


def _key(fact: Side) -> tuple[str, str, str]:
    return (normalise_name(fact.source), fact.name, normalise_name(fact.target))


def _pairable(a: Side, b: Side, side: str) -> bool:
    """Same subject (given), different objects, names alike, not both grouped already."""
    objects = (a.target, b.target) if side == "source" else (a.source, b.source)
    if normalise_name(objects[0]) == normalise_name(objects[1]) or (a.grouped and b.grouped):
        return False
    words_a = set(words_of(a.name)) - _FILLER
    return a.name == b.name or bool(words_a & (set(words_of(b.name)) - _FILLER))


def _timeless(rel: ExtractedRelationship, graph: KnowledgeGraph) -> bool:
    """Whether an end of the relationship is a date (never a value a subject holds)."""
    types = {normalise_name(e.name): e.type.casefold() for e in graph.entities}
    return any(types.get(normalise_name(end)) in DATE_TYPES for end in (rel.source, rel.target))
