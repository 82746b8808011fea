"""The event-driven pipeline in one process, for the CLI.

The same handlers the Functions app binds (worker, router, poison) run here in a loop over
the configured queue and the store's change feed: create → enqueue → worker claims → agent →
save with If-Match → change feed → decide → claim and enqueue the next step, to a terminal state.
"""

from __future__ import annotations

import logging
import time
from typing import Callable

from . import router, worker
from .errors import BlogWriterError, PoisonMessage
from .queues.base import poison_queue_name
from .queues.delivery import receive_for_processing
from .services import Services
from .settings import TASK_QUEUES
from .state import SessionDocument

log = logging.getLogger(__name__)

MAX_DEQUEUE_COUNT = 5
CHECKPOINT = "cli-router"


class Pipeline:
    def __init__(self, services: Services, *, checkpoint: str = CHECKPOINT) -> None:
        self.services = services
        self.checkpoint = checkpoint
        self.position = services.store.load_checkpoint(checkpoint)
        self._last_sweep = 0.0

    def pump(self) -> int:
        """One pass over the task queues, their poison queues and the change feed; work done."""
        s = self.services
        done = 0
        for name in TASK_QUEUES:
            for msg in receive_for_processing(
                s.queue, name, batch_size=1, visibility_timeout=s.settings.lease_seconds,
                max_dequeue_count=MAX_DEQUEUE_COUNT,
            ):
                done += 1
                try:
                    outcome = worker.run_task(s, name, msg.body, dequeue_count=msg.dequeue_count)
                    log.info("%s: %s", name, outcome)
                    s.queue.delete(msg)
                except Exception as exc:  # the host would retry after the visibility timeout
                    level = logging.WARNING if isinstance(exc, (PoisonMessage, BlogWriterError)) else logging.ERROR
                    log.log(level, "%s: delivery %d failed: %s", name, msg.dequeue_count, exc,
                            exc_info=level == logging.ERROR)
                    s.queue.release(msg)  # retry now; past the limit it goes to poison
            for msg in s.queue.receive(poison_queue_name(name), max_messages=8, visibility_timeout=60):
                worker.on_poison(s, name, msg.body)
                s.queue.delete(msg)
                done += 1
        batch = s.store.read_changes(self.position)
        if batch.docs:
            try:
                router.on_changes(s, batch.docs)
            except Exception as exc:  # keep the checkpoint: the batch is read again next pass
                log.warning("change feed: %s; the batch will be replayed", exc)
                return done
            done += len(batch.docs)
        if batch.position != self.position:
            self.position = batch.position
            s.store.save_checkpoint(self.checkpoint, self.position)
        if time.monotonic() - self._last_sweep > 30:
            self._last_sweep = time.monotonic()
            done += router.sweep(s)
        return done

    def run_until_done(
        self,
        owner_id: str,
        session_id: str,
        *,
        on_progress: Callable[[SessionDocument], None] | None = None,
        idle_sleep: float = 0.05,
    ) -> SessionDocument:
        """Pump until the session reaches a terminal status; report each visible change."""
        seen: tuple | None = None
        worked = 1  # look before the first pump, without sleeping
        while True:
            doc = self.services.store.get(owner_id, session_id).doc
            st = doc.State
            key = (st.Status, st.Step.Seq if st.Step else 0, st.Step.Status if st.Step else None, st.CurrentSubTask)
            if key != seen:
                seen = key
                if on_progress:
                    on_progress(doc)
            if st.Status.terminal:
                return doc
            if not worked:
                time.sleep(idle_sleep)
            worked = self.pump()
