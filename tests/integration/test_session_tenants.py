"""Sessions per tenant in both state stores: the same session id of the local default tenant
and of two tenants are three sessions that share no key."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from core.ports import StateStore
from core.stores.state_redis import RedisStateStore
from core.stores.state_sqlite import SQLiteStateStore
from retrieval.sessions import SessionStore
from tests.services import redis_url

pytestmark = pytest.mark.integration
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
    [left] = state.keys("")
    assert left.startswith("tenants:session:chat-1:chat-1:note:"), left
