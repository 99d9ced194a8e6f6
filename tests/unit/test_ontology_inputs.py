"""Ontology text from outside cannot make cogmill fetch, probe files or expand entities.

Unguarded, rdflib followed JSON-LD `@context` URLs (http: and file:) and expanded
RDF/XML entities (712 bytes, 60 s). Such text is refused before rdflib sees it, with a
message that names no URL, path or library reason.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

from core.ontology import InvalidOntology, parse_ontology, store_ontology
from core.settings import Settings
from core.stores.blob_fs import FileBlobStore

pytestmark = pytest.mark.unit

EX = "http://example.org/o#"
CONTEXT = {"@context": {"ex": EX, "rdfs": "http://www.w3.org/2000/01/rdf-schema#"}}
CLASS = {"@id": "ex:City", "@type": "rdfs:Class"}


class _Counting(BaseHTTPRequestHandler):
    hits: list[str] = []

    def do_GET(self) -> None:  # noqa: N802 - http.server's name
        type(self).hits.append(self.path)
        body = json.dumps(CONTEXT).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/ld+json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args: Any) -> None:
        pass


@pytest.fixture
def context_server() -> Iterator[tuple[str, list[str]]]:
    """A local HTTP server that serves a valid JSON-LD context and counts the requests."""
    _Counting.hits = []
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Counting)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}", _Counting.hits
    finally:
        server.shutdown()
        server.server_close()


def _jsonld(document: Any) -> bytes:
    return json.dumps(document).encode()


def test_the_counting_server_is_reachable(context_server: tuple[str, list[str]]) -> None:
    """The server the next test relies on does count a fetch (so zero hits means something)."""
    import urllib.request

    url, hits = context_server
    with urllib.request.urlopen(f"{url}/probe.jsonld", timeout=30) as reply:
        assert json.loads(reply.read()) == CONTEXT
    assert hits == ["/probe.jsonld"]


def test_remote_contexts_are_refused_without_a_fetch(context_server: tuple[str, list[str]]) -> None:
    url, hits = context_server
    remote = f"{url}/ctx.jsonld"
    documents = {
        "string context": {"@context": remote, **CLASS},
        "context list": {"@context": [remote, CONTEXT["@context"]], **CLASS},
        "@import": {"@context": {"@import": remote, "ex": EX}, **CLASS},
        "nested node": {**CONTEXT, "@graph": [{"@context": remote, **CLASS}]},
        "scoped term": {"@context": {"ex": EX, "t": {"@id": "ex:t", "@context": remote}}, **CLASS},
    }
    for case, document in documents.items():
        with pytest.raises(InvalidOntology, match="remote or file @context") as caught:
            parse_ontology(_jsonld(document), "json-ld", "o.jsonld")
        assert url not in str(caught.value), case
    assert hits == []


def test_a_file_context_is_refused_alike_whether_or_not_the_file_exists(tmp_path: Path) -> None:
    present = tmp_path / "ctx.jsonld"
    present.write_text(json.dumps(CONTEXT))
    messages = set()
    for target in (present, tmp_path / "missing.jsonld"):
        document = {"@context": target.as_uri(), **CLASS}
        with pytest.raises(InvalidOntology) as caught:
            parse_ontology(_jsonld(document), "json-ld", "o.jsonld")
        messages.add(str(caught.value))
    assert len(messages) == 1
    assert str(tmp_path) not in messages.pop()


def test_an_inline_context_still_parses() -> None:
    document = {**CONTEXT, "@graph": [CLASS, {"@id": "ex:Oslo", "@type": "ex:City"}]}
    ontology = parse_ontology(_jsonld(document), "json-ld", "o.jsonld")
    assert f"{EX}City" in ontology.classes and f"{EX}Oslo" in ontology.individuals


BOMB = """<?xml version="1.0"?>
<!DOCTYPE rdf:RDF [
 <!ENTITY a "aaaaaaaaaa">
 <!ENTITY b "&a;&a;&a;&a;&a;&a;&a;&a;&a;&a;">
 <!ENTITY c "&b;&b;&b;&b;&b;&b;&b;&b;&b;&b;">
 <!ENTITY d "&c;&c;&c;&c;&c;&c;&c;&c;&c;&c;">
 <!ENTITY e "&d;&d;&d;&d;&d;&d;&d;&d;&d;&d;">
 <!ENTITY f "&e;&e;&e;&e;&e;&e;&e;&e;&e;&e;">
 <!ENTITY g "&f;&f;&f;&f;&f;&f;&f;&f;&f;&f;">
]>
<rdf:RDF xmlns:rdf="http://www.w3.org/1999/02/22-rdf-syntax-ns#"
         xmlns:rdfs="http://www.w3.org/2000/01/rdf-schema#">
  <rdfs:Class rdf:about="http://example.org/o#City"><rdfs:label>&g;</rdfs:label></rdfs:Class>
</rdf:RDF>
"""


@pytest.mark.parametrize("encoding", ["utf-8", "utf-16"])
def test_an_entity_bomb_is_refused_before_parsing(encoding: str) -> None:
    data = BOMB.encode(encoding)
    started = time.thread_time()
    with pytest.raises(InvalidOntology, match="declares a DOCTYPE or entities"):
        parse_ontology(data, "xml", "bomb.owl")
    assert time.thread_time() - started < 0.5  # CPU time of this thread: load does not count


def test_a_doctype_without_entities_is_refused_too() -> None:
    xml = BOMB.split("]>", 1)[1].replace("&g;", "City")
    parse_ontology(xml.encode(), "xml", "ok.owl")  # the same text without the DOCTYPE is fine
    with pytest.raises(InvalidOntology, match="DOCTYPE"):
        parse_ontology(b'<!doctype rdf:RDF SYSTEM "file:///etc/passwd">' + xml.encode(), "xml")


def test_ontology_size_is_capped_by_settings(tmp_path: Path) -> None:
    data = _jsonld({**CONTEXT, **CLASS})
    with pytest.raises(InvalidOntology, match="COGMILL_ONTOLOGY_MAX_BYTES"):
        store_ontology(FileBlobStore(tmp_path), data, "o.jsonld", Settings(ontology_max_bytes=50))
    assert store_ontology(FileBlobStore(tmp_path), data, "o.jsonld", Settings())


def test_parse_errors_are_generic() -> None:
    with pytest.raises(InvalidOntology) as caught:
        parse_ontology(b"<rdf:RDF><unclosed>", "xml", "bad.owl")
    assert str(caught.value) == "bad.owl is not valid xml RDF; check it with an RDF validator"
