"""The in-process broker of embedded mode: kombu's `memory://` transport, with priorities.

kombu's memory transport ignores a message's priority (one FIFO queue per queue name), so
with it a job ran breadth-first: every batch's first step, then every batch's second step,
and so on. No batch finished, was searchable or showed as progress before the job's last
LLM round. This one serves a queue's messages lowest priority number first, as the Redis
transport does with `priority_steps` (workers/chains.py `step_priority`: a batch's later
steps go first), and in the order they were put within one priority.
"""

from __future__ import annotations

import itertools
from queue import PriorityQueue
from typing import Any

from kombu.transport import memory

# celery_config's `broker_transport` for a memory:// broker URL.
TRANSPORT = f"{__name__}:Transport"


class _Queue(PriorityQueue[tuple[int, int, Any]]):
    """Messages as (priority, sequence, message): the sequence keeps one priority FIFO."""


class Channel(memory.Channel):
    queues: dict[str, _Queue] = {}  # per process, like the base class's (not shared with it)
    _sequence = itertools.count()

    def _queue_for(self, queue: str) -> _Queue:
        found = self.queues.get(queue)
        if found is None:  # setdefault: two threads creating it keep one queue, no message lost
            found = self.queues.setdefault(queue, _Queue())
        return found

    def _new_queue(self, queue: str, **kwargs: Any) -> None:
        self._queue_for(queue)

    def _put(self, queue: str, message: Any, **kwargs: Any) -> None:
        # `_get_message_priority` clamps to 0-9; the default priority of a message without
        # one (0) is served first, as on Redis.
        entry = (self._get_message_priority(message), next(self._sequence), message)
        self._queue_for(queue).put(entry)

    def _put_fanout(self, exchange: str, message: Any, routing_key: Any = None, **kw: Any) -> None:
        for queue in self._lookup(exchange, routing_key):
            self._put(queue, message)

    def _get(self, queue: str, timeout: float | None = None) -> Any:
        return self._queue_for(queue).get(block=False)[2]


class Transport(memory.Transport):
    Channel = Channel
