"""Dating every relationship of a batch and marking the ones a subject holds one value of at
a time, before the batch is written (pipelines/add_data_points.py).

For each relationship of each chunk: when its passage says it held (core/facts/claims.py: the
dates and change words of its sentence, else its document's date), and, for a functional
relation, its group and subject side (core/facts/functional.py: the job's graph model and
ontology declarations, then the default list). A relation saying a fact ended ("left") is an
ENDS fact. Relations to dates ("born_in 1970") are neither. With an LLM, look-alike relations
the rules leave apart are put to a judge after the write (pipelines/fact_judge.py). With
COGMILL_FACTS_SUPERSESSION off, facts are dated but none is functional.

The store derives each fact's validity from these claims (core/stores/fact_intervals.py).
"""

from __future__ import annotations

import contextlib
import re
from email.utils import parsedate_to_datetime

from core.facts.claims import claim_bounds
from core.facts.functional import DATE_TYPES, FunctionalRelations, merged
from core.facts.when import day_of
from core.models.custom import graph_model_of
from core.models.extraction import KnowledgeGraph
from core.models.facts import ENDS_GROUP
from core.models.graph import normalise_name
from core.ontology import InvalidOntology, load_stored_ontology
from core.temporal import days_from_civil
from pipelines.base import StepContext, StepServices
from pipelines.models import Chunk, DocumentRef, ExtractedBatch

_SENTENCE = re.compile(r"(?<=[.!?])\s+|\n+")
_MAIL_DATE = re.compile(r"^Date: (.{1,100})$", re.MULTILINE)
_DIGIT = re.compile(r"\d")


class DateFacts:
    """Dates the relationships of a batch and marks the functional ones."""

    @classmethod
    def build(cls, services: StepServices, context: StepContext) -> DateFacts:
        """With the job's graph model and ontology declarations."""
        s, options = services.settings, context.options
        if not s.facts_supersession:
            return cls(FunctionalRelations(defaults=False))
        model = (
            graph_model_of(options["graph_model"]).functional if options.get("graph_model") else {}
        )
        ontology: dict[str, str] = {}
        # One that will not parse: extract_graph failed these documents with the reason.
        with contextlib.suppress(InvalidOntology):
            if options.get("ontology"):
                ontology = load_stored_ontology(services.blobs, options["ontology"], s).functional
        return cls(relations_of(model, ontology))

    def __init__(self, relations: FunctionalRelations) -> None:
        self.relations = relations

    def run(self, batch: ExtractedBatch) -> list[KnowledgeGraph]:
        """The batch's graphs, their relationships dated and grouped."""
        days = _document_days(batch.documents, batch.chunks)
        return [
            self.date(graph, chunk, days.get(chunk.document_id))
            for chunk, graph in zip(batch.chunks, batch.graphs, strict=True)
        ]

    def date(self, graph: KnowledgeGraph, chunk: Chunk, day: int | None) -> KnowledgeGraph:
        """The chunk's graph with each relationship dated and grouped."""
        if not graph.relationships:
            return graph
        types = {normalise_name(e.name): e.type.casefold() for e in graph.entities}
        relationships = []
        for rel in graph.relationships:
            ends = (normalise_name(rel.source), normalise_name(rel.target))
            timeless = any(types.get(end) in DATE_TYPES for end in ends)
            ending = not timeless and self.relations.ending(rel.name)
            functional = None if timeless or ending else self.relations.of(rel.name)
            text = rel.description
            if not _DIGIT.search(text):  # an LLM's description may leave the date out
                text = sentence_of(chunk.text, rel.source, rel.target) or text
            bounds = claim_bounds(text, rel.name, rel.source, rel.target, day, ends_fact=ending)
            group = ENDS_GROUP if ending else functional.group if functional else ""
            side = "both" if ending else functional.side if functional else ""
            update = {
                "start": bounds.start,
                "end": bounds.end,
                "group": group,
                "side": side,
                "dated_by_document": bounds.from_document,
            }
            relationships.append(rel.model_copy(update=update))
        return graph.model_copy(update={"relationships": relationships})


def relations_of(model: dict[str, str], ontology: dict[str, str]) -> FunctionalRelations:
    """The functional relations of a job: declared (graph model first), then the defaults."""
    return FunctionalRelations(merged(model.items(), ontology.items()))  # type: ignore[arg-type]


def sentence_of(text: str, source: str, target: str) -> str:
    """The first sentence of a text naming both ends (else the target), or ""."""
    sentences = _SENTENCE.split(text[:20_000])
    lowered = [s.lower() for s in sentences]
    for wanted in ((source.lower(), target.lower()), (target.lower(),)):
        for sentence, low in zip(sentences, lowered, strict=True):
            if all(w in low for w in wanted):
                return sentence
    return ""


def _document_days(documents: list[DocumentRef], chunks: list[Chunk]) -> dict[str, int | None]:
    """Each document's day: its `document_date`, else an e-mail's Date header (a date the
    sender's program wrote, unlike a file's times, which copying changes)."""
    days = {doc.id: day_of(doc.document_date) for doc in documents}
    mails = {doc.id for doc in documents if days[doc.id] is None and doc.extension == "eml"}
    for chunk in chunks:
        if chunk.document_id in mails and chunk.index == 0 and (m := _MAIL_DATE.search(chunk.text)):
            try:
                sent = parsedate_to_datetime(m.group(1).strip())
            except (TypeError, ValueError):
                continue
            days[chunk.document_id] = days_from_civil(sent.year, sent.month, sent.day)
    return days
