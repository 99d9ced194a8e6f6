"""What a caller is shown: a tenant's stored names mapped back to the names it knows.

A tenant's dataset `docs` is stored as `<tenant>:docs` (core/access.py); that form, and so
the tenant's id, never goes back to a caller. Every use case and face that answers with
something read from the stores passes it through here, the one place that knows how a stored
name is written: job records, nodes and edges, search and recall notes, error messages.
The local default tenant's names are stored bare, so for it all of this is the identity.
"""

from __future__ import annotations

from typing import Any, TypeVar

from core.access import Caller
from core.models.graph import Edge, Node
from core.models.jobs import Job
from core.models.vocabulary import DATASET
from retrieval.memory import RecallResponse
from retrieval.models import SearchResponse

J = TypeVar("J", bound=Job)
G = TypeVar("G", Node, Edge)
# Node properties that may hold a stored name: a Document's blob key is
# `<stored dataset>/<id>`, and its error message may quote that key.
NAMED_PROPERTIES = frozenset({"blob_key", "error"})


def name(caller: Caller, stored: str) -> str:
    """The name the caller knows a stored dataset by."""
    return caller.unscoped(stored)


def text(caller: Caller, message: str) -> str:
    """Free text (a note, a message) with every stored name of the caller's written as the
    caller writes it (core/access.py `Caller.unscoped_text`)."""
    return caller.unscoped_text(message)


def job(caller: Caller, record: J) -> J:
    """A job record (or report) with its dataset, message and errors as the caller names them."""
    return caller.unscoped_job(record)


def graph_item(caller: Caller, item: G) -> G:
    """A node or edge of the caller's dataset as it is exported: its dataset, a Dataset node's
    name and a Document's blob key without the stored form (text and entity names, the
    caller's own content, stay as they are)."""
    if caller.tenant is None:
        return item
    update: dict[str, Any] = {"dataset": name(caller, item.dataset)}
    if NAMED_PROPERTIES & item.properties.keys():
        update["properties"] = {
            k: text(caller, v) if k in NAMED_PROPERTIES and isinstance(v, str) else v
            for k, v in item.properties.items()
        }
    if isinstance(item, Node) and item.type == DATASET:
        update["name"] = name(caller, item.name)
    return item.model_copy(update=update)


def search(caller: Caller, response: SearchResponse) -> SearchResponse:
    """A search response whose note and route reason name datasets as the caller does (the
    results are the caller's own text and stay as they are)."""
    if caller.tenant is None:
        return response
    route = response.route
    if route is not None:
        route = route.model_copy(update={"reason": text(caller, route.reason)})
    note = None if response.note is None else text(caller, response.note)
    return response.model_copy(update={"note": note, "route": route})


def recall(caller: Caller, response: RecallResponse) -> RecallResponse:
    """A recall response whose note names datasets as the caller does."""
    if caller.tenant is None or response.note is None:
        return response
    return response.model_copy(update={"note": text(caller, response.note)})
