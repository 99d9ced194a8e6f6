"""Tenants and API keys on both state stores: SQLite (embedded) and Redis (distributed)."""

from __future__ import annotations

import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

import api.services.tenants
from api.services.tenants import TenantError, Tenants
from core.access import Caller, Role
from core.ports import StateStore
from core.stores.redis.state import RedisStateStore
from core.stores.sqlite.state import SQLiteStateStore
from tests.services import redis_url


@pytest.fixture(params=["sqlite", pytest.param("redis", marks=pytest.mark.services)])
def state(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[StateStore]:
    store: StateStore
    if request.param == "sqlite":
        store = SQLiteStateStore(tmp_path / "state.db")
    else:
        # The shared test Redis, in a key space of its own (a fresh prefix), removed afterwards.
        store = RedisStateStore(redis_url(), prefix=f"test-tenants-{uuid.uuid4().hex}:")
    yield store
    for key in store.keys(""):
        store.delete(key)
    store.close()


def test_a_key_authenticates_as_its_tenant_and_role(state: StateStore) -> None:
    tenants = Tenants(state)
    assert not tenants.auth_configured()
    tenants.create_tenant("acme")
    key, record = tenants.create_key("acme", Role.WRITER)
    assert key.startswith(f"cm_{record.id}_") and tenants.auth_configured()
    found = tenants.authenticate(key)
    assert found is not None and (found.tenant, found.role) == ("acme", Role.WRITER)
    # Only a salted hash is stored: the secret appears nowhere in the store.
    secret = key[len(f"cm_{record.id}_") :]
    stored = state.get_many(state.keys(""))
    assert all(secret not in (value or "") for value in stored)
    assert [k.id for k in tenants.keys("acme")] == [record.id]


def test_wrong_revoked_and_expired_keys_do_not_authenticate(state: StateStore) -> None:
    tenants = Tenants(state)
    tenants.create_tenant("acme")
    key, record = tenants.create_key("acme", Role.READER)
    prefix = f"cm_{record.id}_"
    secret = key[len(prefix) :]
    wrong = prefix + ("A" if secret[0] != "A" else "B") + secret[1:]
    for bad in (
        wrong,
        "",
        "cm_",
        key + "x",
        key.replace("cm_", "xx_"),
        f"cm_000000000000_{secret}",
    ):
        assert tenants.authenticate(bad) is None, bad
    tenants.revoke(record.id)
    assert tenants.authenticate(key) is None
    assert tenants.keys("acme")[0].revoked
    short, _ = tenants.create_key("acme", Role.READER, expires_days=1 / 86_400 / 10)  # 0.1 s
    time.sleep(0.2)
    assert tenants.authenticate(short) is None
    # Revoking every key leaves the API closed.
    assert tenants.auth_configured()


def test_a_verified_key_skips_the_slow_hash_but_not_the_record(
    state: StateStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    """PBKDF2 runs once per key and process: after that the stored hash is not recomputed
    (here it could not be: the iteration count changed), yet revocation still counts."""
    tenants = Tenants(state)
    tenants.create_tenant("acme")
    key, record = tenants.create_key("acme", Role.READER)
    other, _ = tenants.create_key("acme", Role.READER)
    assert tenants.authenticate(key) is not None
    monkeypatch.setattr(
        api.services.tenants, "HASH_ITERATIONS", api.services.tenants.HASH_ITERATIONS + 1
    )
    assert tenants.authenticate(key) is not None  # remembered
    assert tenants.authenticate(other) is None  # never verified: hashed, and now differently
    tenants.revoke(record.id)
    assert tenants.authenticate(key) is None


def test_bad_names_unknown_tenants_and_duplicates_are_refused(state: StateStore) -> None:
    tenants = Tenants(state)
    for bad in ("", "Acme", "a:b", "a/b", "a\n", "x" * 33):
        with pytest.raises(TenantError, match="invalid tenant name"):
            tenants.create_tenant(bad)
    tenants.create_tenant("acme")
    with pytest.raises(TenantError, match="already exists"):
        tenants.create_tenant("acme")
    with pytest.raises(TenantError, match="does not exist"):
        tenants.create_key("nobody")
    with pytest.raises(TenantError, match="no key with id"):
        tenants.revoke("000000000000")
    assert [t.name for t in tenants.tenants()] == ["acme"]


def test_throttle_counts_per_key_and_minute(state: StateStore) -> None:
    tenants = Tenants(state)
    start = 1_000_000 * 60 + 10.0  # 10 s into a minute
    assert [tenants.throttle("k1", 2, start + i) for i in range(2)] == [None, None]
    assert tenants.throttle("k1", 2, start + 5) == pytest.approx(45.0)
    assert tenants.throttle("k2", 2, start + 5) is None  # another key: its own count
    assert tenants.throttle("k1", 2, start + 49) is not None  # 59 s into the minute
    assert tenants.throttle("k1", 2, start + 60) is None  # the next minute starts afresh
    # Each window's counter expires (it is not kept forever).
    assert all(state.get(key) is not None for key in state.keys("tenants:rate:"))


def test_roles_include_the_ones_below_and_callers_scope_names() -> None:
    assert Role.ADMIN.allows(Role.WRITER) and Role.WRITER.allows(Role.READER)
    assert not Role.READER.allows(Role.WRITER) and not Role.WRITER.allows(Role.ADMIN)
    acme = Caller("acme", Role.READER)
    assert acme.scoped("docs") == "acme:docs" and acme.unscoped("acme:docs") == "docs"
    assert acme.owns("acme:docs") and not acme.owns("beta:docs") and not acme.owns("docs")
    local = Caller(None, Role.ADMIN)
    assert local.scoped("docs") == "docs" and local.owns("docs") and not local.owns("acme:docs")
