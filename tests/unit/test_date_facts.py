"""Dating a batch's relationships offline (pipelines/date_facts.py): every relationship dated,
the functional ones grouped, and the builder putting both on the edges."""

from __future__ import annotations

import pytest

from core.facts.functional import FunctionalRelations
from core.models.extraction import ExtractedEntity, ExtractedRelationship, KnowledgeGraph
from core.temporal import days_from_civil
from pipelines.date_facts import DateFacts, sentence_of
from pipelines.graph_builder import build_graph
from pipelines.models import Chunk, DocumentRef, ExtractedBatch

pytestmark = pytest.mark.unit


def batch(
    text: str,
    rels: list[tuple[str, str, str]],
    *,
    date: str = "",
    ext: str = "txt",
    types: dict[str, str] | None = None,
) -> ExtractedBatch:
    names = {n for s, _, t in rels for n in (s, t)}
    graph = KnowledgeGraph(
        entities=[ExtractedEntity(name=n, type=(types or {}).get(n, "Thing")) for n in names],
        relationships=[
            ExtractedRelationship(source=s, name=r, target=t, description=text) for s, r, t in rels
        ],
    )
    doc = DocumentRef(
        id="d1", dataset="ds", name=f"d1.{ext}", blob_key="k", extension=ext, document_date=date
    )
    chunk = Chunk(
        id="c1", document_id="d1", document_name=doc.name, index=0, text=text, token_count=10
    )
    return ExtractedBatch(dataset="ds", documents=[doc], chunks=[chunk], graphs=[graph])


def test_relationships_get_their_dates_and_groups():
    text = "Teo Varga became CEO of Holbeck Foods in March 2023. He founded Brix in 2010."
    done = DateFacts(FunctionalRelations()).run(
        batch(text, [("Teo Varga", "ceo_of", "Holbeck Foods"), ("Teo Varga", "founded", "Brix")])
    )
    ceo, founded = done[0].relationships
    assert (ceo.start, ceo.end, ceo.group, ceo.side) == (
        days_from_civil(2023, 3, 1),
        None,
        "ceo",
        "target",
    )
    assert founded.group == "" and founded.start is not None


def test_the_document_date_dates_what_the_text_does_not():
    done = DateFacts(FunctionalRelations()).run(
        batch("Jon Berg lives in Porto.", [("Jon Berg", "live_in", "Porto")], date="2024-05-02")
    )
    [rel] = done[0].relationships
    assert (rel.start, rel.group) == (days_from_civil(2024, 5, 2), "residence")


def test_an_emails_date_header_dates_it():
    text = "Subject: news\nDate: Tue, 14 Mar 2023 10:00:00 +0000\n\nJon Berg lives in Porto."
    done = DateFacts(FunctionalRelations()).run(
        batch(text, [("Jon Berg", "live_in", "Porto")], ext="eml")
    )
    assert done[0].relationships[0].start == days_from_civil(2023, 3, 14)


def test_ending_relations_and_relations_to_dates():
    text = "In 2018 Jon Berg left Altamira Bank. He moved in 2019."
    done = DateFacts(FunctionalRelations()).run(
        batch(
            text,
            [("Jon Berg", "left", "Altamira Bank"), ("Jon Berg", "moved_to", "2019")],
            types={"2019": "Date"},
        )
    )
    left, moved = done[0].relationships
    assert (left.group, left.side, left.start) == ("~ends", "both", days_from_civil(2018, 1, 1))
    assert moved.group == ""


def test_without_supersession_nothing_is_functional_but_all_is_dated():
    text = "Mara Quist became CEO of Holbeck Foods in 2019."
    done = DateFacts(FunctionalRelations(defaults=False)).run(
        batch(text, [("Mara Quist", "ceo_of", "Holbeck Foods")])
    )
    [rel] = done[0].relationships
    assert rel.group == "" and rel.start == days_from_civil(2019, 1, 1)


def test_the_builder_puts_claims_and_groups_on_the_edges():
    text = "Mara Quist became CEO of Holbeck Foods in 2019."
    done = DateFacts(FunctionalRelations()).run(
        batch(text, [("Mara Quist", "ceo_of", "Holbeck Foods")])
    )
    built = build_graph("ds", batch(text, []).chunks, done)
    [edge] = [e for e in built.edges.values() if e.name == "ceo_of"]
    assert edge.properties["fact_group"] == "ceo" and edge.properties["fact_side"] == "target"
    assert [(c.document_id, c.chunk_id, c.start) for c in edge.claims] == [
        ("d1", "c1", days_from_civil(2019, 1, 1)),
    ]


def test_a_sentence_naming_both_ends_is_found_for_a_dateless_description():
    text = "Intro. In 2020 Ann joined Brix as a designer. Later, more."
    assert sentence_of(text, "Ann", "Brix") == "In 2020 Ann joined Brix as a designer."
    assert sentence_of(text, "Zed", "Nothing") == ""
