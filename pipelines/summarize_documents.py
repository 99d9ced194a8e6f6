"""A summary of every document, made from the summaries of its chunks.

Every chunk already has a summary (the extractor's, LLM or extractive). A document of one
chunk reuses it: that TextSummary SUMMARIZES the document as well, and no copy is stored or
embedded (the SUMMARIES search would find the same text twice). A longer one gets one
structured LLM call (cached by the client) over its chunk summaries when an LLM is
configured, else an extractive summary of them: the chunk summaries closest to the
document's overall vocabulary, in document order, within a budget.
The summary is a TextSummary node with `scope: document` that SUMMARIZES the Document and is
embedded in `TextSummary_text`, so the SUMMARIES search finds it beside the chunk summaries.

A large text document is planned in segments, each a batch of its own (see
pipelines/formats/segments.py), and no batch sees all of it. Its first segment's summary is
the document's summary; every later segment gets a TextSummary with `scope: segment` that
SUMMARIZES the document too, so the SUMMARIES search covers the whole document while no step
holds more than one segment.
"""

from __future__ import annotations

import asyncio
import logging
import re
from collections import Counter
from typing import TYPE_CHECKING, ClassVar

from pydantic import BaseModel

from core.llm.aio import run_sync
from core.llm.usage import about_document
from core.models.graph import Edge, Node, Support, stable_id, summary_id
from core.models.vocabulary import SUMMARIZES, SUMMARY_COLLECTION, TEXT_SUMMARY
from pipelines.base import LLM, StepContext, StepQueue, StepServices
from pipelines.built_graph import BuiltGraph, EmbedItem
from pipelines.models import DocumentSummary, ExtractedBatch

if TYPE_CHECKING:
    from core.llm.client import LLMClient

log = logging.getLogger("cogmill.summaries")
PROMPT = (
    "You summarise documents. The user message lists the summaries of a document's parts in "
    'order. Answer with JSON {"summary": "..."}: a faithful summary of the whole document '
    "in at most {chars} characters, naming its main people, places, organisations and facts."
)
_WORD = re.compile(r"\w+")


class SummaryAnswer(BaseModel):
    """What the LLM returns for a document."""

    summary: str = ""


def document_summary_id(document_id: str, segment: int = 0) -> str:
    """The summary of a document, or of one of its later segments (`segment` > 0)."""
    if segment:
        return stable_id("document_summary", document_id, str(segment))
    return stable_id("document_summary", document_id)


def extractive_summary(parts: list[str], max_chars: int) -> str:
    """The parts that share most words with the whole, in their order, within `max_chars`."""
    parts = [p.strip() for p in parts if p.strip()]
    if len(parts) <= 1:
        return parts[0][:max_chars] if parts else ""
    whole = Counter(w for p in parts for w in _WORD.findall(p.lower()))

    def score(part: str) -> float:
        words = set(_WORD.findall(part.lower()))
        return sum(whole[w] for w in words) / (1 + len(words)) ** 0.5

    ranked = sorted(range(len(parts)), key=lambda i: (-score(parts[i]), i))
    chosen: list[int] = [ranked[0]]  # the best part always goes in, cut if it must be
    used = len(parts[ranked[0]])
    for i in ranked[1:]:
        if used + 1 + len(parts[i]) <= max_chars:
            chosen.append(i)
            used += 1 + len(parts[i])
    return " ".join(parts[i] for i in sorted(chosen))[:max_chars]


class SummarizeDocuments:
    """Adds one summary per document of the batch (documents that failed get none)."""

    name: ClassVar[str] = "summarize_documents"
    queue: ClassVar[StepQueue] = LLM

    @classmethod
    def build(cls, services: StepServices, context: StepContext) -> SummarizeDocuments:
        """With the process's LLM client (none: summaries from the chunks' own)."""
        s = services.settings
        return cls(services.llm, max_chars=s.document_summary_chars, concurrency=s.llm_concurrency)

    def __init__(
        self, llm: LLMClient | None = None, *, max_chars: int = 600, concurrency: int = 8
    ) -> None:
        if max_chars < 50:
            raise ValueError(f"max_chars must be at least 50, got {max_chars}")
        if concurrency < 1:
            raise ValueError(f"concurrency must be at least 1, got {concurrency}")
        self.llm, self.max_chars, self.concurrency = llm, max_chars, concurrency

    def run(self, batch: ExtractedBatch) -> ExtractedBatch:
        failed = {e.document_id for e in batch.errors}
        parts: dict[str, list[tuple[int, str]]] = {}
        summarised: dict[str, list[str]] = {}  # document -> chunks with a summary
        for chunk, graph in zip(batch.chunks, batch.graphs, strict=True):
            if chunk.document_id not in failed:
                parts.setdefault(chunk.document_id, []).append((chunk.index, graph.summary))
                if graph.summary.strip():
                    summarised.setdefault(chunk.document_id, []).append(chunk.id)
        texts = {doc: [s for _, s in sorted(items)] for doc, items in parts.items()}
        summaries = {doc: extractive_summary(t, self.max_chars) for doc, t in texts.items()}
        long_docs = [doc for doc, t in texts.items() if sum(1 for s in t if s.strip()) > 1]
        if self.llm is not None and long_docs:
            summaries.update(run_sync(self._ask(self.llm, {d: texts[d] for d in long_docs})))
        names = {doc.id: doc.name for doc in batch.documents}
        segments = {doc.id: doc.segment for doc in batch.documents}
        made = [
            DocumentSummary(
                document_id=doc,
                document_name=names.get(doc, ""),
                text=text,
                segment=segments.get(doc, 0),
                same_as=_only_summary(texts[doc], summarised.get(doc, []), text),
            )
            for doc, text in summaries.items()
            if text.strip()
        ]
        return batch.model_copy(update={"document_summaries": made})

    async def _ask(self, llm: LLMClient, texts: dict[str, list[str]]) -> dict[str, str]:
        """LLM summaries of the documents; a document whose call fails keeps its extractive one."""
        from core.llm.client import LLMError

        semaphore = asyncio.Semaphore(self.concurrency)

        async def one(doc: str) -> tuple[str, str]:
            about_document(doc)  # this task's calls count for the document
            messages = summary_messages(texts[doc], self.max_chars)
            async with semaphore:
                try:
                    answer = await llm.structured(messages, SummaryAnswer)
                except LLMError as err:
                    log.warning("document_summary_failed document=%s error=%s", doc, err)
                    return doc, ""
            return doc, answer.summary.strip()[: self.max_chars]

        results = await asyncio.gather(*(one(doc) for doc in texts))
        return {doc: text for doc, text in results if text}


def summary_messages(parts: list[str], max_chars: int) -> list[dict[str, str]]:
    """The chat messages that ask for a document's summary from its chunk summaries (`parts`,
    in order; `cognify --estimate` counts them too)."""
    return [
        {"role": "system", "content": PROMPT.replace("{chars}", str(max_chars))},
        {"role": "user", "content": "\n".join(s for s in parts if s.strip())},
    ]


def _only_summary(texts: list[str], chunk_ids: list[str], text: str) -> str:
    """The id of the chunk summary the document's summary repeats word for word, else ""."""
    if len(chunk_ids) != 1:
        return ""
    return summary_id(chunk_ids[0]) if next(t for t in texts if t.strip()).strip() == text else ""


def add_document_summaries(
    built: BuiltGraph, dataset: str, summaries: list[DocumentSummary], *, embed: bool = True
) -> None:
    """TextSummary nodes (scope document) that SUMMARIZE their documents, embedded when
    `embed`; a one-chunk document's chunk summary SUMMARIZES it instead."""
    for summary in summaries:
        sid = summary.same_as or document_summary_id(summary.document_id, summary.segment)
        support = [Support(document_id=summary.document_id)]
        summarizes = Edge(
            source=sid,
            target=summary.document_id,
            name=SUMMARIZES,
            dataset=dataset,
            support=support,
        )
        built.add_edge(summarizes)
        if summary.same_as:
            continue
        built.add_node(
            Node(
                id=sid,
                type=TEXT_SUMMARY,
                dataset=dataset,
                support=support,
                properties={
                    "text": summary.text,
                    "scope": "segment" if summary.segment else "document",
                    "segment": summary.segment,
                    "document_id": summary.document_id,
                    "document_name": summary.document_name,
                },
            )
        )
        if not embed:
            continue
        built.embed(
            SUMMARY_COLLECTION,
            EmbedItem(
                sid,
                summary.text,
                {"type": TEXT_SUMMARY, "scope": "segment" if summary.segment else "document"},
            ),
        )
