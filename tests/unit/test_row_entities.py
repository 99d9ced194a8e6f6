"""A table row's name cells become the entities it MENTIONS (structured/row_entities.py)."""

from __future__ import annotations

import pytest

from core.models.graph import Support, entity_id, entity_type_id
from core.models.vocabulary import ENTITY_COLLECTION, IS_A, MENTIONS
from pipelines.built_graph import BuiltGraph
from pipelines.structured.foreign_keys import ColumnProfile
from pipelines.structured.row_entities import add_row_entities, name_columns, name_value

pytestmark = pytest.mark.unit


def col(name: str, numeric: bool = False, sample: tuple[str, ...] = ()) -> ColumnProfile:
    return ColumnProfile(name=name, numeric=numeric, sample=list(sample))


def test_name_columns_are_the_rows_own_name_or_a_textual_key() -> None:
    vendors = [col("vendor_id"), col("Vendor Name"), col("city"), col("founded", numeric=True)]
    assert name_columns("vendors", vendors, ["vendor_id"]) == ["Vendor Name"]
    books = [col("isbn", sample=("978-0-14-044913-6",)), col("title"), col("author_id")]
    assert name_columns("books", books, ["isbn"]) == ["title"]
    # Keyed by a name, not an id: the key names the row's subject.
    rivers = [col("river", sample=("Glomma", "Rio Negro")), col("length_km", numeric=True)]
    assert name_columns("rivers", rivers, ["river"]) == ["river"]
    # Numbers, ids and other tables' names are not this row's name.
    scores = [col("year", numeric=True), col("team_name"), col("points", numeric=True)]
    assert name_columns("scores", scores, ["year"]) == []


def test_name_values_skip_numbers_prose_and_empty_cells() -> None:
    assert name_value("  Halden   Instruments ") == "Halden Instruments"
    assert name_value("") is None and name_value("12.5") is None and name_value("7/3/2020") is None
    assert name_value("x" * 200) is None
    assert name_value("R2") == "R2"


def test_a_rows_name_is_an_entity_keyed_like_the_extractors() -> None:
    built = BuiltGraph()
    support = [Support(document_id="doc", chunk_id="row-1")]
    row = {"vendor_id": "V7", "Vendor Name": "Halden Instruments", "city": "Bergen"}
    ids = add_row_entities(built, "ds", "vendors", row, ["Vendor Name"], support)
    eid = entity_id("ds", "halden instruments")  # what a text naming it would get
    assert ids == [eid]
    assert built.nodes[eid].name == "Halden Instruments" and built.nodes[eid].support == support
    assert ("row-1", MENTIONS, eid) in built.edges
    assert (eid, IS_A, entity_type_id("ds", "vendor")) in built.edges
    assert [item.id for item in built.to_embed[ENTITY_COLLECTION]] == [eid]
    # A name whose vector is kept from an earlier run is not embedded again.
    again = BuiltGraph()
    add_row_entities(again, "ds", "vendors", row, ["Vendor Name"], support, embedded={eid})
    assert ENTITY_COLLECTION not in again.to_embed and ("row-1", MENTIONS, eid) in again.edges


def test_a_row_without_a_name_cell_adds_nothing() -> None:
    built = BuiltGraph()
    support = [Support(document_id="doc", chunk_id="row-2")]
    row = {"Vendor Name": ""}
    assert add_row_entities(built, "ds", "vendors", row, ["Vendor Name"], support) == []
    assert not built.nodes and not built.edges
