"""Sessions per tenant in both state stores: the same session id of the local default tenant
and of two tenants are three sessions that share no key."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from core.ports import StateStore
from core.stores.redis.state import RedisStateStore
from core.stores.sqlite.state import SQLiteStateStore
from retrieval.sessions import INDEXED, SessionStore
from tests.services import redis_url

TTL = 600.0


@pytest.fixture(params=["sqlite", pytest.param("redis", marks=pytest.mark.services)])
def state(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[StateStore]:
    if request.param == "sqlite":
        store: StateStore = SQLiteStateStore(tmp_path / "state.sqlite")
    else:
        store = RedisStateStore(redis_url(), prefix=f"cogmill-test:{uuid.uuid4().hex}:")
    try:
        yield store
    finally:
        for key in store.keys(""):
            store.delete(key)
        store.close()


def test_the_same_session_id_is_one_session_per_tenant(state: StateStore) -> None:
    # A tenant may be called like a local session: its keys still never look like that one's.
    stores = {t: SessionStore(state, TTL, t) for t in (None, "acme", "chat-1")}
    for tenant, store in stores.items():
        store.add_note("chat-1", f"note of {tenant}")
    stores[None].add_note("acme", "a local session named like a tenant")
    for tenant, store in stores.items():
        assert [n.text for n in store.notes("chat-1")] == [f"note of {tenant}"]
    assert stores[None].sessions() == ["acme", "chat-1"]
    assert stores["acme"].sessions() == stores["chat-1"].sessions() == ["chat-1"]
    assert not stores["acme"].exists("acme")
    # Forgetting one tenant's session, or every local one, leaves the others whole.
    assert stores["acme"].forget("chat-1") == 1
    assert not stores["acme"].exists("chat-1") and stores["chat-1"].exists("chat-1")
    assert stores[None].forget_all() == 2
    assert [n.text for n in stores["chat-1"].notes("chat-1")] == ["note of chat-1"]
    left = [key for key in state.keys("") if not key.startswith(INDEXED)]
    index, note = "tenants:session:chat-1:chat-1:index:", "tenants:session:chat-1:chat-1:note:"
    assert len(left) == 2 and left[0] == index and left[1].startswith(note), left


def test_a_session_is_read_from_its_index_and_older_items_are_indexed_once(
    state: StateStore,
) -> None:
    """Reading a session must not walk the keyspace (on Redis a scan visits every key of the
    store: the lexical index and LLM cache too); notes written before the index are found."""
    older = SessionStore(state, TTL)
    old_note = older.add_note("chat-1", "written before sessions had an index")
    state.delete("session:chat-1:index:")
    state.delete(INDEXED + "session:")
    for n in range(30):  # other keys of the store, which a scan would walk
        state.put(f"lex:ds:c:{n}", "x")

    store = SessionStore(state, TTL)
    assert [n.id for n in store.notes("chat-1")] == [old_note.id]  # indexed on first read
    new_note = store.add_note("chat-1", "written with the index")
    scans = _scans(state)
    assert [n.id for n in store.notes("chat-1")] == [old_note.id, new_note.id]
    assert store.exists("chat-1") and not store.exists("chat-2")
    assert _scans(state) == scans

    # A member whose item has expired is dropped by its id's time, without reading it.
    short = SessionStore(state, 0.5)
    short.add_note("brief", "soon gone")
    state.add_member("session:brief:index:", "note:00000000000000000001abcdef", ttl=TTL)
    assert short.exists("brief")
    assert state.add_members({"session:brief:index:": []})["session:brief:index:"] == {
        f"note:{short.notes('brief')[0].id}"
    }


def _scans(state: StateStore) -> int | None:
    """SCAN commands Redis has run (None on SQLite, which reads a key range from its index)."""
    client = getattr(state, "_redis", None)
    return None if client is None else int(client.info("commandstats")["cmdstat_scan"]["calls"])
