"""Step: the LLM judge of look-alike facts, after a batch is written (with an LLM configured).

Candidate pairs: two relationships with one subject (the same source, or the same target),
names sharing a word (or equal), different objects, not both in a group by the rules, at least
one of them written by this batch, read from the store (the relationships of the entities the
batch wrote, one bounded read). After writing, as entity reconciliation does: of two batches
written at the same time, the one judged last sees the other's facts, so every pair is asked
whatever the order. They go to the LLM grouped by subject, at most `PAIRS_PER_CALL` in a call,
at most `max_pairs` per batch; each call is the LLM client's: cached (the same pairs are asked
once), metered against the job and its documents, and deferred to the Batch API in batch
mode, as every call of a step on the LLM queue.

A conflict puts both relations in one group for that subject: the rules' group of one of
them, else `judged:<the first name>`; both edges are upserted with it, and the store derives
the subject's validity again. `since`, when the later fact's passages give it no date of their
own, becomes a claim of that fact (of its first supporting document, so deleting the document
removes it). A call the endpoint gives up on leaves its pairs unjudged. Without an LLM, or
with COGMILL_FACTS_SUPERSESSION off, the step passes the batch on.
"""

from __future__ import annotations

import asyncio
import logging
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import ClassVar

from pydantic import BaseModel, Field

from core.facts.functional import FunctionalRelations, words_of
from core.llm import usage as accounting
from core.llm.aio import run_sync
from core.llm.client import LLMClient, LLMError
from core.llm.deferral import DEFERRED
from core.models.facts import ENDS_GROUP, FACT_GROUP, FACT_SIDE
from core.models.graph import Edge, FactClaim
from core.models.vocabulary import STRUCTURAL_EDGES
from core.ports import GraphStore
from core.time_expressions import parse_time
from pipelines.base import LLM, StepContext, StepQueue, StepServices
from pipelines.date_facts import DateFacts
from pipelines.models import WriteReport

log = logging.getLogger("cogmill.facts")
PROMPT_PATH = Path(__file__).parents[1] / "core" / "llm" / "prompts" / "judge_facts.txt"
PAIRS_PER_CALL = 8
EDGES_PER_ENTITY = 200
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
class Pair:
    subject: str  # the shared end's node id
    side: str  # "source" or "target": which end of both facts it is
    first: Edge
    second: Edge


class JudgeFacts:
    """Asks an LLM whether look-alike facts of one subject conflict, and when."""

    name: ClassVar[str] = "judge_facts"
    queue: ClassVar[StepQueue] = LLM

    @classmethod
    def build(cls, services: StepServices, context: StepContext) -> JudgeFacts:
        """With the process's LLM (None: no judging) and the job's functional relations."""
        s = services.settings
        on = s.facts_supersession and s.facts_judge_max_pairs > 0
        client = services.llm if on else None
        relations = DateFacts.build(services, context).relations
        return cls(client, services.graph, relations, max(s.facts_judge_max_pairs, 1))

    def __init__(
        self,
        client: LLMClient | None,
        graph: GraphStore,
        relations: FunctionalRelations,
        max_pairs: int,
        *,
        concurrency: int = 8,
        prompt: str | None = None,
    ) -> None:
        if max_pairs < 1 or concurrency < 1:
            raise ValueError(f"max_pairs, concurrency must be >= 1: {max_pairs}, {concurrency}")
        self.client, self.graph, self.relations = client, graph, relations
        self.max_pairs, self.concurrency = max_pairs, concurrency
        self.prompt = prompt if prompt is not None else PROMPT_PATH.read_text(encoding="utf-8")

    def run(self, report: WriteReport) -> WriteReport:
        if self.client is None or not report.entity_names:
            return report
        pairs, names = self.candidates(report)
        if not pairs:
            return report
        by_subject: dict[str, list[Pair]] = defaultdict(list)
        for pair in pairs:
            by_subject[pair.subject].append(pair)
        calls = [
            group[i : i + PAIRS_PER_CALL]
            for group in by_subject.values()
            for i in range(0, len(group), PAIRS_PER_CALL)
        ]
        answers = run_sync(self._ask_all(calls, names))
        written: dict[str, Edge] = {}
        for call, verdicts in zip(calls, answers, strict=True):
            for verdict in verdicts:
                if 1 <= verdict.pair <= len(call) and verdict.conflict:
                    self._apply(call[verdict.pair - 1], verdict, written)
        if written:
            self.graph.upsert_edges(sorted(written.values(), key=lambda e: (e.source, e.target)))
        return report

    def candidates(self, report: WriteReport) -> tuple[list[Pair], dict[str, str]]:
        """The pairs to ask about (at most `max_pairs`), and the names of their ends."""
        entities = sorted(report.entity_names)
        limit = EDGES_PER_ENTITY * len(entities)
        edges = self.graph.edges_of(
            entities, exclude=sorted(STRUCTURAL_EDGES), limit=limit, claims=True
        )
        edges = [e for e in edges if e.properties.get(FACT_GROUP) != ENDS_GROUP]
        ours = set(report.documents)
        by_end: dict[tuple[str, str], list[Edge]] = defaultdict(list)
        for edge in edges:
            by_end[(edge.source, "source")].append(edge)
            by_end[(edge.target, "target")].append(edge)
        pairs: dict[tuple[str, str, str], Pair] = {}
        for (subject, side), found in sorted(by_end.items()):
            found.sort(key=lambda e: e.id)
            for i, a in enumerate(found):
                for b in found[i + 1 :]:
                    mine = {s.document_id for e in (a, b) for s in e.support} & ours
                    if mine and _pairable(a, b, side) and (a.id, b.id, side) not in pairs:
                        pairs[(a.id, b.id, side)] = Pair(subject, side, a, b)
                        if len(pairs) >= self.max_pairs:
                            break
        ends = sorted(
            {i for p in pairs.values() for e in (p.first, p.second) for i in (e.source, e.target)}
        )
        names = {n.id: n.name for n in self.graph.get_nodes(ends)} if ends else {}
        return list(pairs.values())[: self.max_pairs], names

    def messages(self, pairs: Sequence[Pair], names: dict[str, str]) -> list[dict[str, str]]:
        """The chat messages asking about one subject's pairs."""
        lines = []
        for n, pair in enumerate(pairs, 1):
            lines.append(f"Pair {n}:")
            for k, edge in enumerate((pair.first, pair.second), 1):
                passage = " ".join(str(edge.properties.get("description", "")).split())
                source, target = names.get(edge.source, "?"), names.get(edge.target, "?")
                lines.append(
                    f"  Fact {k}: {source} —{edge.name}→ {target}. "
                    f"Passage: {passage[:PASSAGE_CHARS]}"
                )
        return [
            {"role": "system", "content": self.prompt},
            {"role": "user", "content": "\n".join(lines)},
        ]

    async def _ask_all(
        self, calls: list[list[Pair]], names: dict[str, str]
    ) -> list[list[FactVerdict]]:
        semaphore = asyncio.Semaphore(self.concurrency)
        return list(await asyncio.gather(*(self._ask(semaphore, call, names) for call in calls)))

    async def _ask(
        self, semaphore: asyncio.Semaphore, pairs: list[Pair], names: dict[str, str]
    ) -> list[FactVerdict]:
        owner = next((s.document_id for p in pairs for s in p.first.support), "")
        if owner:
            accounting.about_document(owner)
        assert self.client is not None
        async with semaphore:
            try:
                reply = await self.client.structured(self.messages(pairs, names), FactVerdicts)
            except LLMError as err:  # unjudged: the rules' groups stand
                if DEFERRED not in str(err):  # batch mode's first pass asks nothing
                    log.warning("fact_judge_failed pairs=%d error=%s", len(pairs), err)
                return []
        return reply.verdicts

    def _apply(self, pair: Pair, verdict: FactVerdict, written: dict[str, Edge]) -> None:
        """Group both facts' relations for the subject; date the later one if undated."""
        ruled = [self.relations.of(e.name) for e in (pair.first, pair.second)]
        known = next((r for r in ruled if r is not None), None)
        first_name = min(pair.first.name, pair.second.name)
        group = known.group if known else f"judged:{'_'.join(words_of(first_name))}"
        side = known.side if known else pair.side
        later = (pair.first, pair.second)[verdict.later - 1] if verdict.later in (1, 2) else None
        since = parse_time(verdict.since[:64]) if verdict.since.strip() else None
        for edge in (pair.first, pair.second):
            tagged = written.setdefault(
                edge.id,
                Edge(
                    source=edge.source,
                    target=edge.target,
                    name=edge.name,
                    dataset=edge.dataset,
                    properties={FACT_GROUP: group, FACT_SIDE: side},
                ),
            )
            undated = not any(c.start is not None and not c.from_document for c in edge.claims)
            if edge is later and since is not None and since.start is not None and undated:
                doc = edge.support[0].document_id if edge.support else ""
                tagged.claims = [FactClaim(document_id=doc, chunk_id="judged", start=since.start)]


def _pairable(a: Edge, b: Edge, side: str) -> bool:
    """Different objects, names alike, not both grouped already."""
    objects = (a.target, b.target) if side == "source" else (a.source, b.source)
    if objects[0] == objects[1] or (FACT_GROUP in a.properties and FACT_GROUP in b.properties):
        return False
    words_a = set(words_of(a.name)) - _FILLER
    return a.name == b.name or bool(words_a & (set(words_of(b.name)) - _FILLER))
