"""The embedded task queue: Azure Storage queue semantics in a SQLite file (DESIGN.md §5).

* ``send`` appends a message, optionally invisible for ``delay_seconds``.
* ``receive`` atomically takes the oldest visible messages, hides them for the visibility
  timeout, adds one to their ``dequeue_count`` and hands each a new receipt (Azure's pop
  receipt). A message not deleted in time becomes visible again and is delivered again.
* ``delete`` and ``release`` need the current receipt. A stale receipt (the message was
  received again, released, or already deleted) makes them do nothing and return quietly:
  whoever holds the newer receipt owns the message now. The Azure adapter swallows its 404
  the same way, so callers never need a try/except around them.

It may share its file with :class:`blogwriter.store.sqlite.SqliteSessionStore`.
"""

from __future__ import annotations

import time
import uuid
from pathlib import Path
from typing import Callable

from ..db import Database
from .base import QueueMessage, TaskQueue


class SqliteTaskQueue(TaskQueue):
    """Named queues in one SQLite file; safe for many threads and many processes on one file.

    ``clock`` (epoch seconds) decides visibility; tests pass a fake one to move time by hand.
    Processes sharing a file must share a clock, which ``time.time`` is.
    """

    def __init__(self, path: Path, *, clock: Callable[[], float] = time.time) -> None:
        self._db = Database(path)
        self._clock = clock

    @property
    def path(self) -> Path:
        return self._db.path

    def send(self, queue: str, body: str, *, delay_seconds: float = 0) -> None:
        if delay_seconds < 0:
            raise ValueError("delay_seconds must not be negative")
        now = self._clock()
        with self._db.write() as conn:
            conn.execute(
                "INSERT INTO queue_messages (queue, id, body, inserted_at, visible_at) VALUES (?, ?, ?, ?, ?)",
                (queue, uuid.uuid4().hex, body, now, now + delay_seconds),
            )

    def receive(
        self, queue: str, *, max_messages: int = 1, visibility_timeout: float = 30
    ) -> list[QueueMessage]:
        if max_messages < 1:
            raise ValueError("max_messages must be at least 1")
        if visibility_timeout < 0:
            raise ValueError("visibility_timeout must not be negative")
        now = self._clock()
        received: list[QueueMessage] = []
        # Select and hide in one immediate transaction: two consumers never get the same
        # message within one visibility window.
        with self._db.write() as conn:
            rows = conn.execute(
                "SELECT seq, id, body, dequeue_count FROM queue_messages"
                " WHERE queue = ? AND visible_at <= ? ORDER BY seq LIMIT ?",
                (queue, now, max_messages),
            ).fetchall()
            for seq, message_id, body, dequeue_count in rows:
                receipt = uuid.uuid4().hex
                conn.execute(
                    "UPDATE queue_messages SET visible_at = ?, dequeue_count = dequeue_count + 1, receipt = ?"
                    " WHERE seq = ?",
                    (now + visibility_timeout, receipt, seq),
                )
                received.append(
                    QueueMessage(
                        queue=queue, id=message_id, receipt=receipt, body=body, dequeue_count=dequeue_count + 1
                    )
                )
        return received

    def delete(self, message: QueueMessage) -> None:
        """Remove the message if ``message.receipt`` is still current; otherwise do nothing."""
        with self._db.write() as conn:
            conn.execute(
                "DELETE FROM queue_messages WHERE queue = ? AND id = ? AND receipt = ?",
                (message.queue, message.id, message.receipt),
            )

    def release(self, message: QueueMessage) -> None:
        """Make the message visible now if ``message.receipt`` is still current.

        The receipt changes, as an Azure update does, so the releasing holder can no longer
        delete a message someone else may be about to receive.
        """
        with self._db.write() as conn:
            conn.execute(
                "UPDATE queue_messages SET visible_at = ?, receipt = ? WHERE queue = ? AND id = ? AND receipt = ?",
                (self._clock(), uuid.uuid4().hex, message.queue, message.id, message.receipt),
            )

    def count(self, queue: str) -> int:
        row = self._db.connection().execute("SELECT COUNT(*) FROM queue_messages WHERE queue = ?", (queue,)).fetchone()
        return int(row[0])

    def close(self) -> None:
        self._db.close()
