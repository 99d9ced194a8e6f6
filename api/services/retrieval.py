"""The retrieval context a caller's searches and recalls read."""

from __future__ import annotations

from core.access import Caller, Role
from retrieval.base import RetrievalContext
from runtime import Runtime


def retrieval_for(rt: Runtime, caller: Caller) -> RetrievalContext:
    """What the caller's retrievers read: Cypher runs as written for an operator only, and
    confined to the searched datasets for everyone else (also when FEELING_LUCKY or an agent
    picks CYPHER for a reader)."""
    ctx = rt.retrieval()
    ctx.cypher_raw = caller.role.allows(Role.OPERATOR)
    return ctx
