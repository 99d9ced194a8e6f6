"""Batch API mode (`cognify --llm-mode batch`, COGMILL_LLM_MODE=batch): a batch's LLM steps
send their requests as one file through the OpenAI Batch API, and the chain waits parked.

A step on the LLM queue first runs with its uncached requests deferred (core/llm/deferral.py).
When the cache answered everything, that run is the step's run. Otherwise the deferred
requests are submitted as one JSONL file per step-batch (custom_id: the LLM cache key) and
the batch waits, its chain ended: no worker thread holds it, the sweeper leaves it alone
(`JobTracker.llm_waiting`) and the job stays running. Once per `llm_batch_poll_seconds` one
process (a lease in the state store) asks about the pending submissions; a finished one's
answers go into the LLM cache, its usage into the job's accounting, and the batch is
re-published from the waiting step in a new generation (as `jobs resume` does for a budget's
parked batch). That run is the normal one: cache hits for the answered requests, the normal
synchronous path (retries, outage pauses) for failed lines; an expired or failed batch sends
everything that way.

Crash safety: a submission is claimed with an atomic key per (job, batch, step, generation)
before anything is uploaded, and recorded (with the batch waiting) before the upload; the key
is the batch's metadata. A worker that died between creating the batch and recording its id
is recovered by listing the batches and matching that metadata, never by submitting again;
one that died before creating it is taken as never sent after `llm_batch_claim_grace_seconds`.
"""
