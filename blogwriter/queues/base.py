"""The task queue port (DESIGN.md §5): Azure Storage queue semantics.

At-least-once delivery: a received message stays invisible for the visibility timeout and
comes back (with ``dequeue_count`` one higher) unless it is deleted. Poisoning (moving a
message to ``<name>-poison`` after N deliveries) is the host's job, as in Azure Functions;
the queue only offers the pieces.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import dataclass


def poison_queue_name(queue: str) -> str:
    return f"{queue}-poison"


@dataclass(frozen=True)
class QueueMessage:
    queue: str
    id: str
    receipt: str
    body: str
    dequeue_count: int


class TaskQueue(ABC):
    @abstractmethod
    def send(self, queue: str, body: str, *, delay_seconds: float = 0) -> None:
        """Append a message (text) to ``queue``, creating the queue if needed."""

    @abstractmethod
    def receive(
        self, queue: str, *, max_messages: int = 1, visibility_timeout: float = 30
    ) -> list[QueueMessage]:
        """Take up to ``max_messages`` visible messages and hide them for the timeout."""

    @abstractmethod
    def delete(self, message: QueueMessage) -> None:
        """Remove a received message for good (its work is done)."""

    @abstractmethod
    def release(self, message: QueueMessage) -> None:
        """Make a received message visible again now (a clean shutdown hands it back)."""

    @abstractmethod
    def count(self, queue: str) -> int:
        """How many messages the queue holds, visible or not (approximate on Azure)."""

    def close(self) -> None:  # pragma: no cover - optional
        """Release connections."""
