"""The Celery application: broker, queues, task routes and the reliability settings
(docs/architecture.md, "Orchestration and recovery").

`celery -A workers.celery_app worker -Q ingest,llm` runs a worker process; embedded mode runs
worker threads inside the cogmill process instead (workers/embedded.py).

Every pipeline step is its own task, `cogmill.<step>`, routed to the queue the step declares
(pipelines/definitions.py's `STEPS`); a batch's chain ends with `cogmill.finish_batch`.
"""

from __future__ import annotations

from celery import Celery
from kombu import Queue

from core.settings import Settings
from pipelines.base import INGEST, LLM
from pipelines.definitions import STEPS
from workers.memory_broker import TRANSPORT as MEMORY_TRANSPORT

LLM_QUEUE, INGEST_QUEUE = LLM, INGEST
PRIORITY_LEVELS = 10  # Redis: 0 is served first
FINISH = "finish_batch"  # the last task of every batch's chain, and the step it claims under


def task_name(step: str) -> str:
    """The Celery task that runs `step` (or `FINISH`) on a batch."""
    return f"cogmill.{step}"


# Each task's step and queue: a step's task on the queue its step declares.
TASK_STEPS = {task_name(name): name for name in [*STEPS, FINISH]}
TASK_QUEUES = {task_name(name): step.queue for name, step in STEPS.items()}
TASK_QUEUES[task_name(FINISH)] = INGEST_QUEUE
TASK_QUEUES[task_name("deliver_webhook")] = INGEST_QUEUE  # workers/webhooks/deliveries.py
TASK_QUEUES[task_name("sync")] = INGEST_QUEUE  # a sync's source phase (workers/sync.py)
TASK_QUEUES[task_name("scheduled_run")] = INGEST_QUEUE  # a schedule's run (workers/beat.py)


def celery_config(settings: Settings) -> dict[str, object]:
    """Celery settings derived from cogmill settings."""
    return {
        "broker_url": settings.broker_url,
        # memory://: kombu's in-process queues, served by priority like Redis's.
        "broker_transport": MEMORY_TRANSPORT if settings.embedded_broker else None,
        "result_backend": settings.result_backend,
        "task_queues": [Queue(INGEST_QUEUE), Queue(LLM_QUEUE)],
        "task_default_queue": INGEST_QUEUE,
        "task_routes": {name: {"queue": queue} for name, queue in TASK_QUEUES.items()},
        "task_serializer": "json",
        "result_serializer": "json",
        "accept_content": ["json"],
        "task_ignore_result": True,
        # A task is acknowledged only after it ran, and a worker takes one task at a time,
        # so a crashed worker's task is redelivered instead of lost.
        "task_acks_late": True,
        "task_reject_on_worker_lost": True,
        "worker_prefetch_multiplier": 1,
        "task_soft_time_limit": settings.task_soft_time_limit_seconds,
        "task_time_limit": settings.task_time_limit_seconds,
        # polling_interval matters for the in-process memory:// transport (default 1 s per hop).
        "broker_transport_options": {
            "visibility_timeout": settings.visibility_timeout_seconds,
            # The lock guarding the redelivery of unacknowledged messages survives a Redis
            # restart (AOF); by default it would then block redelivery for 300 s.
            "unacked_mutex_expire": min(300, settings.visibility_timeout_seconds),
            "polling_interval": 0.1,
            # Queues live under the same prefix as the state: two deployments sharing a Redis
            # server (COGMILL_REDIS_PREFIX) must never take each other's tasks.
            "global_keyprefix": settings.redis_prefix,
            # One list per priority: a batch's later steps go first (workers/tasks.py).
            "priority_steps": list(range(PRIORITY_LEVELS)),
        },
        "broker_connection_retry_on_startup": True,
        # A chain's next step is published when the previous one ends; keep retrying that
        # publish through a broker restart (~2 min) rather than dropping the rest of the chain.
        "task_publish_retry_policy": {
            "max_retries": 60,
            "interval_start": 0.2,
            "interval_step": 0.5,
            "interval_max": 2.0,
        },
        "worker_send_task_events": True,
        "task_send_sent_event": True,
        "worker_hijack_root_logger": False,
    }


app = Celery(
    "cogmill",
    include=[
        "workers.tasks",
        "workers.sweeper",
        "workers.webhooks.deliveries",
        "workers.metrics",
        "workers.llm_batches.polling",
        "workers.sync_tasks",
        "workers.beat",
    ],
)
app.conf.update(celery_config(Settings()))
# Worker pool threads resolve `current_app` through the default app; without this, chained
# callbacks published from those threads would use an unconfigured app (amqp://localhost).
app.set_default()


def configure(settings: Settings) -> Celery:
    """Point the app at the broker of these settings (before any worker starts)."""
    app.conf.update(celery_config(settings))
    # Celery keeps its connection and producer pools for the broker it first used; forget them
    # so the next publish connects to this one. Not closed: kombu shares pools per broker URL
    # process-wide, so a later configure() back to that broker gets the same, still open, pool.
    app._pool = None
    app.amqp._producer_pool = None
    return app


def queue_depths(app: Celery) -> dict[str, int]:
    """Messages waiting in each cogmill queue, not counting those a worker holds.

    Read with the transport's own size (on Redis: LLEN of the queue's list per priority),
    not a passive declare: kombu's Redis transport checks that a queue exists with EXISTS,
    which it does not give the global key prefix, so with a prefix every passive declare
    answered NOT_FOUND (and the sweeper never resumed a job whose chains were lost)."""
    depths: dict[str, int] = {}
    with app.connection_for_write() as conn:
        channel = conn.default_channel
        for queue in (INGEST_QUEUE, LLM_QUEUE):
            size = getattr(channel, "_size", None)
            if size is None:
                depths[queue] = channel.queue_declare(queue=queue, passive=True).message_count
            else:
                depths[queue] = int(size(queue))
    return depths
