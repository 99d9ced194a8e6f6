"""api/services/shown.py: a tenant's stored names written as the tenant writes them."""

from __future__ import annotations

from api.services import shown
from core.access import LOCAL, Caller, Role
from core.models.graph import Node
from core.models.jobs import DocumentError, Job

ACME = Caller("acme", Role.READER)


def test_text_drops_the_callers_prefix_where_a_name_starts() -> None:
    message = "no events in acme:docs, acme:b.v2 (blob 'acme:docs/1f'); acme: the firm"
    assert shown.text(ACME, message) == "no events in docs, b.v2 (blob 'docs/1f'); acme: the firm"
    # Another tenant's name that merely ends or starts like the caller's is left alone.
    assert shown.text(ACME, "xacme:docs acme-corp:docs") == "xacme:docs acme-corp:docs"
    assert shown.text(LOCAL, "acme:docs") == "acme:docs"


def test_job_and_graph_items_name_the_dataset_as_the_caller_does() -> None:
    error = DocumentError(
        document_id="d", document_name="n", step="classify", message="missing blob 'acme:docs/d'"
    )
    job = Job(
        id="j",
        dataset="acme:docs",
        pipeline="default",
        pipeline_version="2",
        errors=[error],
        message="acme:docs failed",
    )
    seen = shown.job(ACME, job)
    assert (seen.dataset, seen.message, seen.errors[0].message) == (
        "docs",
        "docs failed",
        "missing blob 'docs/d'",
    )
    dataset = Node(id="x", type="Dataset", name="acme:docs", dataset="acme:docs")
    doc = Node(
        id="d",
        type="Document",
        name="acme:notes.txt",
        dataset="acme:docs",
        properties={"blob_key": "acme:docs/d", "size": 3},
    )
    assert shown.graph_item(ACME, dataset).name == "docs"
    listed = shown.graph_item(ACME, doc)
    # A document's name is the caller's own text, whatever it looks like.
    assert (listed.name, listed.dataset) == ("acme:notes.txt", "docs")
    assert listed.properties == {"blob_key": "docs/d", "size": 3}
