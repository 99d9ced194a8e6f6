"""The StateStore contract on SQLite, plus sharing the file with another process."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from core.stores.sqlite.state import SQLiteStateStore
from tests.contracts.state_store import StateStoreContract

_OTHER_PROCESS = """
import sys
from pathlib import Path
from core.stores.sqlite.state import SQLiteStateStore
store = SQLiteStateStore(Path(sys.argv[1]))
for i in range(200):
    store.incr("hits")
    store.append_event("progress", f"child-{i}")
store.close()
"""


@pytest.fixture
def state_store(tmp_path: Path) -> Iterator[SQLiteStateStore]:
    store = SQLiteStateStore(tmp_path / "state.db")
    yield store
    store.close()


class TestSQLiteStateStore(StateStoreContract):
    def test_a_second_process_shares_counters_and_streams(
        self, state_store: SQLiteStateStore
    ) -> None:
        root = Path(__file__).resolve().parents[2]
        child = subprocess.Popen(
            [sys.executable, "-c", _OTHER_PROCESS, str(state_store.path)], cwd=root
        )
        for i in range(200):
            state_store.incr("hits")
            state_store.append_event("progress", f"parent-{i}")
        assert child.wait(timeout=60) == 0
        assert state_store.get("hits") == "400"
        assert [seq for seq, _ in state_store.read_events("progress")] == list(range(1, 401))
