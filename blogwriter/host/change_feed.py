"""Feed a Cosmos DB trigger from ``SessionStore.read_changes``, with a saved checkpoint.

The checkpoint plays the lease container's part: it is named after the trigger's
``leaseContainerPrefix`` (each change-feed function has its own), saved only after the function
succeeded, so a crash replays the batch (at-least-once, as in Azure). A failing batch is retried
per the function's retry policy (``@app.retry``; without one, once after the poll delay, like
the real trigger which moves on after a failure). Exhausted retries skip the batch with an
error: the router's work is healed by the sweeper, and one bad document must not stall the feed.
"""

from __future__ import annotations

import logging
import threading

import azure.functions as func

from ..store.base import SessionStore
from .config import timespan_seconds
from .loader import FunctionSpec, invoke

log = logging.getLogger("blogwriter.host")

DEFAULT_MAX_ITEMS = 100


class RetryPolicy:
    """``fixed_delay`` or ``exponential_backoff``, as in function.json's ``retry``."""

    def __init__(self, settings: dict | None, default_delay: float) -> None:
        settings = settings or {}
        self.strategy = settings.get("strategy", "fixed_delay")
        self.max_retries = int(settings.get("max_retry_count", 1))
        self.delay = timespan_seconds(settings.get("delay_interval") or "00:00:00") or default_delay
        self.minimum = timespan_seconds(settings.get("minimum_interval") or "00:00:00") or default_delay
        self.maximum = timespan_seconds(settings.get("maximum_interval") or "00:00:00") or 60.0

    def delay_before(self, attempt: int) -> float:
        """Seconds to wait before retry number ``attempt`` (1-based)."""
        if self.strategy == "exponential_backoff":
            return min(self.minimum * (2 ** (attempt - 1)), self.maximum)
        return self.delay

    def gives_up_after(self, attempt: int) -> bool:
        return self.max_retries >= 0 and attempt > self.max_retries


class ChangeFeedPump:
    def __init__(self, function: FunctionSpec, store: SessionStore, *, poll_delay: float) -> None:
        self.function = function
        self._store = store
        self._poll_delay = poll_delay
        self._retry = RetryPolicy(function.retry, poll_delay)
        self._max_items = int(function.setting("maxItemsPerInvocation") or DEFAULT_MAX_ITEMS)
        self.checkpoint_name = function.setting("leaseContainerPrefix") or f"{function.name}-"
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name=f"feed-{function.name}", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def request_stop(self) -> None:
        self._stop.set()

    def stop(self, grace: float) -> None:
        """Stop polling; a running invocation finishes (its checkpoint is saved) within ``grace``."""
        self._stop.set()
        self._thread.join(timeout=grace)

    def _run(self) -> None:
        while not self._stop.is_set():
            try:
                drained = self.pump_once()
            except Exception:
                log.exception("change feed for %s failed; retrying", self.function.name)
                drained = True
            if drained:
                self._stop.wait(self._poll_delay)

    def pump_once(self) -> bool:
        """Deliver one batch. True when the feed had nothing (so the caller should wait)."""
        position = self._store.load_checkpoint(self.checkpoint_name)
        batch = self._store.read_changes(position, limit=self._max_items)
        if not batch.docs:
            if batch.position != position:
                self._store.save_checkpoint(self.checkpoint_name, batch.position)
            return True
        attempt = 0
        while True:
            documents = func.DocumentList([func.Document.from_dict(d) for d in batch.docs])
            ok, _ = invoke(self.function, documents, detail=f"documents={len(batch.docs)}")
            if ok:
                break
            attempt += 1
            if self._retry.gives_up_after(attempt):
                log.error("change feed %s: skipping %d documents after %d failed attempts",
                          self.function.name, len(batch.docs), attempt)
                break
            if self._stop.wait(self._retry.delay_before(attempt)):
                return False  # stopping: the checkpoint is not advanced, the batch comes back
        self._store.save_checkpoint(self.checkpoint_name, batch.position)
        return False
