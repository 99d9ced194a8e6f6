"""Step 6: events with a normalised time and the entities involved, for every chunk.

With an LLM: one structured call per chunk (concurrent, cached, rate-limited by the client),
the times it writes normalised by core/time_expressions.py. Without one: each sentence with a date
(spaCy DATE entities, plus the unambiguous forms spaCy misses, e.g. "44 BC", "2019年3月")
is an event at that date, using the offline extractor's already loaded spaCy pipeline.
"""

from __future__ import annotations

import asyncio
import logging
import threading
from collections.abc import Sequence
from pathlib import Path
from typing import Any, ClassVar, Protocol

from pydantic import BaseModel, Field

from core.llm.aio import run_sync
from core.llm.client import LLMClient, LLMError
from core.llm.offline.extractor import OfflineExtractor, load_pipeline
from core.models.graph import normalise_name
from core.models.jobs import DocumentError
from core.ports import Extractor, batched
from core.temporal import TimeSpan
from core.time_expressions import find_spans, parse_time
from pipelines.base import LLM, StepContext, StepQueue, StepServices
from pipelines.models import ExtractedBatch, ExtractedEvent
from pipelines.temporal_builder import named_in, span_key

log = logging.getLogger("cogmill.events")
PROMPT_PATH = Path(__file__).parents[1] / "core" / "llm" / "prompts" / "extract_events.txt"
EVENT_TEXT_CHARS = 600
# Labels of spaCy entities that are not participants of an event.
NOT_PARTICIPANT_LABELS = frozenset({"DATE", "TIME", "CARDINAL", "ORDINAL", "PERCENT", "QUANTITY"})


class LLMEvent(BaseModel):
    """One event as the LLM writes it; `time` is normalised afterwards."""

    description: str = Field(min_length=1)
    time: str = Field(min_length=1)
    entities: list[str] = Field(default_factory=list)


class EventList(BaseModel):
    """The LLM's reply for one passage."""

    events: list[LLMEvent] = Field(default_factory=list)


class EventExtractionFailed(LLMError):
    """Some texts got no events from the LLM; the others' events are kept in `results`."""

    code = "event_extraction_failed"

    def __init__(self, failures: dict[int, LLMError], results: list[list[ExtractedEvent] | None]):
        first = min(failures)
        super().__init__(
            f"LLM event extraction failed for {len(failures)} of {len(results)} texts "
            f"(first: text {first}: {failures[first]})"
        )
        self.failures, self.results = failures, results


class EventExtractor(Protocol):
    name: str

    def events(
        self, texts: Sequence[str], entities: Sequence[Sequence[str]]
    ) -> list[list[ExtractedEvent]]:
        """Events per text, in order; `entities` are the names already extracted from each."""
        ...


class LLMEventExtractor:
    """Events per text from a chat model, normalised; undatable events are dropped."""

    def __init__(self, client: LLMClient, *, concurrency: int = 16, prompt: str | None = None):
        if concurrency < 1:
            raise ValueError(f"concurrency must be at least 1, got {concurrency}")
        self.client, self.concurrency = client, concurrency
        self.prompt = prompt if prompt is not None else PROMPT_PATH.read_text(encoding="utf-8")
        self.name = f"llm-events:{client.model}"

    def events(
        self, texts: Sequence[str], entities: Sequence[Sequence[str]]
    ) -> list[list[ExtractedEvent]]:
        """Raises EventExtractionFailed naming the texts the endpoint gave up on."""
        return run_sync(self._all(texts, entities))

    async def _all(
        self, texts: Sequence[str], entities: Sequence[Sequence[str]]
    ) -> list[list[ExtractedEvent]]:
        semaphore = asyncio.Semaphore(self.concurrency)
        outcomes = await asyncio.gather(
            *(self._one(semaphore, t, e) for t, e in zip(texts, entities, strict=True)),
            return_exceptions=True,
        )
        failures: dict[int, LLMError] = {}
        results: list[list[ExtractedEvent] | None] = []
        for index, outcome in enumerate(outcomes):
            if isinstance(outcome, LLMError):
                failures[index] = outcome
                results.append(None)
            elif isinstance(outcome, BaseException):
                raise outcome  # a bug or a cancellation, not an endpoint failure
            else:
                results.append(outcome)
        if failures:
            raise EventExtractionFailed(failures, results)
        return [found or [] for found in results]

    async def _one(
        self, semaphore: asyncio.Semaphore, text: str, entities: Sequence[str]
    ) -> list[ExtractedEvent]:
        if not text.strip():
            return []
        async with semaphore:
            reply = await self.client.structured(self.messages(text, entities), EventList)
        return normalise_events(reply)

    def messages(self, text: str, entities: Sequence[str]) -> list[dict[str, str]]:
        """The chat messages that ask for one text's events (`cognify --estimate` counts them
        too)."""
        system = self.prompt
        if entities:
            system += "\n\nEntities: " + "; ".join(dict.fromkeys(entities))
        return [{"role": "system", "content": system}, {"role": "user", "content": text}]


def normalise_events(reply: EventList) -> list[ExtractedEvent]:
    """The LLM's events with parsed times; those whose time reads as no date are dropped."""
    found: list[ExtractedEvent] = []
    for event in reply.events:
        span = parse_time(event.time)
        if span is None:
            log.info("event_time_unreadable time=%r", event.time[:80])
            continue
        text = " ".join(event.description.split())[:EVENT_TEXT_CHARS]
        found.append(ExtractedEvent(text=text, when=span, entities=event.entities))
    return found


class OfflineEventExtractor:
    """Each sentence with a date is an event at that date; its named entities take part."""

    name = "offline-spacy-dates-v1"

    def __init__(self, source: OfflineExtractor | str, batch_size: int = 64) -> None:
        if batch_size < 1:
            raise ValueError(f"batch_size must be at least 1, got {batch_size}")
        self.source, self.batch_size = source, batch_size
        self._nlp: Any = None
        self._lock = threading.Lock()

    def _pipeline(self) -> tuple[Any, threading.Lock]:
        """The spaCy pipeline and the lock that serialises its use.

        The offline graph extractor's pipeline is reused (with its lock), not loaded twice.
        """
        if isinstance(self.source, OfflineExtractor):
            nlp, _ = self.source._load()
            return nlp, self.source._run_lock
        with self._lock:
            if self._nlp is None:
                self._nlp = load_pipeline(self.source)
        return self._nlp, self._lock

    def events(
        self, texts: Sequence[str], entities: Sequence[Sequence[str]]
    ) -> list[list[ExtractedEvent]]:
        found: list[list[ExtractedEvent]] = [[] for _ in texts]
        todo = [i for i, text in enumerate(texts) if text.strip()]
        if not todo:
            return found
        nlp, lock = self._pipeline()
        for part in batched(todo, self.batch_size):
            with lock, nlp.memory_zone():  # as OfflineExtractor.extract: new words are dropped
                docs = list(nlp.pipe([texts[i] for i in part], batch_size=self.batch_size))
                for i, doc in zip(part, docs, strict=True):
                    found[i] = [event for sent in doc.sents for event in sentence_events(sent)]
        return found


def sentence_events(sent: Any) -> list[ExtractedEvent]:
    """One event per distinct date in a parsed sentence; the sentence is the event's text."""
    text = " ".join(sent.text.split())
    if not text:
        return []
    spans: dict[str, TimeSpan] = {}
    blanked = list(sent.text)
    for ent in sent.ents:
        if ent.label_ != "DATE":
            continue
        for span in find_spans(ent.text, bare_years=True) or _maybe(parse_time(ent.text)):
            spans.setdefault(span_key(span), span)
        begin, end = ent.start_char - sent.start_char, ent.end_char - sent.start_char
        blanked[begin:end] = " " * (end - begin)
    # Outside spaCy's DATE spans, only forms that cannot be anything but a date.
    for span in find_spans("".join(blanked)):
        spans.setdefault(span_key(span), span)
    if not spans:
        return []
    names = [e.text for e in sent.ents if e.label_ not in NOT_PARTICIPANT_LABELS]
    short = text if len(text) <= EVENT_TEXT_CHARS else text[: EVENT_TEXT_CHARS - 1] + "…"
    return [ExtractedEvent(text=short, when=span, entities=names) for span in spans.values()]


def _maybe(span: TimeSpan | None) -> list[TimeSpan]:
    return [] if span is None else [span]


class ExtractEvents:
    """Adds each chunk's events to a batch whose graphs are already extracted.

    Chunks of documents that already failed are skipped; when the LLM gives up on some
    chunks, only their documents fail (and are retried by the next cognify).
    """

    name: ClassVar[str] = "extract_events"
    queue: ClassVar[StepQueue] = LLM

    @classmethod
    def build(cls, services: StepServices, context: StepContext) -> ExtractEvents:
        """The process's LLM when one is configured, else the offline extractor."""
        s = services.settings
        return cls.for_models(
            services.llm,
            services.extractor,
            concurrency=s.llm_concurrency,
            spacy_model=s.spacy_model,
        )

    def __init__(self, extractor: EventExtractor) -> None:
        self.extractor = extractor

    @classmethod
    def for_models(
        cls, llm: LLMClient | None, extractor: Extractor, *, concurrency: int, spacy_model: str
    ) -> ExtractEvents:
        """The LLM extractor when one is configured, else the offline one (sharing spaCy)."""
        if llm is not None:
            return cls(LLMEventExtractor(llm, concurrency=concurrency))
        source = extractor if isinstance(extractor, OfflineExtractor) else spacy_model
        return cls(OfflineEventExtractor(source))

    def run(self, batch: ExtractedBatch) -> ExtractedBatch:
        errors = list(batch.errors)
        failed = {error.document_id for error in errors}
        todo = [i for i, chunk in enumerate(batch.chunks) if chunk.document_id not in failed]
        texts = [batch.chunks[i].text for i in todo]
        names = [[e.name for e in batch.graphs[i].entities] for i in todo]
        try:
            found = self.extractor.events(texts, names)
        except EventExtractionFailed as failure:
            found = [events or [] for events in failure.results]
            documents = {doc.id: doc.name for doc in batch.documents}
            for index, err in failure.failures.items():
                doc_id = batch.chunks[todo[index]].document_id
                if doc_id not in failed:
                    failed.add(doc_id)
                    errors.append(
                        DocumentError(
                            document_id=doc_id,
                            document_name=documents.get(doc_id, ""),
                            step=self.name,
                            message=str(err),
                        )
                    )
        if len(found) != len(todo):
            raise RuntimeError(
                f"event extractor {self.extractor.name} returned {len(found)} results "
                f"for {len(todo)} chunks"
            )
        aliases: dict[str, dict[str, str]] = {}  # chunk id -> normalised alias -> canonical
        for alias in batch.aliases:
            aliases.setdefault(alias.chunk_id, {})[normalise_name(alias.alias)] = alias.canonical
        events: list[list[ExtractedEvent]] = [[] for _ in batch.chunks]
        for index, chunk_events in zip(todo, found, strict=True):
            renamed = aliases.get(batch.chunks[index].id, {})
            events[index] = [canonical(e, renamed) for e in chunk_events]
        return batch.model_copy(update={"events": events, "errors": errors})


def canonical(event: ExtractedEvent, aliases: dict[str, str]) -> ExtractedEvent:
    """The event naming its entities as stored, when entity resolution renamed some."""
    if not aliases:
        return event
    named = [aliases.get(normalise_name(name), name) for name in event.entities]
    named += [aliases[key] for key in sorted(named_in(event.text, aliases))]
    return event.model_copy(update={"entities": list(dict.fromkeys(named))})
