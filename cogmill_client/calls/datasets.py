"""Calls of datasets, documents, cognify and jobs."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any, Literal

from cogmill_client import models as m
from cogmill_client import requests as r
from cogmill_client.calls.base import FileInput, Parts, body, model, operation, params_of

# -- datasets and documents ---------------------------------------------------------------------


@operation("GET", "/api/v1/datasets")
def list_datasets() -> Parts[list[m.DatasetPublic]]:
    """The caller's datasets and how many documents each holds."""
    return Parts(model(list[m.DatasetPublic]))


def _file(item: FileInput) -> tuple[str, tuple[str, bytes]]:
    if isinstance(item, tuple):
        name, content = item
        return ("files", (name, content))
    path = Path(item)
    return ("files", (path.name, path.read_bytes()))


def _expand(items: FileInput | Iterable[FileInput]) -> list[FileInput]:
    """Files as given; a folder stands for the files in it (sorted, not recursive)."""
    given = [items] if isinstance(items, str | Path | tuple) else list(items)
    out: list[FileInput] = []
    for item in given:
        if not isinstance(item, tuple) and Path(item).is_dir():
            out.extend(sorted(p for p in Path(item).iterdir() if p.is_file()))
        else:
            out.append(item)
    return out


@operation("POST", "/api/v1/datasets/{name}/data")
def add_files(
    dataset: str,
    files: FileInput | Iterable[FileInput],
    *,
    node_set: str | None = None,
    document_date: str | None = None,
) -> Parts[m.AddResult]:
    """Upload files (paths, folders, or (name, bytes) pairs) to a dataset (created if new);
    `document_date`: the day they speak of (their undated facts held then)."""
    parts = [_file(item) for item in _expand(files)]
    if not parts:
        raise ValueError(f"no files to add to {dataset!r}: give paths, folders or (name, bytes)")
    data = params_of(node_set=node_set, document_date=document_date) or None
    return Parts(model(m.AddResult), {"name": dataset}, files=parts, data=data)


@operation("POST", "/api/v1/datasets/{name}/data")
def add_texts(
    dataset: str,
    texts: Mapping[str, str] | Iterable[r.DocumentText],
    *,
    node_set: str | None = None,
    document_date: str | None = None,
) -> Parts[m.AddResult]:
    """Add documents given as text, {file name: text} (the extension gives the format)."""
    if isinstance(texts, Mapping):
        documents = [r.DocumentText(name=name, text=value) for name, value in texts.items()]
    else:
        documents = list(texts)
    request = r.DocumentsAdd(documents=documents, node_set=node_set, document_date=document_date)
    return Parts(model(m.AddResult), {"name": dataset}, json=body(request))


@operation("GET", "/api/v1/datasets/{name}/data")
def list_documents(
    dataset: str, *, offset: int = 0, limit: int = 1000
) -> Parts[list[m.DocumentPublic]]:
    """A dataset's documents with their processing status."""
    params = {"offset": offset, "limit": limit}
    return Parts(model(list[m.DocumentPublic]), {"name": dataset}, params=params)


@operation("DELETE", "/api/v1/datasets/{name}/data/{document_name}")
def delete_document(dataset: str, document: str) -> Parts[m.DeleteResult]:
    """Delete one document (by its file name) and what only it supported."""
    return Parts(model(m.DeleteResult), {"name": dataset, "document_name": document})


@operation("DELETE", "/api/v1/datasets/{name}")
def delete_dataset(dataset: str) -> Parts[m.DeleteResult]:
    """Delete a dataset with its documents, graph and vectors."""
    return Parts(model(m.DeleteResult), {"name": dataset})


# -- cognify and jobs ---------------------------------------------------------------------------


@operation("POST", "/api/v1/datasets/{name}/cognify")
def cognify(
    dataset: str,
    *,
    all: bool = False,
    pipeline: str | None = None,
    graph_model: dict[str, Any] | None = None,
    ontology: str | None = None,
    ontology_format: Literal["owl", "rdf", "ttl", "nt", "n3", "jsonld"] = "owl",
    webhook: str | None = None,
    budget_usd: float | None = None,
    budget_tokens: int | None = None,
    llm_mode: Literal["sync", "batch"] | None = None,
) -> Parts[m.JobAccepted]:
    """Start a job turning the dataset's new or changed documents (`all`: every one) into graph
    and vectors; `wait(job.job_id)` follows it."""
    request = r.CognifyRequest(
        all=all,
        pipeline=pipeline,
        graph_model=graph_model,
        ontology=ontology,
        ontology_format=ontology_format,
        webhook=webhook,
        budget_usd=budget_usd,
        budget_tokens=budget_tokens,
        llm_mode=llm_mode,
    )
    return Parts(model(m.JobAccepted), {"name": dataset}, json=body(request))


@operation("POST", "/api/v1/datasets/{name}/cognify")
def estimate(
    dataset: str,
    *,
    all: bool = False,
    pipeline: str | None = None,
    graph_model: dict[str, Any] | None = None,
) -> Parts[m.CognifyEstimate]:
    """The LLM calls, tokens and cost a cognify would take (runs nothing)."""
    request = r.CognifyRequest(all=all, pipeline=pipeline, graph_model=graph_model)
    params = {"estimate": "true"}
    return Parts(model(m.CognifyEstimate), {"name": dataset}, params=params, json=body(request))


@operation("GET", "/api/v1/jobs")
def list_jobs(*, offset: int = 0, limit: int = 100) -> Parts[list[m.Job]]:
    """The caller's jobs, newest first (`offset`/`limit`: a window of them)."""
    return Parts(model(list[m.Job]), params={"offset": offset, "limit": limit})


@operation("GET", "/api/v1/jobs/{job_id}")
def get_job(job_id: str) -> Parts[m.JobReport]:
    """A job's status, counts, per-document errors, tokens and cost."""
    return Parts(model(m.JobReport), {"job_id": job_id})


@operation("POST", "/api/v1/jobs/{job_id}/cancel")
def cancel_job(job_id: str) -> Parts[m.Job]:
    """Stop a job: queued batches are skipped, running steps stop at their next boundary."""
    return Parts(model(m.Job), {"job_id": job_id})


@operation("POST", "/api/v1/jobs/{job_id}/resume")
def resume_job(
    job_id: str, *, budget_usd: float | None = None, budget_tokens: int | None = None
) -> Parts[m.Job]:
    """Continue a job paused by its budget, under a new budget (none: no cap)."""
    request = r.JobResume(budget_usd=budget_usd, budget_tokens=budget_tokens)
    return Parts(model(m.Job), {"job_id": job_id}, json=body(request))


@operation("GET", "/api/v1/jobs/{job_id}/events")
def events(job_id: str, *, after: int = 0) -> Parts[None]:
    """A job's events after id `after`, then new ones until it finishes (a stream)."""
    return Parts(lambda response: None, {"job_id": job_id}, params={"after": after})


@operation("GET", "/api/v1/jobs/{job_id}/webhooks")
def job_webhooks(job_id: str) -> Parts[list[m.Attempt]]:
    """The delivery attempts of a job's webhooks."""
    return Parts(model(list[m.Attempt]), {"job_id": job_id})
