"""The task queue contract (Azure Storage queue semantics, DESIGN.md §5): every backend passes."""

from __future__ import annotations

import logging
import threading
import time
from typing import Callable

import pytest

from blogwriter.queues.base import QueueMessage, TaskQueue, poison_queue_name
from blogwriter.queues.delivery import receive_for_processing

from .conftest import unique


def receive_within(
    queue: TaskQueue, name: str, *, seconds: float = 10, visibility_timeout: float = 30
) -> list[QueueMessage]:
    """Poll until a message shows up or ``seconds`` pass (bounded; for timeouts that must expire)."""
    deadline = time.monotonic() + seconds
    while True:
        got = queue.receive(name, visibility_timeout=visibility_timeout)
        if got or time.monotonic() > deadline:
            return got
        time.sleep(0.1)


def test_send_receive_delete(queue: TaskQueue, queue_name: str) -> None:
    queue.send(queue_name, '{"hello": "world"}')
    assert queue.count(queue_name) == 1

    (message,) = queue.receive(queue_name, visibility_timeout=30)

    assert message.queue == queue_name
    assert message.body == '{"hello": "world"}'
    assert message.dequeue_count == 1
    assert message.id and message.receipt
    queue.delete(message)
    assert queue.count(queue_name) == 0
    assert queue.receive(queue_name) == []


def test_receive_from_an_empty_or_unknown_queue_is_empty(queue: TaskQueue, queue_name: str) -> None:
    assert queue.receive(queue_name) == []
    assert queue.count(queue_name) == 0


def test_receive_takes_visible_messages_oldest_first(queue: TaskQueue, queue_name: str) -> None:
    for body in ("a", "b", "c"):
        queue.send(queue_name, body)

    first = queue.receive(queue_name, max_messages=2, visibility_timeout=30)
    rest = queue.receive(queue_name, max_messages=5, visibility_timeout=30)

    assert [m.body for m in first] == ["a", "b"]
    assert [m.body for m in rest] == ["c"]
    assert queue.count(queue_name) == 3  # received is not deleted


def test_received_message_is_hidden_then_redelivered_with_a_higher_dequeue_count(
    queue: TaskQueue, queue_name: str
) -> None:
    queue.send(queue_name, "work")
    (first,) = queue.receive(queue_name, visibility_timeout=1)

    assert queue.receive(queue_name, visibility_timeout=1) == []
    (second,) = receive_within(queue, queue_name)

    assert second.id == first.id
    assert second.body == "work"
    assert second.dequeue_count == 2
    assert second.receipt != first.receipt


def test_stale_receipt_delete_is_a_quiet_no_op(queue: TaskQueue, queue_name: str) -> None:
    queue.send(queue_name, "work")
    (first,) = queue.receive(queue_name, visibility_timeout=1)
    (second,) = receive_within(queue, queue_name)

    queue.delete(first)  # the message was delivered again: this receipt no longer owns it

    assert queue.count(queue_name) == 1
    queue.delete(second)
    assert queue.count(queue_name) == 0
    queue.delete(second)  # already gone: still quiet


def test_release_makes_a_message_visible_at_once(queue: TaskQueue, queue_name: str) -> None:
    queue.send(queue_name, "hand back")
    (taken,) = queue.receive(queue_name, visibility_timeout=300)

    queue.release(taken)
    (again,) = queue.receive(queue_name, visibility_timeout=300)

    assert again.id == taken.id
    assert again.dequeue_count == 2


def test_stale_receipt_release_is_a_quiet_no_op(queue: TaskQueue, queue_name: str) -> None:
    queue.send(queue_name, "work")
    (first,) = queue.receive(queue_name, visibility_timeout=300)
    queue.release(first)
    (second,) = queue.receive(queue_name, visibility_timeout=300)

    queue.release(first)  # stale: must not hand the message back behind its new holder's back

    assert queue.receive(queue_name, visibility_timeout=300) == []
    queue.delete(second)
    assert queue.count(queue_name) == 0


def test_delayed_message_becomes_visible_later(queue: TaskQueue, queue_name: str) -> None:
    queue.send(queue_name, "later", delay_seconds=1)

    assert queue.receive(queue_name) == []
    assert queue.count(queue_name) == 1
    (message,) = receive_within(queue, queue_name)
    assert message.body == "later"
    assert message.dequeue_count == 1


def test_queues_are_isolated_from_each_other(queue: TaskQueue) -> None:
    one, two = unique("q"), unique("q")
    queue.send(one, "for one")

    assert queue.receive(two) == []
    assert queue.count(two) == 0
    (message,) = queue.receive(one)
    assert message.body == "for one"
    assert message.queue == one


def test_concurrent_consumers_never_share_a_message(
    queue_factory: Callable[[], TaskQueue], queue_name: str
) -> None:
    queues = [queue_factory(), queue_factory()]
    bodies = {f"m{i}" for i in range(30)}
    for body in sorted(bodies):
        queues[0].send(queue_name, body)
    received: list[str] = []
    lock = threading.Lock()
    errors: list[BaseException] = []

    def consume(q: TaskQueue) -> None:
        try:
            while True:
                got = q.receive(queue_name, max_messages=4, visibility_timeout=300)
                if not got:
                    return
                with lock:
                    received.extend(m.body for m in got)
        except BaseException as exc:  # surfaced below
            errors.append(exc)

    threads = [threading.Thread(target=consume, args=(queues[i % 2],)) for i in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=120)

    assert not errors, errors
    assert sorted(received) == sorted(bodies)


# --- poison (what the Functions host does with maxDequeueCount) ----------------------------------


def test_receive_for_processing_poisons_a_message_after_max_dequeue_count(
    queue: TaskQueue, queue_name: str, caplog: pytest.LogCaptureFixture
) -> None:
    queue.send(queue_name, '{"bad": true}')
    deliveries: list[int] = []
    for _ in range(2):
        (message,) = receive_for_processing(
            queue, queue_name, batch_size=8, visibility_timeout=300, max_dequeue_count=2
        )
        deliveries.append(message.dequeue_count)
        queue.release(message)  # the handler failed

    with caplog.at_level(logging.WARNING, logger="blogwriter.queues.delivery"):
        third = receive_for_processing(queue, queue_name, batch_size=8, visibility_timeout=300, max_dequeue_count=2)

    assert deliveries == [1, 2]
    assert third == []
    assert queue.count(queue_name) == 0
    poison = poison_queue_name(queue_name)
    assert queue.count(poison) == 1
    (poisoned,) = queue.receive(poison)
    assert poisoned.body == '{"bad": true}'
    assert any(r.levelno == logging.WARNING and poison in r.getMessage() for r in caplog.records)


def test_receive_for_processing_keeps_healthy_messages_in_a_mixed_batch(
    queue: TaskQueue, queue_name: str
) -> None:
    queue.send(queue_name, "tired")
    (tired,) = queue.receive(queue_name, visibility_timeout=300)
    queue.release(tired)
    queue.send(queue_name, "fresh")

    ready = receive_for_processing(queue, queue_name, batch_size=8, visibility_timeout=300, max_dequeue_count=1)

    assert [m.body for m in ready] == ["fresh"]
    assert ready[0].dequeue_count == 1
    assert queue.count(queue_name) == 1
    assert [m.body for m in queue.receive(poison_queue_name(queue_name))] == ["tired"]
