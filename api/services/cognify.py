"""Cognify and re-cognify: plan a job over a dataset's documents and enqueue it."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from api.services.datasets import checked, existing
from api.services.jobs import budget_of
from api.services.tenants import Tenants
from core.access import LOCAL, Caller
from core.errors import InvalidInput, NotConfigured
from core.models.custom import graph_model_of
from core.models.jobs import Job
from core.ontology import InvalidOntology, store_ontology
from runtime import Runtime
from workers.orchestration import cognify as plan


@dataclass(frozen=True)
class OntologyFile:
    """An OWL/RDF ontology to align entities with; its file name tells its format."""

    data: bytes
    filename: str

    @classmethod
    def read(cls, path: Path) -> OntologyFile:
        """The ontology in a file; InvalidOntology when it cannot be read."""
        try:
            return cls(path.read_bytes(), path.name)
        except OSError as err:
            message = f"cannot read ontology file {path}: {err.strerror or err}"
            raise InvalidOntology(message) from err


def cognify(
    rt: Runtime,
    dataset: str,
    *,
    pipeline: str | None = None,
    everything: bool = False,
    graph_model: dict[str, Any] | None = None,
    ontology: OntologyFile | None = None,
    caller: Caller = LOCAL,
    webhook: str | None = None,
    budget_usd: float | None = None,
    budget_tokens: int | None = None,
    llm_mode: str | None = None,
) -> Job:
    """Start a job building the graph and vectors of the dataset's new and changed documents
    (every document with `everything`: a re-cognify), through each document's own pipeline or
    `pipeline`, extracting with `graph_model` (a JSON Schema) and aligning to `ontology`;
    `webhook`: the id of the job's own webhook (`webhooks.for_job`), told when it finishes.
    `budget_usd` / `budget_tokens` cap its LLM spending (default: the tenant's budget, else
    the `job_budget_usd` setting); reached, the job ends `paused_budget` until `jobs.resume`.
    `llm_mode` "batch" (default: the `llm_mode` setting) sends its LLM steps' requests through
    the Batch API.

    Returns the job, already finished when there is nothing to do. Raises DatasetNotFoundError,
    InvalidInput for a bad pipeline, graph model or ontology.
    """
    checked(dataset)
    if budget_usd is None and budget_tokens is None:
        budget_usd = default_budget(rt, caller)
    budget = budget_of(rt.settings, budget_usd, budget_tokens)
    mode = batch_mode_of(rt, llm_mode)
    options: dict[str, Any] = {}
    if graph_model is not None:
        graph_model_of(graph_model)  # an invalid model fails here, not in a worker
        options["graph_model"] = graph_model
    if ontology is not None:
        # Checked cheaply here and stored; the worker parses it (core/ontology.py).
        options["ontology"] = store_ontology(
            rt.blobs, ontology.data, ontology.filename, rt.settings
        )
    if webhook is not None:
        options["webhook"] = webhook
    if mode == "batch":
        options["llm_mode"] = mode  # read by the workers (workers/llm_batches/)
    # After the options: a bad one is reported even for a new dataset.
    stored = existing(rt, dataset, caller)
    return plan(rt, stored, pipeline, "all" if everything else "changed", options, budget)


def default_budget(rt: Runtime, caller: Caller) -> float | None:
    """The USD budget of a job started without one: its tenant's, else the setting."""
    tenant = None if caller.tenant is None else Tenants(rt.state).tenant(caller.tenant)
    if tenant is not None and tenant.budget_usd is not None:
        return tenant.budget_usd
    return rt.settings.job_budget_usd


def batch_mode_of(rt: Runtime, llm_mode: str | None) -> str:
    """The job's LLM mode ("sync" or "batch"); InvalidInput for one it cannot run in."""
    mode = llm_mode or rt.settings.llm_mode
    if mode not in ("sync", "batch"):
        raise InvalidInput(f"unknown LLM mode {mode!r}; use sync or batch")
    if mode == "batch" and not rt.settings.llm_base_url:
        raise NotConfigured("batch mode needs an LLM endpoint: set COGMILL_LLM_BASE_URL")
    return mode
