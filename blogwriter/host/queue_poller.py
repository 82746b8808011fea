"""Poll one queue for one queue trigger, the way the Functions queue listener does.

* Receive up to ``batchSize`` messages; fetch again when no more than ``newBatchThreshold`` are
  still running (so at most ``batchSize + newBatchThreshold`` run at once).
* A message delivered more than ``maxDequeueCount`` times goes to ``<queue>-poison`` instead
  (:func:`blogwriter.queues.delivery.receive_for_processing`).
* ``messageEncoding`` ``base64`` decodes the body first; a body that does not decode fails the
  invocation like any other error.
* Success deletes the message. Failure logs and hands the message back after
  ``visibilityTimeout`` (0: at once) with its dequeue count already one higher.
* An empty queue backs off from 100 ms, doubling, up to ``maxPollingInterval``.
* While a function runs, its message stays hidden for ``functionTimeout`` (a crashed host's
  messages come back after that); a clean stop waits for running functions for a grace period
  and releases whatever is still held, so nothing is lost.
"""

from __future__ import annotations

import base64
import binascii
import logging
import threading
import time

from azure.functions.queue import QueueMessage as FuncQueueMessage

from ..queues.base import QueueMessage, TaskQueue
from ..queues.delivery import receive_for_processing
from .config import QueuesConfig
from .loader import FunctionSpec, invoke

log = logging.getLogger("blogwriter.host")

MIN_POLL_SECONDS = 0.1


def decode_body(body: str, encoding: str) -> bytes:
    """The bytes the function sees, per host.json ``messageEncoding``."""
    if encoding == "base64":
        try:
            return base64.b64decode(body.strip(), validate=True)
        except (binascii.Error, ValueError):
            raise ValueError("message is not valid base64 (host.json messageEncoding is base64)") from None
    return body.encode("utf-8")


class QueuePoller:
    def __init__(
        self,
        function: FunctionSpec,
        queue_name: str,
        queue: TaskQueue,
        config: QueuesConfig,
        *,
        max_polling_interval: float,
        processing_timeout: float,
    ) -> None:
        self.function = function
        self.queue_name = queue_name
        self._queue = queue
        self._config = config
        self._max_interval = max(max_polling_interval, MIN_POLL_SECONDS)
        self._processing_timeout = processing_timeout
        self._stop = threading.Event()
        self._lock = threading.Condition()
        self._in_flight: dict[str, QueueMessage] = {}
        self._retry_at: list[tuple[float, QueueMessage]] = []
        self._capacity = config.batchSize + config.threshold
        self._thread = threading.Thread(target=self._run, name=f"poll-{queue_name}", daemon=True)

    def start(self) -> None:
        self._thread.start()

    # -- the polling loop --------------------------------------------------------------------

    def _run(self) -> None:
        interval = MIN_POLL_SECONDS
        while not self._stop.is_set():
            self._release_due()
            with self._lock:
                while len(self._in_flight) > self._config.threshold and not self._stop.is_set():
                    self._lock.wait(timeout=0.5)
                    self._release_due()
            if self._stop.is_set():
                break
            try:
                messages = receive_for_processing(
                    self._queue,
                    self.queue_name,
                    batch_size=min(self._config.batchSize, self._capacity - len(self._in_flight)),
                    visibility_timeout=self._processing_timeout,
                    max_dequeue_count=self._config.maxDequeueCount,
                )
            except Exception:
                log.exception("receiving from %s failed; retrying", self.queue_name)
                messages = []
            if not messages:
                self._stop.wait(interval)
                interval = min(interval * 2, self._max_interval)
                continue
            interval = MIN_POLL_SECONDS
            for message in messages:
                if self._stop.is_set():  # stopping between receive and start: hand it straight back
                    self._queue.release(message)
                    continue
                with self._lock:
                    self._in_flight[message.id] = message
                # Daemon threads (not an executor): a function still running after the grace
                # period must not keep the process alive; its message has been released.
                threading.Thread(target=self._process, args=(message,), name=f"fn-{self.queue_name}",
                                 daemon=True).start()

    def _process(self, message: QueueMessage) -> None:
        detail = f"queue={self.queue_name} id={message.id} dequeueCount={message.dequeue_count}"
        try:
            body = decode_body(message.body, self._config.messageEncoding)
        except ValueError as exc:
            log.error("Executed 'Functions.%s' (Failed) %s: %s", self.function.name, detail, exc)
            ok = False
        else:
            argument = FuncQueueMessage(
                id=message.id, body=body, dequeue_count=message.dequeue_count, pop_receipt=message.receipt
            )
            ok, _ = invoke(self.function, argument, detail=detail)
        with self._lock:
            held = self._in_flight.pop(message.id, None) is not None
            if held and not ok and self._config.visibilityTimeout > 0 and not self._stop.is_set():
                self._retry_at.append((time.monotonic() + self._config.visibilityTimeout, message))
            self._lock.notify_all()
        if not held:  # released by a stop that did not wait for us: someone else owns it now
            return
        try:
            if ok:
                self._queue.delete(message)
            elif self._config.visibilityTimeout <= 0 or self._stop.is_set():
                self._queue.release(message)
        except Exception:
            log.exception("could not settle message %s on %s; it will reappear", message.id, self.queue_name)

    def _release_due(self, *, everything: bool = False) -> None:
        now = time.monotonic()
        with self._lock:
            due = [m for t, m in self._retry_at if everything or t <= now]
            self._retry_at = [(t, m) for t, m in self._retry_at if not (everything or t <= now)]
        for message in due:
            try:
                self._queue.release(message)
            except Exception:
                log.exception("could not release message %s on %s; it reappears later", message.id, self.queue_name)

    # -- stopping ----------------------------------------------------------------------------

    def request_stop(self) -> None:
        self._stop.set()
        with self._lock:
            self._lock.notify_all()

    def stop(self, grace: float) -> None:
        """Stop receiving, wait up to ``grace`` seconds for running functions, release the rest."""
        self.request_stop()
        self._thread.join(timeout=max(grace, 1.0))
        deadline = time.monotonic() + grace
        with self._lock:
            while self._in_flight and time.monotonic() < deadline:
                self._lock.wait(timeout=min(0.2, max(deadline - time.monotonic(), 0.01)))
            abandoned = list(self._in_flight.values())
            self._in_flight.clear()
        for message in abandoned:
            log.warning("function %s still running at stop; released message %s", self.function.name, message.id)
            self._queue.release(message)
        self._release_due(everything=True)

    @property
    def in_flight(self) -> int:
        with self._lock:
            return len(self._in_flight)
