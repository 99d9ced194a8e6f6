"""Table rows as graph citizens, end to end on the embedded stores through Celery worker threads:
a row's name cell is the entity a text names too, so GRAPH_PPR walks from a bio to the row (and
on through the row's foreign key), and deleting the table takes only what the rows supported."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from core.models.graph import entity_id
from core.models.vocabulary import ENTITY_COLLECTION, MENTIONS
from core.settings import Settings
from retrieval.models import SearchType
from retrieval.search import search
from runtime import Runtime
from tests.backends import add_files, succeeded, threaded_runtime
from workers.orchestration import cognify

DATASET = "parts"
VENDORS = "vendor_id,name,country\nV1,Halden Instruments,Norway\nV2,Brisa Motors,Portugal\n"
PARTS = "part_id,name,vendor_id\nK1,Fjord lens,V1\nK2,Tagus gearbox,V2\n"
TEXTS = {
    "mirela.txt": "Mirela Ionescu\nMirela Ionescu leads research at Corvex Labs in Cluj. "
    "Before that she built optical sensors at Halden Instruments for eight years.",
    "corvex.txt": "Corvex Labs\nCorvex Labs is a robotics start-up in Cluj. It was founded by "
    "Mirela Ionescu and Petru Lazar in 2017 and sells grading machines to orchards.",
    "petru.txt": "Petru Lazar\nPetru Lazar is the chief financial officer of Corvex Labs. "
    "He previously audited banks in Bucharest.",
    "orchards.txt": "Orchard machines\nGrading machines sort apples by size and colour. "
    "Cluj has several makers of such machines, and most sell to orchards in Moldova.",
}


@pytest.fixture(scope="module")
def runtime(
    tmp_path_factory: pytest.TempPathFactory, models: dict[str, object]
) -> Iterator[Runtime]:
    folder = tmp_path_factory.mktemp("parts")
    (folder / "vendors.csv").write_text(VENDORS)
    (folder / "parts.csv").write_text(PARTS)
    for name, text in TEXTS.items():
        (folder / name).write_text(text)
    home = tmp_path_factory.mktemp("home")
    with threaded_runtime(Settings(home=home, llm_base_url=None), models) as rt:
        report = add_files(rt, DATASET, sorted(folder.iterdir()))
        assert not report.rejected, report.rejected
        succeeded(rt, cognify(rt, DATASET), 600)
        yield rt


def test_a_rows_name_cell_is_the_entity_the_text_names(runtime: Runtime) -> None:
    eid = entity_id(DATASET, "Halden Instruments")
    [entity] = runtime.graph.get_nodes([eid])
    cited = {s.document_id for s in entity.support}
    assert len(cited) == 2, entity.support  # the bio and the vendors table
    [row] = [n for n in runtime.graph.find_nodes(DATASET, "TableRow") if n.name == "vendors V1"]
    edges = runtime.graph.edges_of([row.id], names=[MENTIONS], limit=10)
    assert {e.target for e in edges} == {eid}
    assert runtime.vectors.count(ENTITY_COLLECTION, dataset=DATASET) >= 4  # part names too


def test_graph_search_walks_from_the_bio_to_the_row_through_the_entity(runtime: Runtime) -> None:
    query = "In which country is the company where Mirela Ionescu built optical sensors?"
    response = search(runtime.retrieval(), query, [DATASET], SearchType.GRAPH_PPR, 5)
    rows = [r for r in response.results if r.sources[0].document_name == "vendors.csv"]
    assert rows and "Norway" in rows[0].text, [r.text for r in response.results]
    # The row's mass came through the entity the bio names, not by its text alone.
    assert any("Halden Instruments" in line for line in rows[0].evidence), rows[0].evidence


def test_deleting_the_table_keeps_the_entity_the_text_still_names(runtime: Runtime) -> None:
    before = runtime.graph.count(DATASET)
    again = succeeded(runtime, cognify(runtime, DATASET, mode="all"), 600)
    assert again.counts["documents"] == 6 and runtime.graph.count(DATASET) == before
    runtime.catalog.remove_named(DATASET, "vendors.csv")
    [entity] = runtime.graph.get_nodes([entity_id(DATASET, "Halden Instruments")])
    assert {s.document_id for s in entity.support} == {_doc(runtime, "mirela.txt")}
    assert not runtime.graph.get_nodes([entity_id(DATASET, "Brisa Motors")])  # only a row's
    assert runtime.graph.get_nodes([entity_id(DATASET, "Fjord lens")])  # parts.csv stays


def _doc(rt: Runtime, name: str) -> str:
    [doc] = rt.graph.find_nodes(DATASET, "Document", name=name)
    return doc.id
