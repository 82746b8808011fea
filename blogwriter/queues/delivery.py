"""What the Azure Functions host does between a queue and a queue trigger, for local hosts.

The host receives a batch (``batchSize``), hides it for the visibility timeout, and moves any
message that has been delivered more than ``maxDequeueCount`` times (``host.json``,
``extensions.queues``) to ``<queue>-poison`` instead of running the function again. The local
host calls :func:`receive_for_processing` to get the same behaviour from any :class:`TaskQueue`.
"""

from __future__ import annotations

import logging

from .base import QueueMessage, TaskQueue, poison_queue_name

log = logging.getLogger(__name__)


def receive_for_processing(
    queue: TaskQueue,
    name: str,
    *,
    batch_size: int,
    visibility_timeout: float,
    max_dequeue_count: int,
) -> list[QueueMessage]:
    """Receive up to ``batch_size`` messages from ``name``; poison the ones delivered too often.

    A message whose ``dequeue_count`` exceeds ``max_dequeue_count`` has already been tried that
    many times: its body is sent to the poison queue, the original deleted, and it is not
    returned. The send comes first, so a crash in between leaves a duplicate in the poison
    queue rather than losing the message.
    """
    if max_dequeue_count < 1:
        raise ValueError("max_dequeue_count must be at least 1")
    messages = queue.receive(name, max_messages=batch_size, visibility_timeout=visibility_timeout)
    ready: list[QueueMessage] = []
    for message in messages:
        if message.dequeue_count <= max_dequeue_count:
            ready.append(message)
            continue
        poison = poison_queue_name(name)
        queue.send(poison, message.body)
        queue.delete(message)
        log.warning(
            "message %s on %s was dequeued %d times (max %d); moved to %s",
            message.id,
            name,
            message.dequeue_count,
            max_dequeue_count,
            poison,
        )
    return ready
