"""The task queue on Azure Storage queues (``azure-storage-queue`` 12.x).

Encoding is chosen on purpose (LOCAL-AZURE-NOTES.md, "Queue message encoding"): the Functions
host decodes base64 by default, ``azure-storage-queue`` sends plain text by default, and a
mismatch sends every message to poison. ``encoding="base64"`` matches a host with the default
``messageEncoding``; ``"none"`` matches ``messageEncoding: none`` and other systems that drop
plain JSON on a queue.
"""

from __future__ import annotations

import binascii
import logging
import math
import threading
from base64 import b64decode
from typing import Any, Literal

from azure.core.exceptions import HttpResponseError, ResourceExistsError
from azure.storage.queue import (
    QueueClient,
    QueueServiceClient,
    StorageErrorCode,
    TextBase64DecodePolicy,
    TextBase64EncodePolicy,
)

from ..errors import ConfigurationError
from ..settings import Settings
from .base import QueueMessage, TaskQueue

QueueEncoding = Literal["none", "base64"]

log = logging.getLogger(__name__)

# Azure's limits: receive takes 1..32 messages; visibility is 1 s .. 7 days on receive and
# 0 s .. 7 days on send/update.
MAX_BATCH = 32
MAX_VISIBILITY_SECONDS = 7 * 24 * 3600

# What "this receipt is no longer yours" looks like: Azure answers 404 MessageNotFound when
# the message is gone or its receipt is stale; Azurite answers 400 PopReceiptMismatch when the
# message was received again by someone else (measured with Azurite 3.35). Compared with ==
# (the SDK gives a str or a StorageErrorCode, whose hash differs from its value's).
_STALE_RECEIPT = (
    (404, StorageErrorCode.MESSAGE_NOT_FOUND),
    (400, StorageErrorCode.POP_RECEIPT_MISMATCH),
)


class LenientBase64DecodePolicy(TextBase64DecodePolicy):
    """Strict base64 decoding that hands non-base64 text up unchanged.

    The SDK's policy raises for the whole receive call on one undecodable message, which
    would keep that message (and its batch) from ever reaching the poison path. Plain JSON
    (always starting with ``{``) is never valid base64, so passing it through is unambiguous
    for this app's messages, and the handler still rejects what does not parse.
    """

    def decode(self, content: str, response: Any) -> str:
        try:
            return b64decode(content.encode("utf-8"), validate=True).decode("utf-8")
        except (binascii.Error, ValueError):
            log.warning("queue message is not base64; passing it on as plain text")
            return content


def _seconds(value: float, *, minimum: int) -> int:
    return max(minimum, min(MAX_VISIBILITY_SECONDS, math.ceil(value)))


def _is_stale_receipt(err: HttpResponseError) -> bool:
    return any(err.status_code == status and err.error_code == code for status, code in _STALE_RECEIPT)


class AzureTaskQueue(TaskQueue):
    """:class:`TaskQueue` on Azure Storage queues; queues are created on first use."""

    def __init__(self, service: QueueServiceClient, *, encoding: QueueEncoding = "none") -> None:
        if encoding not in ("none", "base64"):
            raise ConfigurationError(f"queue encoding must be 'none' or 'base64', got {encoding!r}")
        self.service = service
        self.encoding: QueueEncoding = encoding
        self._lock = threading.Lock()
        self._clients: dict[str, QueueClient] = {}
        self._existing: set[str] = set()

    @classmethod
    def from_connection_string(cls, connection: str, *, encoding: QueueEncoding = "none") -> "AzureTaskQueue":
        """``UseDevelopmentStorage=true`` or a full storage account connection string."""
        return cls(QueueServiceClient.from_connection_string(connection), encoding=encoding)

    @classmethod
    def from_settings(cls, settings: Settings) -> "AzureTaskQueue":
        if settings.storage_connection:
            return cls.from_connection_string(settings.storage_connection, encoding=settings.queue_encoding)
        if settings.storage_queue_uri:
            from azure.identity import DefaultAzureCredential  # only deployments with identity need it

            service = QueueServiceClient(settings.storage_queue_uri, credential=DefaultAzureCredential())
            return cls(service, encoding=settings.queue_encoding)
        raise ConfigurationError("set AzureWebJobsStorage or AzureWebJobsStorage__queueServiceUri for Azure queues")

    def _queue(self, name: str) -> QueueClient:
        """The client for ``name``, creating the queue the first time this process uses it."""
        with self._lock:
            client = self._clients.get(name)
            if client is None:
                policies: dict[str, Any] = {}
                if self.encoding == "base64":
                    policies = dict(
                        message_encode_policy=TextBase64EncodePolicy(),
                        message_decode_policy=LenientBase64DecodePolicy(),
                    )
                client = self.service.get_queue_client(name, **policies)
                self._clients[name] = client
            if name not in self._existing:
                try:
                    client.create_queue()
                except ResourceExistsError:
                    pass
                self._existing.add(name)
        return client

    def send(self, queue: str, body: str, *, delay_seconds: float = 0) -> None:
        delay = _seconds(delay_seconds, minimum=0) if delay_seconds > 0 else None
        self._queue(queue).send_message(body, visibility_timeout=delay)

    def receive(self, queue: str, *, max_messages: int = 1, visibility_timeout: float = 30) -> list[QueueMessage]:
        count = max(1, min(MAX_BATCH, max_messages))
        received = self._queue(queue).receive_messages(
            max_messages=count,
            messages_per_page=count,
            visibility_timeout=_seconds(visibility_timeout, minimum=1),
        )
        return [
            QueueMessage(
                queue=queue,
                id=m.id,
                receipt=m.pop_receipt or "",
                body=m.content if isinstance(m.content, str) else str(m.content),
                dequeue_count=int(m.dequeue_count or 0),
            )
            for m in received
        ]

    def delete(self, message: QueueMessage) -> None:
        try:
            self._queue(message.queue).delete_message(message.id, message.receipt)
        except HttpResponseError as err:
            if not _is_stale_receipt(err):
                raise

    def release(self, message: QueueMessage) -> None:
        try:
            self._queue(message.queue).update_message(message.id, message.receipt, visibility_timeout=0)
        except HttpResponseError as err:
            if not _is_stale_receipt(err):
                raise

    def count(self, queue: str) -> int:
        properties = self._queue(queue).get_queue_properties()
        return int(properties.approximate_message_count or 0)

    def close(self) -> None:
        with self._lock:
            for client in self._clients.values():
                client.close()
            self._clients.clear()
            self._existing.clear()
        self.service.close()
