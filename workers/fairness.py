"""A fair share of the workers between tenants: a per-tenant cap on batches in flight, applied
while another tenant has batches waiting to start.

Every batch's chain is published when its job is planned, so a large job's first steps fill
the queues and a later job of another tenant waits behind all of them. Instead, a batch's first
step takes one of its tenant's slots (`admit`) before it runs; when the tenant already has
`tenant_batches_in_flight` batches started and not recorded, and another tenant's batches wait
(counted when published, `queued`), the first step goes back to its queue (the shell
re-publishes it with a short countdown, before its delivery is counted) so the other tenant's
batch reaches a worker. With no other tenant waiting there is no cap: one tenant alone keeps
every worker busy.

A slot is the batch's membership in its tenant's set, so a redelivered or re-published first
step (a killed worker's) finds its slot held and takes no second one; recording the batch
(success, failure, the job cancelled) or parking it releases the slot once. Counters expire
`ttl` after their last change, so one lost by a crash loosens the cap for a while, never blocks.
"""

from __future__ import annotations

from collections.abc import Sequence

from core.ports import StateStore
from core.settings import Settings

_NO_LIMIT = 1 << 62
ALL = "fair:waiting"  # batches published and not started, every tenant


def tenant_of(dataset: str) -> str:
    """The tenant owning a dataset: its stored name is `tenant:name` ("" for a bare name)."""
    tenant, sep, _ = dataset.partition(":")
    return tenant if sep else ""


def _waiting(tenant: str) -> str:
    return f"{ALL}:{tenant}"


def _in_flight(tenant: str) -> str:
    return f"fair:in_flight:{tenant}"


def _slots(tenant: str) -> str:
    return f"fair:slots:{tenant}"


def _queued(job_id: str) -> str:
    # The job's batches counted as waiting; dropped with the job's artifacts when it finishes.
    return f"job:{job_id}:artifact:fair:queued"


def _ttl(settings: Settings) -> float:
    # A batch waits no longer than the broker keeps an unacknowledged message.
    return float(settings.visibility_timeout_seconds)


def queued(
    state: StateStore, settings: Settings, dataset: str, job_id: str, batches: Sequence[int]
) -> None:
    """Count these batches of a job on the dataset as published and waiting to start."""
    if not settings.tenant_batches_in_flight or not batches:
        return
    state.add_members({_queued(job_id): [str(b) for b in batches]})
    ttl = _ttl(settings)
    state.reserve(ALL, len(batches), _NO_LIMIT, ttl=ttl)
    state.reserve(_waiting(tenant_of(dataset)), len(batches), _NO_LIMIT, ttl=ttl)


def started(state: StateStore, dataset: str, job_id: str, batch: int) -> None:
    """The batch's first step started (or found its job cancelled): no longer waiting. Only a
    batch counted by `queued`, once: a re-published one was never counted."""
    if state.remove_member(_queued(job_id), str(batch)):
        state.release(ALL, 1)
        state.release(_waiting(tenant_of(dataset)), 1)


def others_waiting(state: StateStore, tenant: str) -> bool:
    """Whether batches of another tenant than `tenant` wait to start."""
    everyone, own = state.get_many([ALL, _waiting(tenant)])
    return int(everyone or 0) - int(own or 0) > 0


def in_flight(state: StateStore, dataset: str) -> int:
    """The batches of the dataset's tenant holding a slot."""
    return int(state.get(_in_flight(tenant_of(dataset))) or 0)


def shares(state: StateStore, dataset: str) -> str:
    """The tenant's and everyone's counters, for the log."""
    tenant = tenant_of(dataset)
    raw = state.get_many([_in_flight(tenant), _waiting(tenant), ALL])
    in_flight, waiting, everyone = (int(v or 0) for v in raw)
    return f"in_flight={in_flight} waiting={waiting} waiting_all={everyone}"


def admit(state: StateStore, settings: Settings, dataset: str, job_id: str, batch: int) -> bool:
    """Take a slot for the batch's first step: True to run it now, False to put it back.

    A batch holding its slot already (a redelivery) runs; over the cap it runs only while no
    other tenant's batch waits."""
    cap = settings.tenant_batches_in_flight
    if not cap:
        return True
    tenant, token, ttl = tenant_of(dataset), f"{job_id}:{batch}", _ttl(settings)
    if not state.add_member(_slots(tenant), token, ttl=ttl):
        return True
    limit = cap if others_waiting(state, tenant) else _NO_LIMIT
    if state.reserve(_in_flight(tenant), 1, limit, ttl=ttl) is None:
        state.remove_member(_slots(tenant), token)
        return False
    started(state, dataset, job_id, batch)
    return True


def release(state: StateStore, dataset: str, job_id: str, batch: int) -> None:
    """Give back the batch's slot, if it holds one (recorded, failed, cancelled or parked)."""
    tenant = tenant_of(dataset)
    if state.remove_member(_slots(tenant), f"{job_id}:{batch}"):
        state.release(_in_flight(tenant), 1)
