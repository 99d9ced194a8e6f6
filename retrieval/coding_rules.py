"""CODING_RULES: the coding rules stored in one node set, most relevant to the question first.

Rules are documents added with `cogmill add rules.md --dataset D --node-set coding_rules`
(the set's name is `COGMILL_CODING_RULES_NODE_SET`); after cognify their chunks carry the
node set. This retriever reads only that set: the set's documents, their chunks, and each
chunk split into rules (list items, or sentences for prose), ranked by embedding similarity.
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Sequence

import numpy as np

from core.models.graph import Node
from core.models.vocabulary import CHUNK, DOCUMENT, NODE_SET, PART_OF
from retrieval.answer import CompletionMixin
from retrieval.base import RetrievalContext
from retrieval.chunks import chunk_source
from retrieval.models import SearchResult

# Bounds on what one query reads: documents of the set, chunks, rules embedded.
MAX_DOCUMENTS = 1000
MAX_CHUNKS = 2000
MAX_RULES = 500
MIN_RULE_CHARS = 8
MIN_RULE_WORDS = 3
RULES_INSTRUCTIONS = (
    "The context lists coding rules. Answer by applying the rules that fit the question, "
    "and name them; do not invent rules that are not listed."
)
_ITEM = re.compile(r"^\s*(?:[-*+•]|\d+[.)]|\[[ xX]\])\s+(.*\S)")
_HEADING = re.compile(r"^\s*(#{1,6}\s|={3,}|-{3,}\s*$)")
_SENTENCE = re.compile(r"(?<=[.!?。！？])\s+")


def split_rules(text: str) -> list[str]:
    """The rules in a chunk: each list item or sentence of at least three words.

    Chunks keep one element per line or paragraph (list bullets may already be stripped by
    the parser); short lines without a sentence, like section titles, are not rules.
    """
    rules: list[str] = []
    for line in text.splitlines():
        if not line.strip() or _HEADING.match(line):
            continue
        item = _ITEM.match(line)
        pieces = [item.group(1)] if item else _SENTENCE.split(line.strip())
        rules += [p.strip() for p in pieces if len(p.split()) >= MIN_RULE_WORDS]
    return [rule for rule in rules if len(rule) >= MIN_RULE_CHARS]


class CodingRulesRetriever(CompletionMixin):
    """Rules of the coding-rules node set, ranked by similarity to the question; the answer
    applies them."""

    instructions = RULES_INSTRUCTIONS

    def __init__(self, ctx: RetrievalContext, node_set: str | None = None) -> None:
        self.ctx = ctx
        self.node_set = node_set or ctx.settings.coding_rules_node_set
        self.note: str | None = None

    def get_context(self, query: str, datasets: Sequence[str], top_k: int) -> list[SearchResult]:
        chunks = self._chunks(datasets)
        rules = [(rule, chunk) for chunk in chunks for rule in split_rules(_text(chunk))]
        rules = list({rule: (rule, chunk) for rule, chunk in rules}.values())[:MAX_RULES]
        if not rules:
            self.note = (
                f"no coding rules in node set {self.node_set!r} of {', '.join(datasets)}: add "
                f"them with `cogmill add RULES.md --dataset D --node-set {self.node_set}`, "
                "then `cogmill cognify D`"
            )
            return []
        vectors = self.ctx.embedder.embed([query] + [rule for rule, _ in rules])
        similarity = vectors[1:] @ vectors[0]
        order = np.argsort(-similarity, kind="stable")[:top_k]
        return [
            SearchResult(
                text=rules[i][0],
                score=round(float(similarity[i]), 6),
                sources=[chunk_source(rules[i][1])],
            )
            for i in order
        ]

    def _chunks(self, datasets: Sequence[str]) -> list[Node]:
        """Chunks of the set's documents that carry the set (written by a cognify since)."""
        documents = [d.id for name in datasets for d in self._documents(name)][:MAX_DOCUMENTS]
        if not documents:
            return []
        wanted = set(documents)
        edges = self.ctx.graph.edges_of(documents, names=[PART_OF], limit=MAX_CHUNKS)
        ids = sorted({e.source for e in edges if e.target in wanted})
        chunks = [
            node
            for node in self.ctx.graph.get_nodes(ids)
            if node.type == CHUNK and node.properties.get(NODE_SET) == self.node_set
        ]
        return sorted(
            chunks,
            key=lambda c: (
                str(c.properties.get("document_name", "")),
                c.properties.get("index", 0),
            ),
        )

    def _documents(self, dataset: str, page: int = 500) -> Iterator[Node]:
        offset = 0
        while offset < MAX_DOCUMENTS:
            batch = self.ctx.graph.find_nodes(dataset, DOCUMENT, limit=page, offset=offset)
            yield from (d for d in batch if d.properties.get(NODE_SET) == self.node_set)
            if len(batch) < page:
                return
            offset += page


def _text(chunk: Node) -> str:
    return str(chunk.properties.get("text", ""))
