"""A tenant's storage quota, held by concurrent adds.

The bytes a tenant stores are summed from its Document nodes, which an add writes only after
its check. Checked alone, nine parallel uploads of 40 KB each saw the same 0 bytes stored and
all passed a 100 KB quota. So an add first reserves its bytes in the state store (an atomic
add within the quota: a Lua script on Redis, a write transaction on SQLite), then reads what
is stored, and holds the reservation until its documents are written:

- of two adds, the later reservation sees the earlier one's bytes: still reserved, or (once
  released) already in the stored sum it reads after reserving;
- a failed or refused add releases its bytes; a reservation whose process died expires after
  RESERVATION_TTL_S.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

from api.services.datasets import stored_bytes
from api.services.tenants import QuotaExceededError
from core.access import Caller
from runtime import Runtime

# Long enough for the largest upload's documents to be written; pushed out by each new add.
RESERVATION_TTL_S = 3600.0


def reservation_key(tenant: str) -> str:
    """The state store counter of a tenant's bytes being added."""
    return f"tenants:quota:{tenant}:adding"


@contextmanager
def storage_reserved(rt: Runtime, caller: Caller, incoming: int) -> Iterator[None]:
    """Hold `incoming` bytes of the caller's tenant's quota while the block stores them.
    Raises QuotaExceededError, holding nothing, when they would take it over the quota
    (counted whole: a replaced document's old bytes are not deducted)."""
    quota, tenant = rt.settings.tenant_storage_bytes, caller.tenant
    if tenant is None or not quota:
        yield
        return
    key = reservation_key(tenant)
    adding = rt.state.reserve(key, incoming, quota, ttl=RESERVATION_TTL_S)
    if adding is None:
        raise _exceeded(incoming, quota, "other adds of this tenant hold the rest")
    try:
        used = stored_bytes(rt, caller)
        if used + adding > quota:
            raise _exceeded(incoming, quota, f"it stores {used} bytes of documents")
        yield
    finally:
        rt.state.release(key, incoming)


def _exceeded(incoming: int, quota: int, why: str) -> QuotaExceededError:
    return QuotaExceededError(
        f"adding {incoming} bytes would take this tenant over its quota of {quota} bytes "
        f"(COGMILL_TENANT_STORAGE_BYTES; {why}): delete documents or datasets first"
    )
