"""Ontologies (OWL/RDF via rdflib): an index of classes and individuals to match entities against.

Classes are subjects typed owl:Class / rdfs:Class or named in rdfs:subClassOf; individuals are
owl:NamedIndividuals and subjects typed with a known class. Labels come from rdfs:label,
skos:prefLabel, skos:altLabel and the local name split at CamelCase and underscores
("MarieCurie" -> "Marie Curie"). Matching is on normalised labels: exact first, then fuzzy
(rapidfuzz ratio) at or above a threshold, for names of at least FUZZY_MIN_CHARS characters.

Ontology files can be large, so a job carries only the blob key (`ontologies/<sha256>.<ext>`);
the content hash in the key lets each process parse an ontology once and reuse it.

Text from outside is never parsed where it is received (a parse can take minutes): `store_ontology`
only runs checks linear in its size (`check_ontology`), and the worker that aligns parses it in
a child process stopped after `ontology_parse_seconds` (`parse_bounded`), so a slow parse costs
neither a request thread nor more than its time bound.
"""

from __future__ import annotations

import functools
import hashlib
import io
import json
import logging
import re
import subprocess
import sys
import threading
import xml.parsers.expat
from collections import deque
from dataclasses import dataclass
from pathlib import Path, PurePath
from typing import Any

from core.child_process import module_command
from core.errors import InvalidInput
from core.models.graph import normalise_name
from core.ports import BlobStore
from core.rdf_guard import UnsafeRdf, check_rdf_text
from core.settings import Settings

FORMATS = {
    ".owl": "xml",
    ".rdf": "xml",
    ".xml": "xml",
    ".ttl": "turtle",
    ".nt": "nt",
    ".n3": "n3",
    ".jsonld": "json-ld",
    ".json": "json-ld",
}
BLOB_PREFIX = "ontologies/"
FUZZY_MIN_CHARS = 4
# Top classes every ontology shares; matching them says nothing.
_TOP = frozenset(
    {
        "http://www.w3.org/2002/07/owl#Thing",
        "http://www.w3.org/2000/01/rdf-schema#Resource",
        "http://www.w3.org/2002/07/owl#Nothing",
    }
)
_CAMEL = re.compile(r"(?<=[a-z0-9])(?=[A-Z])|(?<=[A-Z])(?=[A-Z][a-z])")
log = logging.getLogger("cogmill.ontology")


class InvalidOntology(InvalidInput):
    """An ontology file cogmill cannot read; the message says what is wrong."""

    code = "invalid_ontology"


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

    def __init__(
        self,
        classes: dict[str, Term],
        individuals: dict[str, Term],
        functional: dict[str, str] | None = None,
    ) -> None:
        self.classes = classes
        self.individuals = individuals
        # Property label -> the end that holds one value: "source" for an
        # owl:FunctionalProperty, "target" for an owl:InverseFunctionalProperty.
        self.functional = functional or {}
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


def _unparsable(source: str, rdf_format: str) -> InvalidOntology:
    return InvalidOntology(
        f"{source} is not valid {rdf_format} RDF; check it with an RDF validator"
    )


def _settings(settings: Settings | None) -> Settings:
    return settings if settings is not None else Settings()


def check_ontology(data: bytes, filename: str, settings: Settings | None = None) -> str:
    """The rdflib format of an ontology sent with a job, after checks that take time linear in
    its size and parse no RDF: a known extension, at most `ontology_max_bytes`, no DOCTYPE or
    entities, inline JSON-LD contexts, well-formed XML (expat) or UTF-8 text. Raises
    InvalidOntology; what only a full parse finds fails the job's documents in the worker."""
    rdf_format = format_for(filename)
    try:
        check_rdf_text(data, rdf_format, filename, _settings(settings).ontology_max_bytes)
    except UnsafeRdf as err:
        raise InvalidOntology(str(err)) from err
    try:
        if rdf_format == "xml":  # no DOCTYPE (checked above): nothing to expand or fetch
            xml.parsers.expat.ParserCreate().Parse(data, True)
        elif rdf_format != "json-ld":  # JSON-LD was read as JSON above
            data.decode("utf-8")
    except (xml.parsers.expat.ExpatError, UnicodeDecodeError) as err:
        log.info("ontology_malformed source=%r format=%s error=%r", filename, rdf_format, err)
        raise _unparsable(filename, rdf_format) from err
    return rdf_format


def parse_bounded(
    data: bytes, rdf_format: str, source: str, *, seconds: float, max_bytes: int
) -> Ontology:
    """`parse_ontology` in a child process stopped after `seconds`, so a slow parse ties up
    no thread of the caller for longer. Raises InvalidOntology with a generic message (the
    parser's reason goes to the log)."""
    command, env = module_command("core.ontology", rdf_format, source, str(max_bytes))
    try:
        done = subprocess.run(
            command, input=data, capture_output=True, timeout=seconds, check=False, env=env
        )
    except subprocess.TimeoutExpired as err:  # run() killed the child
        log.warning("ontology_parse_timeout source=%r seconds=%s", source, seconds)
        raise InvalidOntology(
            f"{source} took longer than {seconds:g} s to parse "
            "(COGMILL_ONTOLOGY_PARSE_SECONDS); send a smaller ontology"
        ) from err
    try:
        answer = json.loads(done.stdout)
    except ValueError:
        answer = None
    if done.returncode != 0 or not isinstance(answer, dict):
        log.warning(
            "ontology_parse_failed source=%r exit=%s stderr=%r",
            source,
            done.returncode,
            done.stderr[-2000:],
        )
        raise _unparsable(source, rdf_format)
    if "error" in answer:
        log.info(
            "ontology_unparsable source=%r format=%s error=%s",
            source,
            rdf_format,
            answer.get("detail"),
        )
        raise InvalidOntology(answer["error"])
    functional = answer.get("functional") or {}
    return Ontology(_terms(answer["classes"]), _terms(answer["individuals"]), functional)


def _terms(raw: dict[str, list[list[str]]]) -> dict[str, Term]:
    return {uri: Term(uri, tuple(labels), tuple(parents)) for uri, (labels, parents) in raw.items()}


def _parse_child(argv: list[str]) -> None:
    """`python -m core.ontology FORMAT SOURCE MAX_BYTES`: parse stdin; print its classes and
    individuals as JSON, or the InvalidOntology message and the parser's reason."""
    rdf_format, source, max_bytes = argv
    try:
        onto = parse_ontology(sys.stdin.buffer.read(), rdf_format, source, int(max_bytes))
    except InvalidOntology as err:
        json.dump({"error": str(err), "detail": repr(err.__cause__)}, sys.stdout)
        return
    kinds = {"classes": onto.classes, "individuals": onto.individuals}
    answer: dict[str, Any] = {
        kind: {u: [t.labels, t.parents] for u, t in terms.items()} for kind, terms in kinds.items()
    }
    answer["functional"] = onto.functional
    json.dump(answer, sys.stdout)


def parse_ontology(
    data: bytes, rdf_format: str, source: str = "ontology", max_bytes: int | None = None
) -> Ontology:
    """Parse OWL/RDF bytes into an Ontology, in this process (text from outside goes through
    `parse_bounded`). Raises InvalidOntology: unsafe text (a DOCTYPE, a remote or file:
    JSON-LD context, over `max_bytes`, by default the settings' `ontology_max_bytes`) is
    refused before parsing, and a parse failure gets a generic message (the parser's reason
    is the exception's cause, for the log only)."""
    import rdflib  # imported here: only jobs with an ontology need it
    from rdflib.namespace import OWL, RDF, RDFS, SKOS

    if max_bytes is None:
        max_bytes = Settings.model_fields["ontology_max_bytes"].default
    try:
        check_rdf_text(data, rdf_format, source, max_bytes)
    except UnsafeRdf as err:
        raise InvalidOntology(str(err)) from err
    graph = rdflib.Graph()
    try:
        graph.parse(io.BytesIO(data), format=rdf_format)
    except Exception as err:  # noqa: BLE001 - rdflib's parsers raise many unrelated types
        log.info("ontology_unparsable source=%r format=%s error=%r", source, rdf_format, err)
        raise _unparsable(source, rdf_format) from err
    uri = rdflib.URIRef
    class_uris = {
        str(s)
        for kind in (OWL.Class, RDFS.Class)
        for s in graph.subjects(RDF.type, kind)
        if isinstance(s, uri)
    }
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
    functional: dict[str, str] = {}
    for kind, side in (
        (OWL.FunctionalProperty, "source"),
        (OWL.InverseFunctionalProperty, "target"),
    ):
        for prop in sorted(str(p) for p in graph.subjects(RDF.type, kind) if isinstance(p, uri)):
            for label in labels(prop):
                functional.setdefault(label, side)
    return Ontology(classes, individuals, functional)


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
    """Check an ontology cheaply (`check_ontology`; the worker parses it) and keep it in the
    blob store; returns the key jobs carry. Raises InvalidOntology."""
    check_ontology(data, filename, settings)
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


def load_stored_ontology(blobs: BlobStore, key: str, settings: Settings | None = None) -> Ontology:
    """The parsed ontology behind a job's key (parsed once per process: keys name content),
    within `ontology_parse_seconds` (`parse_bounded`). Raises InvalidOntology."""
    if not isinstance(key, str) or not key.startswith(BLOB_PREFIX):
        raise InvalidOntology(f"ontology option {key!r} is not a stored ontology key")
    limits = _settings(settings)
    seconds, max_bytes = limits.ontology_parse_seconds, limits.ontology_max_bytes
    with _lock:
        return _parsed(blobs, key, seconds, max_bytes)  # type: ignore[arg-type]  # hash: identity


@functools.lru_cache(maxsize=4)
def _parsed(blobs: Any, key: str, seconds: float, max_bytes: int) -> Ontology:
    try:
        with blobs.open(key) as stream:
            data = stream.read()
    except FileNotFoundError as err:
        raise InvalidOntology(f"stored ontology {key} is gone; pass the ontology again") from err
    return parse_bounded(data, format_for(key), key, seconds=seconds, max_bytes=max_bytes)


if __name__ == "__main__":
    _parse_child(sys.argv[1:])
