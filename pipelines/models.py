"""The typed data that flows between pipeline steps (each step's input and output)."""

from __future__ import annotations

from pydantic import BaseModel, Field

from core.models.extraction import KnowledgeGraph
from core.models.jobs import DocumentError
from core.temporal import TimeSpan


class DocumentRef(BaseModel):
    """A document to process: its catalog identity and where its bytes are."""

    id: str
    dataset: str
    name: str
    blob_key: str
    extension: str = ""
    size: int = 0
    # The node set the document was added to ("" for none); its chunks carry it.
    node_set: str = ""
    # Whether anything derived from the document may be stored (an earlier run wrote or began
    # to write): only then must a write first purge it. False only for never-written documents.
    derived: bool = True
    # A text document above COGMILL_SEGMENT_BYTES is planned as `segments` batch items, each
    # one segment of about `segment_bytes` (pipelines/formats/segments.py); 1: the whole file.
    segment: int = 0
    segments: int = 1
    segment_bytes: int = 0
    # The day the document speaks of (ISO; "": unknown): `add --document-date`, or a date the
    # format states (an e-mail's Date header). Facts without a date of their own held then.
    document_date: str = ""


class DocumentBatch(BaseModel):
    """Input of a pipeline: the documents of one batch, and the pipeline they go through."""

    dataset: str
    pipeline: str = "default"
    documents: list[DocumentRef]
    # Batches started only once this one is recorded: the later segments of a document whose
    # first segment this batch holds (its write purges what earlier runs derived, once).
    followers: list[int] = Field(default_factory=list)


class Element(BaseModel):
    """A structural piece of a document: a title, paragraph, list item, table or code block."""

    kind: str = "text"
    text: str


class ClassifiedDocument(BaseModel):
    document: DocumentRef
    kind: str
    elements: list[Element]
    # The index of the document's first chunk here: a segment's first byte offset, so the
    # chunk ids of all segments are distinct (a segment has fewer chunks than bytes).
    index_base: int = 0


class ClassifiedBatch(BaseModel):
    dataset: str
    documents: list[ClassifiedDocument] = Field(default_factory=list)
    errors: list[DocumentError] = Field(default_factory=list)


class Chunk(BaseModel):
    """A token-bounded piece of one document; `id` is chunk_id(document id, index)."""

    id: str
    document_id: str
    document_name: str
    index: int
    text: str
    token_count: int


class ChunkBatch(BaseModel):
    dataset: str
    documents: list[DocumentRef] = Field(default_factory=list)
    chunks: list[Chunk] = Field(default_factory=list)
    errors: list[DocumentError] = Field(default_factory=list)


class ExtractedBatch(BaseModel):
    """Chunks with the knowledge graph extracted from each (same order)."""

    dataset: str
    documents: list[DocumentRef] = Field(default_factory=list)
    chunks: list[Chunk] = Field(default_factory=list)
    graphs: list[KnowledgeGraph] = Field(default_factory=list)
    errors: list[DocumentError] = Field(default_factory=list)
    # Per chunk (same order) when the pipeline extracts events (`temporal`), else empty.
    events: list[list[ExtractedEvent]] = Field(default_factory=list)
    # Names the entity resolution step rewrote (`resolve_entities`), kept as Alias nodes.
    aliases: list[EntityAlias] = Field(default_factory=list)
    # One per document when the pipeline summarises documents (`summarize_documents`).
    document_summaries: list[DocumentSummary] = Field(default_factory=list)


class EntityAlias(BaseModel):
    """A name a chunk used for an entity that is stored under another (canonical) name."""

    alias: str
    canonical: str
    document_id: str
    chunk_id: str


class DocumentSummary(BaseModel):
    """The summary of a whole document, made from its chunks' summaries."""

    document_id: str
    document_name: str = ""
    text: str
    # The segment summarised (DocumentRef.segment): 0 is the document's summary, later
    # segments of a large document get summaries of their own.
    segment: int = 0
    # The chunk summary whose text this is (a document of one chunk): that node summarises
    # the document too, instead of a copy that searches would find twice.
    same_as: str = ""


class ExtractedEvent(BaseModel):
    """Something that happened at a normalised time, and the names of the entities involved."""

    text: str
    when: TimeSpan
    entities: list[str] = Field(default_factory=list)


class WriteReport(BaseModel):
    """What a batch wrote; the job sums these."""

    dataset: str
    documents: list[str] = Field(default_factory=list)
    chunks: int = 0
    entities: int = 0  # Entity nodes, or the nodes of a custom graph model's classes
    relationships: int = 0
    vectors: int = 0
    errors: list[DocumentError] = Field(default_factory=list)
    # The Entity nodes this batch wrote, for reconcile_entities to compare with the store.
    entity_names: dict[str, str] = Field(default_factory=dict)  # id -> name
    # The Alias nodes it wrote, for reconcile_entities to find entities named like them.
    alias_names: dict[str, str] = Field(default_factory=dict)  # id -> name
    # The graph write itself, for the write rate inside the pipeline (bench/distributed.py).
    nodes_written: int = 0
    edges_written: int = 0
    graph_write_ms: int = 0
