"""Ontologies (OWL/RDF via rdflib): an index of classes and individuals to match entities against.

Classes are subjects typed owl:Class / rdfs:Class or named in rdfs:subClassOf; individuals are
owl:NamedIndividuals and subjects typed with a known class. Labels come from rdfs:label,
skos:prefLabel, skos:altLabel and the local name split at CamelCase and underscores
("MarieCurie" -> "Marie Curie"). Matching is on normalised labels: exact first, then fuzzy
(rapidfuzz ratio) at or above a threshold, for names of at least FUZZY_MIN_CHARS characters.

Ontology files can be large, so a job carries only the blob key (`ontologies/<sha256>.<ext>`);
the content hash in the key lets each process parse an ontology once and reuse it.
"""

from __future__ import annotations

import functools
import hashlib
import io
import logging
import re
import threading
from collections import deque
from dataclasses import dataclass
from pathlib import Path, PurePath
from typing import Any

from core.models.graph import normalise_name
from core.ports import BlobStore
from core.rdf_guard import UnsafeRdf, check_rdf_text
from core.settings import Settings

FORMATS = {
    ".owl": "xml", ".rdf": "xml", ".xml": "xml", ".ttl": "turtle", ".nt": "nt", ".n3": "n3",
    ".jsonld": "json-ld", ".json": "json-ld",
}  # fmt: skip
BLOB_PREFIX = "ontologies/"
FUZZY_MIN_CHARS = 4
# Top classes every ontology shares; matching them says nothing.
_TOP = frozenset({
    "http://www.w3.org/2002/07/owl#Thing", "http://www.w3.org/2000/01/rdf-schema#Resource",
    "http://www.w3.org/2002/07/owl#Nothing",
})  # fmt: skip
_CAMEL = re.compile(r"(?<=[a-z0-9])(?=[A-Z])|(?<=[A-Z])(?=[A-Z][a-z])")
log = logging.getLogger("cogmill.ontology")


class InvalidOntology(ValueError):
    """An ontology file cogmill cannot read; the message says what is wrong."""


@dataclass(frozen=True)
class Term:
    """A class or an individual: its URI, labels and parents (superclasses or rdf:types)."""

    uri: str
    labels: tuple[str, ...]
    parents: tuple[str, ...] = ()

    @property
    def label(self) -> str:
        """The preferred label (the first one found)."""
        return self.labels[0] if self.labels else local_name(self.uri)


class Ontology:
    """Classes and individuals of one ontology, indexed by normalised label."""

    def __init__(self, classes: dict[str, Term], individuals: dict[str, Term]) -> None:
        self.classes = classes
        self.individuals = individuals
        self._class_index = _index(classes)
        self._individual_index = _index(individuals)

    def match_class(self, name: str, threshold: float) -> str | None:
        """The URI of the class an entity type names (exact, then fuzzy), or None."""
        return _match(self._class_index, name, threshold)

    def match_individual(self, name: str, threshold: float) -> str | None:
        """The URI of the individual an entity name names (exact, then fuzzy), or None."""
        return _match(self._individual_index, name, threshold)

    def ancestors(self, uri: str) -> list[str]:
        """Every superclass of a class, nearest first (cycles and unknown URIs are skipped)."""
        seen: dict[str, None] = {}
        queue = deque(self.classes[uri].parents if uri in self.classes else ())
        while queue:
            parent = queue.popleft()
            if parent in seen or parent == uri or parent not in self.classes:
                continue
            seen[parent] = None
            queue.extend(self.classes[parent].parents)
        return list(seen)


def local_name(uri: str) -> str:
    """The part of a URI after its last `#` or `/`, split into words."""
    return split_words(re.split(r"[#/:]", uri.rstrip("/#"))[-1])


def split_words(text: str) -> str:
    """CamelCase, snake_case and kebab-case words as one spaced phrase."""
    return " ".join(_CAMEL.sub(" ", text.replace("_", " ").replace("-", " ")).split())


def label_key(text: str) -> str:
    """The form labels and names are compared in: words split, case-folded, normalised."""
    return normalise_name(split_words(text) if " " not in text.strip() else text)


def format_for(filename: str) -> str:
    """The rdflib format of a file by its extension; InvalidOntology for unknown ones."""
    suffix = PurePath(filename).suffix.lower()
    if suffix not in FORMATS:
        raise InvalidOntology(
            f"ontology {filename!r}: unknown extension {suffix or '(none)'}; use one of "
            f"{', '.join(sorted(FORMATS))}"
        )
    return FORMATS[suffix]


def parse_ontology(
    data: bytes, rdf_format: str, source: str = "ontology", settings: Settings | None = None
) -> Ontology:
    """Parse OWL/RDF bytes into an Ontology. Raises InvalidOntology: unsafe text (a DOCTYPE,
    a remote or file: JSON-LD context, over `ontology_max_bytes`) is refused before parsing,
    and a parse failure gets a generic message (the parser's reason goes to the log only)."""
    import rdflib  # imported here: only jobs with an ontology need it
    from rdflib.namespace import OWL, RDF, RDFS, SKOS

    max_bytes = (
        settings.ontology_max_bytes
        if settings
        else Settings.model_fields["ontology_max_bytes"].default
    )
    try:
        check_rdf_text(data, rdf_format, source, max_bytes)
    except UnsafeRdf as err:
        raise InvalidOntology(str(err)) from err
    graph = rdflib.Graph()
    try:
        graph.parse(io.BytesIO(data), format=rdf_format)
    except Exception as err:  # noqa: BLE001 - rdflib's parsers raise many unrelated types
        log.info("ontology_unparsable source=%r format=%s error=%r", source, rdf_format, err)
        raise InvalidOntology(
            f"{source} is not valid {rdf_format} RDF; check it with an RDF validator"
        ) from err
    uri = rdflib.URIRef
    class_uris = {
        str(s) for kind in (OWL.Class, RDFS.Class) for s in graph.subjects(RDF.type, kind)
        if isinstance(s, uri)
    }  # fmt: skip
    parents: dict[str, list[str]] = {}
    for child, parent in graph.subject_objects(RDFS.subClassOf):
        if isinstance(child, uri) and isinstance(parent, uri):
            class_uris.update((str(child), str(parent)))
            parents.setdefault(str(child), []).append(str(parent))
    class_uris -= _TOP
    types: dict[str, list[str]] = {}
    for subject, kind in graph.subject_objects(RDF.type):
        individual = isinstance(subject, uri) and str(subject) not in class_uris
        if individual and (str(kind) in class_uris or kind == OWL.NamedIndividual):
            types.setdefault(str(subject), []).append(str(kind))

    def literals(subject: str, *predicates: Any) -> list[str]:
        return [
            label
            for p in predicates
            for label in sorted(
                str(o)
                for o in graph.objects(uri(subject), p)
                if isinstance(o, rdflib.Literal) and o.language in (None, "", "en")
            )
        ]

    def labels(subject: str) -> tuple[str, ...]:
        # Preferred first: the first label names the class's node in the graph.
        preferred = literals(subject, SKOS.prefLabel, RDFS.label)
        alternatives = literals(subject, SKOS.altLabel)
        return tuple(dict.fromkeys([*preferred, local_name(subject), *alternatives]))

    classes = {
        c: Term(c, labels(c), tuple(p for p in parents.get(c, ()) if p not in _TOP))
        for c in sorted(class_uris)
    }
    individuals = {
        i: Term(i, labels(i), tuple(t for t in kinds if t in class_uris))
        for i, kinds in sorted(types.items())
    }
    if not classes and not individuals:
        raise InvalidOntology(f"{source} declares no classes or individuals")
    return Ontology(classes, individuals)


def _index(terms: dict[str, Term]) -> dict[str, str]:
    """Normalised label -> URI; the first URI (in sorted order) wins a shared label."""
    index: dict[str, str] = {}
    for term in terms.values():
        for label in term.labels:
            index.setdefault(label_key(label), term.uri)
    index.pop("", None)
    return index


def _match(index: dict[str, str], name: str, threshold: float) -> str | None:
    key = label_key(name)
    if not key:
        return None
    if key in index:
        return index[key]
    if len(key) < FUZZY_MIN_CHARS:
        return None  # short names fuzzy-match far too much
    from rapidfuzz import fuzz, process

    best = process.extractOne(key, list(index), scorer=fuzz.ratio, score_cutoff=threshold)
    return index[best[0]] if best else None


def store_ontology(
    blobs: BlobStore, data: bytes, filename: str, settings: Settings | None = None
) -> str:
    """Validate an ontology and keep it in the blob store; returns the key jobs carry."""
    rdf_format = format_for(filename)
    parse_ontology(data, rdf_format, filename, settings)
    extension = PurePath(filename).suffix.lower()
    key = f"{BLOB_PREFIX}{hashlib.sha256(data).hexdigest()}{extension}"
    blobs.put(key, io.BytesIO(data))
    return key


def store_ontology_file(blobs: BlobStore, path: Path) -> str:
    """`store_ontology` for a file on disk; InvalidOntology when it cannot be read."""
    try:
        data = path.read_bytes()
    except OSError as err:
        raise InvalidOntology(f"cannot read ontology file {path}: {err.strerror or err}") from err
    return store_ontology(blobs, data, path.name)


_lock = threading.Lock()


def load_stored_ontology(blobs: BlobStore, key: str) -> Ontology:
    """The parsed ontology behind a job's key (parsed once per process: keys name content)."""
    if not isinstance(key, str) or not key.startswith(BLOB_PREFIX):
        raise InvalidOntology(f"ontology option {key!r} is not a stored ontology key")
    with _lock:
        return _parsed(blobs, key)  # type: ignore[arg-type]  # stores hash by identity


@functools.lru_cache(maxsize=4)
def _parsed(blobs: Any, key: str) -> Ontology:
    try:
        with blobs.open(key) as stream:
            data = stream.read()
    except FileNotFoundError as err:
        raise InvalidOntology(f"stored ontology {key} is gone; pass the ontology again") from err
    return parse_ontology(data, format_for(key), key)
