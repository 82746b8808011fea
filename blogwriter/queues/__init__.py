"""Task queues: the port in :mod:`.base`, an embedded SQLite queue and Azure Storage queues."""

from .base import QueueMessage, TaskQueue

__all__ = ["QueueMessage", "TaskQueue"]
