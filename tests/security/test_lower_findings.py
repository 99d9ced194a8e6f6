"""The lower findings of the tenancy probe: failed authentications limited before the hash,
a reader's recall leaving its session unchanged, webhook addresses that hide a private IPv4."""

from __future__ import annotations

import hashlib
import time
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from fastapi.testclient import TestClient

from api.http.app import create_app
from api.services.memory import recall, remember_note, session_history
from api.services.tenants import Tenants
from core.access import Caller, Role
from core.settings import Settings
from retrieval.sessions import session_prefix
from runtime import Runtime
from workers.webhooks.post import WebhookError, check_url

pytestmark = pytest.mark.e2e

LIMIT = 5


@pytest.fixture(scope="module")
def runtime(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Runtime]:
    settings = Settings(home=tmp_path_factory.mktemp("lower"), api_auth_failures_per_minute=LIMIT)
    rt = Runtime(settings)
    yield rt
    rt.close()


@pytest.fixture
def hashes(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """Counts the PBKDF2 computations (the real function still runs)."""
    calls: list[int] = []
    real: Callable[..., bytes] = hashlib.pbkdf2_hmac

    def counted(*args: Any, **kwargs: Any) -> bytes:
        calls.append(1)
        return real(*args, **kwargs)

    monkeypatch.setattr(hashlib, "pbkdf2_hmac", counted)
    return calls


def client_at(runtime: Runtime, address: str) -> TestClient:
    """A client of a new app on the runtime (an app's lifespan runs once), from `address`."""
    return TestClient(create_app(runtime), client=(address, 40000))


@pytest.mark.slow  # may wait for the next minute
def test_wrong_secrets_are_limited_before_the_hash(runtime: Runtime, hashes: list[int]) -> None:
    # The failures are counted per wall-clock minute (api/services/tenants.py): start where the
    # test's requests cannot straddle two windows (a busy CI run once did, and the count reset).
    left = 60 - time.time() % 60
    if left < 30:
        time.sleep(left + 0.1)
    tenants = Tenants(runtime.state)
    tenants.create_tenant("acme")
    key, record = tenants.create_key("acme", Role.READER)
    verified, _ = tenants.create_key("acme", Role.READER)
    wrong = f"cm_{record.id}_{'x' * 43}"
    with client_at(runtime, "203.0.113.7") as client:
        assert client.get("/api/v1/datasets", headers=bearer(verified)).status_code == 200
        before = len(hashes)
        for _ in range(LIMIT):
            assert client.get("/api/v1/datasets", headers=bearer(wrong)).status_code == 401
        assert len(hashes) - before == LIMIT  # each wrong secret of a real id cost one hash
        blocked = client.get("/api/v1/datasets", headers=bearer(wrong))
        assert blocked.status_code == 429 and int(blocked.headers["Retry-After"]) <= 60
        assert blocked.json()["error"]["code"] == "too_many_failures"
        assert len(hashes) - before == LIMIT  # refused before hashing
        # A key this process verified before still passes from the blocked address.
        assert client.get("/api/v1/datasets", headers=bearer(verified)).status_code == 200
    # From another address the same key id stays blocked (guesses spread over addresses).
    with client_at(runtime, "198.51.100.9") as other:
        assert other.get("/api/v1/datasets", headers=bearer(wrong)).status_code == 429
        # Unknown key ids cost no hash and are not counted: they stay plain 401s.
        unknown = f"cm_{'0' * 12}_{'y' * 43}"
        for _ in range(LIMIT + 2):
            assert other.get("/api/v1/datasets", headers=bearer(unknown)).status_code == 401
    assert len(hashes) - before == LIMIT
    del key


def bearer(key: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {key}"}


def test_a_readers_recall_leaves_the_session_unchanged(runtime: Runtime) -> None:
    writer, reader = Caller("memo", Role.WRITER), Caller("memo", Role.READER)
    remember_note(runtime, "chat-1", "Ada Lovelace wrote the first algorithm.", writer)
    before = session_history(runtime, "chat-1", reader)
    keys = runtime.state.keys(session_prefix("memo"))
    answered = recall(runtime, "Who wrote the first algorithm?", session="chat-1", caller=reader)
    assert answered.results and answered.qa_id is None
    assert session_history(runtime, "chat-1", reader) == before
    # Not even the note's embedding is cached: the reader's recall wrote no key.
    assert runtime.state.keys(session_prefix("memo")) == keys
    # A writer's recall is kept (improve needs it): the check above can fail.
    kept = recall(runtime, "Who wrote the first algorithm?", session="chat-1", caller=writer)
    assert kept.qa_id is not None
    assert len(session_history(runtime, "chat-1", writer).questions) == 1


@pytest.mark.parametrize(
    ("url", "inside"),
    [
        ("http://[2002:7f00:1::]/", "127.0.0.1"),  # 6to4
        ("http://[2002:a00:1::]/", "10.0.0.1"),
        ("http://[2001:0:4136:e378:8000:63bf:80ff:fffe]/", "127.0.0.1"),  # Teredo client
        ("http://[64:ff9b::a9fe:a9fe]/", "169.254.169.254"),  # NAT64
        ("http://[64:ff9b:1::c0a8:1]/", "192.168.0.1"),  # local-use NAT64
        ("http://[::127.0.0.1]/", "127.0.0.1"),  # IPv4-compatible
    ],
)
def test_webhook_addresses_hiding_a_private_ipv4_are_refused(url: str, inside: str) -> None:
    with pytest.raises(WebhookError, match=f"IPv4 {inside} inside"):
        check_url(url, allow_private=False)


def test_public_addresses_are_still_accepted() -> None:
    for url in ("http://[2002:808:808::]/", "http://[::ffff:8.8.8.8]/", "http://8.8.4.4/"):
        assert check_url(url, allow_private=False).address
    with pytest.raises(WebhookError, match="private"):
        check_url("http://[::ffff:10.0.0.1]/", allow_private=False)
