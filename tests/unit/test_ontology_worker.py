"""Ontology text from outside is not parsed where it is received: storing it
runs only checks linear in its size, and the worker parses it in a child process stopped
after `ontology_parse_seconds`."""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest

from core.ontology import (
    InvalidOntology,
    check_ontology,
    load_stored_ontology,
    parse_bounded,
    parse_ontology,
    store_ontology,
)
from core.settings import Settings
from core.stores.blob_fs import FileBlobStore
from tests.unit.test_ontology import OWL_XML, TURTLE

LIMITS = {"seconds": 120.0, "max_bytes": 16 * 1024 * 1024}  # generous: the machine is shared


def big_turtle(triples: int) -> bytes:
    """A valid Turtle ontology of `triples` class declarations (seconds to parse)."""
    head = "@prefix ex: <http://example.org/big#> .\n"
    head += "@prefix owl: <http://www.w3.org/2002/07/owl#> .\n"
    return (head + "".join(f"ex:C{i} a owl:Class .\n" for i in range(triples))).encode()


def test_the_cheap_checks_refuse_malformed_xml_and_json_but_parse_no_rdf() -> None:
    with pytest.raises(InvalidOntology, match="bad.owl is not valid xml RDF"):
        check_ontology(b"<rdf:RDF><unclosed>", "bad.owl")
    with pytest.raises(InvalidOntology, match="not valid JSON-LD"):
        check_ontology(b'{"@context": {', "bad.jsonld")
    with pytest.raises(InvalidOntology, match="not valid turtle RDF"):
        check_ontology("ex:a ex:b ex:c .".encode("utf-16"), "bad.ttl")  # not UTF-8
    with pytest.raises(InvalidOntology, match="COGMILL_ONTOLOGY_MAX_BYTES"):
        check_ontology(TURTLE.encode(), "o.ttl", Settings(ontology_max_bytes=10))
    # Broken Turtle and RDF/XML that is well-formed XML but not RDF pass: only a parse tells.
    assert check_ontology(b"@prefix ex: <http://e/> . ex:a ex:b", "broken.ttl") == "turtle"
    assert check_ontology(b"<rdf:RDF><a>not rdf</a></rdf:RDF>", "odd.owl") == "xml"


def test_the_child_process_reads_what_an_in_process_parse_reads() -> None:
    for data, rdf_format in ((OWL_XML.encode(), "xml"), (TURTLE.encode(), "turtle")):
        here = parse_ontology(data, rdf_format, "o")
        child = parse_bounded(data, rdf_format, "o", **LIMITS)
        assert child.classes == here.classes and child.individuals == here.individuals
        assert child.ancestors(next(iter(here.classes))) == here.ancestors(next(iter(here.classes)))


def test_a_parse_failure_in_the_child_is_generic_and_the_details_are_logged(
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level("INFO", logger="cogmill.ontology")
    with pytest.raises(InvalidOntology) as caught:
        parse_bounded(b"@prefix ex: <http://e/> . ex:a ex:b", "turtle", "g.ttl", **LIMITS)
    assert str(caught.value) == "g.ttl is not valid turtle RDF; check it with an RDF validator"
    assert "ontology_unparsable" in caplog.text and "g.ttl" in caplog.text


@pytest.mark.slow
def test_a_parse_over_the_time_bound_is_stopped(tmp_path: Path) -> None:
    data = big_turtle(200_000)  # about 6 MB: far longer than a second to parse
    blobs = FileBlobStore(tmp_path)
    key = store_ontology(blobs, data, "big.ttl")
    settings = Settings(ontology_parse_seconds=1.0)
    started = time.monotonic()
    with pytest.raises(InvalidOntology, match=r"longer than 1 s .*COGMILL_ONTOLOGY_PARSE_SECONDS"):
        load_stored_ontology(blobs, key, settings)
    # The child was killed at the bound: nowhere near the parse's own time.
    assert time.monotonic() - started < 60


def test_a_stored_ontology_is_parsed_on_load(tmp_path: Path) -> None:
    blobs = FileBlobStore(tmp_path)
    key = store_ontology(
        blobs,
        json.dumps(
            {
                "@context": {
                    "ex": "http://example.org/o#",
                    "rdfs": "http://www.w3.org/2000/01/rdf-schema#",
                },
                "@graph": [{"@id": "ex:City", "@type": "rdfs:Class"}],
            }
        ).encode(),
        "o.jsonld",
    )
    assert "http://example.org/o#City" in load_stored_ontology(blobs, key).classes
