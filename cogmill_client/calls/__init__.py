"""Import every call module, so `ENDPOINTS` lists them all."""

from cogmill_client.calls import datasets, queries, sync
from cogmill_client.calls.base import ENDPOINTS, Call, Parts

__all__ = ["ENDPOINTS", "Call", "Parts", "datasets", "queries", "sync"]
