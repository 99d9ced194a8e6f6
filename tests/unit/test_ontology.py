"""Ontologies: parsing OWL/RDF, matching names and types, writing the class hierarchy."""

from __future__ import annotations

from pathlib import Path

import pytest

from core.models.extraction import ExtractedEntity, KnowledgeGraph
from core.models.graph import entity_id, entity_type_id
from core.models.vocabulary import SUBCLASS_OF
from core.ontology import (
    InvalidOntology,
    format_for,
    load_stored_ontology,
    parse_ontology,
    store_ontology,
)
from core.stores.blob_fs import FileBlobStore
from pipelines.align_ontology import OntologyAligner
from pipelines.graph_builder import build_graph
from pipelines.models import Chunk

EX = "http://example.org/science#"
OWL_XML = f"""<?xml version="1.0"?>
<rdf:RDF xmlns:rdf="http://www.w3.org/1999/02/22-rdf-syntax-ns#"
         xmlns:rdfs="http://www.w3.org/2000/01/rdf-schema#"
         xmlns:owl="http://www.w3.org/2002/07/owl#"
         xmlns:skos="http://www.w3.org/2004/02/skos/core#">
  <owl:Class rdf:about="{EX}Agent"/>
  <owl:Class rdf:about="{EX}Person"><rdfs:subClassOf rdf:resource="{EX}Agent"/></owl:Class>
  <owl:Class rdf:about="{EX}Scientist">
    <rdfs:subClassOf rdf:resource="{EX}Person"/>
    <skos:altLabel>Researcher</skos:altLabel>
  </owl:Class>
  <owl:Class rdf:about="{EX}ResearchInstitute"/>
  <owl:NamedIndividual rdf:about="{EX}MarieCurie">
    <rdf:type rdf:resource="{EX}Scientist"/>
  </owl:NamedIndividual>
  <rdf:Description rdf:about="{EX}Sorbonne">
    <rdf:type rdf:resource="{EX}ResearchInstitute"/>
    <rdfs:label>Sorbonne University</rdfs:label>
  </rdf:Description>
</rdf:RDF>
"""
TURTLE = f"""@prefix ex: <{EX}> .
@prefix rdfs: <http://www.w3.org/2000/01/rdf-schema#> .
ex:City rdfs:subClassOf ex:Place .
ex:Warsaw a ex:City ; rdfs:label "Warsaw" .
"""


def test_owl_classes_individuals_labels_and_hierarchy_are_read() -> None:
    onto = parse_ontology(OWL_XML.encode(), "xml")
    assert set(onto.classes) == {
        f"{EX}{n}" for n in ("Agent", "Person", "Scientist", "ResearchInstitute")
    }
    assert onto.ancestors(f"{EX}Scientist") == [f"{EX}Person", f"{EX}Agent"]
    assert onto.individuals[f"{EX}MarieCurie"].parents == (f"{EX}Scientist",)
    assert onto.individuals[f"{EX}Sorbonne"].label == "Sorbonne University"
    assert onto.classes[f"{EX}ResearchInstitute"].label == "Research Institute"


def test_matching_is_exact_first_then_fuzzy_above_the_threshold() -> None:
    onto = parse_ontology(OWL_XML.encode(), "xml")
    assert onto.match_individual("Marie Curie", 90) == f"{EX}MarieCurie"  # local name split
    assert onto.match_individual("marie  curie.", 90) == f"{EX}MarieCurie"
    assert onto.match_individual("Marie Curi", 90) == f"{EX}MarieCurie"  # fuzzy, ratio ~95
    assert onto.match_individual("Mary Currie", 90) is None  # too far at 90
    assert onto.match_individual("Mary Currie", 70) == f"{EX}MarieCurie"
    assert onto.match_class("ResearchInstitute", 90) == f"{EX}ResearchInstitute"
    assert onto.match_class("Researcher", 90) == f"{EX}Scientist"  # skos:altLabel
    assert onto.match_class("Scientists", 90) == f"{EX}Scientist"
    assert onto.match_class("Planet", 90) is None


def test_turtle_is_read_and_formats_follow_the_extension() -> None:
    onto = parse_ontology(TURTLE.encode(), format_for("places.ttl"))
    assert onto.ancestors(f"{EX}City") == [f"{EX}Place"]
    assert onto.match_individual("Warsaw", 90) == f"{EX}Warsaw"
    assert format_for("a.OWL") == "xml" and format_for("b.jsonld") == "json-ld"
    with pytest.raises(InvalidOntology, match="unknown extension .pdf"):
        format_for("x.pdf")


def test_broken_or_empty_ontologies_are_rejected_with_the_reason() -> None:
    with pytest.raises(InvalidOntology, match="not valid xml RDF"):
        parse_ontology(b"<rdf:RDF><unclosed>", "xml", "bad.owl")
    with pytest.raises(InvalidOntology, match="no classes or individuals"):
        parse_ontology(b"@prefix ex: <http://e/> . ex:a ex:b ex:c .", "turtle", "empty.ttl")


def test_stored_ontologies_are_keyed_by_content_and_reloaded(tmp_path: Path) -> None:
    blobs = FileBlobStore(tmp_path)
    key = store_ontology(blobs, OWL_XML.encode(), "science.owl")
    assert key.startswith("ontologies/") and key.endswith(".owl")
    assert store_ontology(blobs, OWL_XML.encode(), "copy.owl") == key
    assert f"{EX}Scientist" in load_stored_ontology(blobs, key).classes
    with pytest.raises(InvalidOntology, match="not a stored ontology key"):
        load_stored_ontology(blobs, "documents/x")
    # Storing checks only what is linear to check (malformed XML); the worker parses the rest.
    with pytest.raises(InvalidOntology, match="not valid xml RDF"):
        store_ontology(blobs, b"<rdf:RDF><unclosed>", "g.owl")
    garbage = store_ontology(blobs, b"garbage", "g.ttl")
    with pytest.raises(InvalidOntology, match="not valid turtle RDF"):
        load_stored_ontology(blobs, garbage)


def test_aligned_graphs_carry_uris_and_write_the_class_hierarchy() -> None:
    onto = parse_ontology(OWL_XML.encode(), "xml")
    graph = KnowledgeGraph(
        entities=[
            ExtractedEntity(name="Marie Curie", type="Person"),
            ExtractedEntity(name="Sorbonne University", type="Organization"),
            ExtractedEntity(name="Radium", type="Element"),
        ]
    )
    [aligned] = OntologyAligner(onto, 90).align([graph])
    assert graph.ontology is None  # the input is not changed
    chunk = Chunk(id="c1", document_id="d1", document_name="a", index=0, text="t", token_count=1)
    built = build_graph("ds", [chunk], [aligned])
    curie = built.nodes[entity_id("ds", "Marie Curie")]
    assert curie.properties["ontology_uri"] == f"{EX}MarieCurie"
    assert "ontology_uri" not in built.nodes[entity_id("ds", "Radium")].properties
    types = {n.name: n for n in built.nodes.values() if n.type == "EntityType"}
    assert types["Person"].properties["ontology_uri"] == f"{EX}Person"
    assert types["Agent"].properties["ontology_uri"] == f"{EX}Agent"
    assert "ontology_uri" not in types["Element"].properties
    subclass = {
        (built.nodes[s].name, built.nodes[t].name) for s, n, t in built.edges if n == SUBCLASS_OF
    }
    assert subclass == {("Scientist", "Person"), ("Person", "Agent")}
    is_a = {(built.nodes[s].name, built.nodes[t].name) for s, n, t in built.edges if n == "IS_A"}
    assert ("Marie Curie", "Scientist") in is_a and ("Marie Curie", "Person") in is_a
    assert ("Sorbonne University", "Research Institute") in is_a
    assert all(e.support[0].chunk_id == "c1" for e in built.edges.values())
    assert entity_type_id("ds", "Scientist") in built.nodes


def test_a_threshold_outside_its_range_is_refused() -> None:
    onto = parse_ontology(TURTLE.encode(), "turtle")
    with pytest.raises(ValueError, match="threshold"):
        OntologyAligner(onto, 0)
