"""AzureTaskQueue against Azurite, checked with a bare azure-storage-queue client."""

from __future__ import annotations

import base64
import time
from pathlib import Path
from typing import Iterator

import pytest
from azure.storage.queue import QueueClient

from blogwriter.errors import ConfigurationError
from blogwriter.queues.azure import AzureTaskQueue
from blogwriter.queues.base import QueueMessage
from blogwriter.settings import Settings
from tests.azure_servers import make_azure_queue, unique_name



@pytest.fixture(scope="module")
def plain(azurite: str) -> Iterator[AzureTaskQueue]:
    queue = make_azure_queue(azurite, encoding="none")
    yield queue
    queue.close()


@pytest.fixture(scope="module")
def b64(azurite: str) -> Iterator[AzureTaskQueue]:
    queue = make_azure_queue(azurite, encoding="base64")
    yield queue
    queue.close()


@pytest.fixture
def name() -> str:
    return unique_name("q")


@pytest.fixture
def bare(azurite: str, name: str) -> Iterator[QueueClient]:
    """The same queue through the SDK alone, with its defaults (plain text, no decoding)."""
    client = QueueClient.from_connection_string(azurite, name)
    client.create_queue()
    yield client
    client.close()


def receive_within(queue: AzureTaskQueue, name: str, *, seconds: float = 10, visibility_timeout: float = 30) -> list[QueueMessage]:
    """Poll until a message is visible (bounded wait for a timeout to expire; not a timing check)."""
    deadline = time.monotonic() + seconds
    while True:
        got = queue.receive(name, visibility_timeout=visibility_timeout)
        if got or time.monotonic() > deadline:
            return got
        time.sleep(0.1)


def test_plain_round_trip(plain: AzureTaskQueue, name: str) -> None:
    plain.send(name, '{"session": "s-1", "seq": 1}')

    (message,) = plain.receive(name)

    assert (message.queue, message.body, message.dequeue_count) == (name, '{"session": "s-1", "seq": 1}', 1)
    plain.delete(message)
    assert plain.count(name) == 0


def test_plain_text_from_another_system_is_read_as_is(plain: AzureTaskQueue, bare: QueueClient, name: str) -> None:
    bare.send_message('{"requestId": "r-1", "topic": "Queues"}')

    (message,) = plain.receive(name)

    assert message.body == '{"requestId": "r-1", "topic": "Queues"}'


def test_base64_is_on_the_wire_and_round_trips(b64: AzureTaskQueue, bare: QueueClient, name: str) -> None:
    body = '{"topic": "Café au lait ☕"}'
    b64.send(name, body)

    (on_the_wire,) = bare.peek_messages()
    (message,) = b64.receive(name)

    assert on_the_wire.content == base64.b64encode(body.encode("utf-8")).decode("ascii")
    assert message.body == body


def test_base64_queue_hands_on_plain_json_it_cannot_decode(b64: AzureTaskQueue, bare: QueueClient, name: str) -> None:
    bare.send_message('{"requestId": "r-2"}')

    (message,) = b64.receive(name)

    assert message.body == '{"requestId": "r-2"}'


def test_received_message_is_invisible_then_redelivered_with_a_higher_dequeue_count(
    plain: AzureTaskQueue, name: str
) -> None:
    plain.send(name, "work")

    (first,) = plain.receive(name, visibility_timeout=1)
    hidden = plain.receive(name)
    (again,) = receive_within(plain, name)

    assert hidden == []
    assert (again.id, again.body, again.dequeue_count) == (first.id, "work", 2)
    assert again.receipt != first.receipt


def test_release_makes_the_message_visible_at_once(plain: AzureTaskQueue, name: str) -> None:
    plain.send(name, "work")
    (first,) = plain.receive(name, visibility_timeout=300)

    plain.release(first)
    (again,) = plain.receive(name)

    assert (again.id, again.dequeue_count) == (first.id, 2)


def test_stale_receipt_is_a_quiet_no_op(plain: AzureTaskQueue, name: str) -> None:
    plain.send(name, "work")
    (stale,) = plain.receive(name, visibility_timeout=1)
    (current,) = receive_within(plain, name, visibility_timeout=300)

    plain.delete(stale)  # someone else holds the message now: not ours to delete
    plain.release(stale)

    assert plain.count(name) == 1
    assert plain.receive(name) == []  # still hidden for its current holder
    plain.delete(current)
    plain.delete(current)  # already gone: also quiet
    plain.release(current)
    assert plain.count(name) == 0


def test_send_with_delay_hides_the_message_until_then(plain: AzureTaskQueue, name: str) -> None:
    plain.send(name, "later", delay_seconds=1)

    assert plain.receive(name) == []
    assert plain.count(name) == 1
    (message,) = receive_within(plain, name)
    assert message.body == "later"


def test_receive_takes_several_and_count_includes_invisible_messages(plain: AzureTaskQueue, name: str) -> None:
    for i in range(3):
        plain.send(name, f"m{i}")

    got = plain.receive(name, max_messages=2)

    assert sorted(m.body for m in got) == ["m0", "m1"]
    assert plain.count(name) == 3


def test_unknown_queue_is_created_empty(plain: AzureTaskQueue, azurite: str, name: str) -> None:
    assert plain.receive(name) == []
    assert plain.count(name) == 0
    assert QueueClient.from_connection_string(azurite, name).get_queue_properties().name == name


def test_from_settings_takes_connection_and_encoding(azurite: str, tmp_path: Path) -> None:
    queue = AzureTaskQueue.from_settings(Settings(home=tmp_path, storage_connection=azurite, queue_encoding="base64"))

    assert queue.encoding == "base64"
    with pytest.raises(ConfigurationError):
        AzureTaskQueue.from_settings(Settings(home=tmp_path))
    queue.close()
