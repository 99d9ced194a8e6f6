"""The entity key index and the reconcile built on it: candidates share a match key, an
ambiguous initial is never merged, and a removed dataset's sets go with it."""

from __future__ import annotations

from pathlib import Path

from core.entity_keys import FORMAT, FORMAT_KEY, PREFIX, EntityKeyIndex
from core.models.graph import Node, entity_id
from core.settings import Settings
from core.stores.sqlite.state import SQLiteStateStore
from pipelines.definitions import get_pipeline
from pipelines.models import WriteReport
from pipelines.reconcile_entities import ReconcileEntities
from tests.backends import installed_runtime


def test_candidates_are_the_stored_names_an_alias_rule_could_join(tmp_path: Path) -> None:
    index = EntityKeyIndex(SQLiteStateStore(tmp_path / "state.db"))
    first = index.file_and_find(
        "d", {"e1": "New York City", "e2": "Maria Lopez", "e3": "Carlos Lopez"}
    )
    # Two full names of one surname are never candidates: no alias rule joins them.
    assert first == {"e1": {}, "e2": {}, "e3": {}}
    later = index.file_and_find("d", {"e4": "NYC", "e5": "M. Lopez", "e6": "Tolkien"})
    assert later == {
        "e4": {"e1": "New York City"},
        "e5": {"e2": "Maria Lopez", "e3": "Carlos Lopez"},
        "e6": {},
    }
    # The abbreviations are found from the full names' side too, also without filing again.
    assert index.find("d", {"e2": "Maria Lopez"}) == {"e2": {"e5": "M. Lopez"}}
    assert index.file_and_find("d", {"e7": "Maria Lopez"}) == {
        "e7": {"e2": "Maria Lopez", "e5": "M. Lopez"}
    }
    # Another dataset's names are never candidates.
    assert index.file_and_find("other", {"x": "NYC"}) == {"x": {}}


def test_names_filed_by_the_first_format_are_found_after_the_upgrade(tmp_path: Path) -> None:
    state = SQLiteStateStore(tmp_path / "state.db")
    # As version 1 filed "NYC", "M. Lopez" and "Maria Lopez" (no format marker yet).
    state.add_members(
        {
            f"{PREFIX}d:words:nyc": ["e1 NYC"],
            f"{PREFIX}d:letters:nyc": ["e1 NYC"],
            f"{PREFIX}d:words:lopez m": ["e2 M. Lopez"],
            f"{PREFIX}d:words:lopez maria": ["e3 Maria Lopez"],
            f"{PREFIX}d:letters:ml": ["e3 Maria Lopez"],
            f"{PREFIX}d:surname:lopez:2": ["e2 M. Lopez", "e3 Maria Lopez"],
        }
    )
    index = EntityKeyIndex(state)
    index.upgrade()
    index.upgrade()  # a second process, or a restart: nothing left to do
    assert state.get(FORMAT_KEY) == FORMAT
    assert state.keys(f"{PREFIX}d:letters:") == []
    found = index.file_and_find("d", {"e4": "New York City", "e5": "Miguel Lopez"})
    assert found == {"e4": {"e1": "NYC"}, "e5": {"e2": "M. Lopez"}}


def test_removing_a_dataset_forgets_its_keys(tmp_path: Path) -> None:
    with installed_runtime(Settings(home=tmp_path / "home")) as runtime:
        runtime.catalog.ensure_dataset("people")
        runtime.catalog.ensure_dataset("places")
        index = EntityKeyIndex(runtime.state)
        index.file_and_find("people", {"e1": "Maria Lopez"})
        index.file_and_find("places", {"e2": "New York City"})
        runtime.catalog.remove_dataset("people")
        assert runtime.state.keys(f"{PREFIX}people:") == []
        assert runtime.state.keys(f"{PREFIX}places:") != []


def test_an_initial_fitting_two_stored_people_stays_when_one_of_them_comes_again(
    tmp_path: Path,
) -> None:
    with installed_runtime(Settings(home=tmp_path / "home")) as runtime:
        runtime.catalog.ensure_dataset("people")
        reconcile = get_pipeline("default").build_step(ReconcileEntities.name, runtime)

        def write(*names: str) -> None:
            nodes = [
                Node(id=entity_id("people", n), type="Entity", dataset="people", name=n)
                for n in names
            ]
            runtime.graph.upsert_nodes(nodes)
            reconcile.run(WriteReport(dataset="people", entity_names={n.id: n.name for n in nodes}))

        write("M. Lopez", "Maria Lopez", "Miguel Lopez")
        write("Maria Lopez")  # a later document names Maria again
        stored = {n.name for n in runtime.graph.find_nodes("people", "Entity")}
        assert stored == {"M. Lopez", "Maria Lopez", "Miguel Lopez"}
        write("Ana Ruiz")
        write("A. Ruiz")  # one full name fits: merged into it
        stored = {n.name for n in runtime.graph.find_nodes("people", "Entity")}
        assert stored == {"M. Lopez", "Maria Lopez", "Miguel Lopez", "Ana Ruiz"}
