"""The session store on Azure Cosmos DB (NoSQL API, sync ``azure-cosmos`` 4.x).

One item per session in the sessions container (partition key ``/OwnerId``); change-feed
checkpoints are items ``checkpoint-<name>`` in the leases container (partition key ``/id``),
the container the Functions Cosmos trigger keeps its own leases in.

Only a real 404 means "not found": a server error (5xx), persistent throttling (429) or a
network failure becomes :class:`CosmosUnavailable` once the SDK's retries are spent.
"""

from __future__ import annotations

import ipaddress
import threading
from contextlib import contextmanager
from typing import Any, Iterator, Literal
from urllib.parse import urlparse

from azure.core import MatchConditions
from azure.core.exceptions import AzureError
from azure.cosmos import ContainerProxy, CosmosClient, PartitionKey
from azure.cosmos import exceptions as cosmos_errors

from ..errors import BlogWriterError, ConfigurationError, InvalidRequest, SessionConflict, SessionExists, SessionNotFound
from ..settings import Settings
from ..state import SessionDocument, SessionStatus
from .base import ChangeBatch, Page, SessionStore, Stored
from .cosmos_feed import read_changes_incremental, read_changes_poll

ChangeFeedMode = Literal["incremental", "poll"]

# Retries the SDK does by itself before an error reaches us: throttled requests (429) up to
# this many times within this many seconds, honouring the service's retry-after.
THROTTLE_RETRIES = 9
THROTTLE_MAX_WAIT_SECONDS = 30
REQUEST_TIMEOUT_SECONDS = 30

_LIST_QUERY = "SELECT * FROM c WHERE c.OwnerId = @owner ORDER BY c.CreatedAt DESC"
# Oldest update first, so a sweeper with a limit reaches the longest-stuck sessions first.
_STATUS_QUERY = "SELECT * FROM c WHERE c.State.Status = @status ORDER BY c.UpdatedAt ASC"
_FORBIDDEN_ID_CHARS = set("/\\?#")


class CosmosUnavailable(BlogWriterError):
    """Cosmos DB kept failing (throttling, server errors, network) after the SDK's retries."""


def parse_connection_string(connection: str) -> tuple[str, str]:
    """``AccountEndpoint=...;AccountKey=...;`` → (endpoint, key). Keys are case-insensitive."""
    parts: dict[str, str] = {}
    for segment in connection.split(";"):
        if "=" in segment:
            key, value = segment.split("=", 1)  # the account key itself ends in "=="
            parts[key.strip().lower()] = value.strip()
    endpoint, key = parts.get("accountendpoint"), parts.get("accountkey")
    if not endpoint or not key:
        raise ConfigurationError("COSMOS_CONNECTION must look like 'AccountEndpoint=https://...;AccountKey=...;'")
    return endpoint, key


def is_loopback_endpoint(endpoint: str) -> bool:
    host = urlparse(endpoint).hostname or ""
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def _without_system_properties(item: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in item.items() if not k.startswith("_")}


def _stored(item: dict[str, Any]) -> Stored:
    """A stored item as the model plus its ETag (which never enters the model)."""
    return Stored(doc=SessionDocument.model_validate(_without_system_properties(item)), etag=str(item["_etag"]))


class CosmosSessionStore(SessionStore):
    """:class:`SessionStore` on Cosmos DB. The client and containers are made on first use."""

    def __init__(
        self,
        endpoint: str,
        *,
        key: str | None = None,
        database: str = "blogwriter",
        container: str = "sessions",
        lease_container: str = "leases",
        change_feed: Literal["auto", "incremental", "poll"] = "auto",
    ) -> None:
        """Connect with an account key, or with ``DefaultAzureCredential`` when ``key`` is None."""
        self.endpoint = endpoint
        self._key = key
        self.database_name = database
        self.container_name = container
        self.lease_container_name = lease_container
        self.change_feed_mode: ChangeFeedMode = (
            ("poll" if is_loopback_endpoint(endpoint) else "incremental") if change_feed == "auto" else change_feed
        )
        self._lock = threading.Lock()
        self._client: CosmosClient | None = None
        self._sessions: ContainerProxy | None = None
        self._leases: ContainerProxy | None = None

    @classmethod
    def from_settings(cls, settings: Settings) -> "CosmosSessionStore":
        common: dict[str, Any] = dict(
            database=settings.cosmos_database,
            container=settings.cosmos_container,
            lease_container=settings.cosmos_lease_container,
            change_feed=settings.cosmos_change_feed,
        )
        if settings.cosmos_connection:
            endpoint, key = parse_connection_string(settings.cosmos_connection)
            return cls(endpoint, key=key, **common)
        if settings.cosmos_endpoint:
            return cls(settings.cosmos_endpoint, key=None, **common)
        raise ConfigurationError("set COSMOS_CONNECTION or COSMOS_CONNECTION__accountEndpoint for the Cosmos DB store")

    # -- connection ---------------------------------------------------------------------------

    def _connect(self) -> tuple[ContainerProxy, ContainerProxy]:
        with self._lock:
            if self._sessions is not None and self._leases is not None:
                return self._sessions, self._leases
            with self._guard("connect"):
                if self._client is None:
                    self._client = self._make_client()
                db = self._client.create_database_if_not_exists(self.database_name)
                self._sessions = self._ensure_container(db, self.container_name, "/OwnerId")
                self._leases = self._ensure_container(db, self.lease_container_name, "/id")
            return self._sessions, self._leases

    def _make_client(self) -> CosmosClient:
        options: dict[str, Any] = dict(
            retry_total=THROTTLE_RETRIES,
            retry_backoff_max=THROTTLE_MAX_WAIT_SECONDS,
            connection_timeout=REQUEST_TIMEOUT_SECONDS,
            user_agent_suffix="blogwriter",
        )
        if self._key is not None:
            return CosmosClient(self.endpoint, credential=self._key, **options)
        from azure.identity import DefaultAzureCredential  # only deployments with identity need it

        return CosmosClient(self.endpoint, credential=DefaultAzureCredential(), **options)

    @staticmethod
    def _ensure_container(db: Any, name: str, partition_path: str) -> ContainerProxy:
        """Read first: an identity with data-plane roles only may read but not create containers."""
        container = db.get_container_client(name)
        try:
            container.read()
        except cosmos_errors.CosmosResourceNotFoundError:
            container = db.create_container_if_not_exists(id=name, partition_key=PartitionKey(path=partition_path))
        return container

    @contextmanager
    def _guard(self, operation: str) -> Iterator[None]:
        """Turn what is left after the SDK's retries into errors that say what happened."""
        try:
            yield
        except cosmos_errors.CosmosHttpResponseError as err:
            status = err.status_code or 0
            if status in (401, 403):
                raise ConfigurationError(
                    f"Cosmos DB refused {operation} at {self.endpoint} ({status}): check the key or the identity's role"
                ) from err
            if status in (408, 429) or status >= 500:
                raise CosmosUnavailable(f"Cosmos DB {operation} failed after retries ({status}): {err.message}") from err
            raise
        except AzureError as err:  # network errors, client timeouts
            raise CosmosUnavailable(f"Cosmos DB {operation} failed: {err}") from err

    @property
    def _container(self) -> ContainerProxy:
        return self._connect()[0]

    # -- documents ----------------------------------------------------------------------------

    def create(self, doc: SessionDocument) -> Stored:
        container = self._container
        with self._guard("create"):
            try:
                item = container.create_item(body=doc.to_json_dict())
            except cosmos_errors.CosmosResourceExistsError:
                raise SessionExists(f"session {doc.id} already exists") from None
        return _stored(item)

    def get(self, owner_id: str, session_id: str) -> Stored:
        container = self._container
        with self._guard("read"):
            try:
                item = container.read_item(item=session_id, partition_key=owner_id)
            except cosmos_errors.CosmosResourceNotFoundError:
                raise SessionNotFound(f"session {session_id} not found") from None
        return _stored(item)

    def replace(self, doc: SessionDocument, etag: str) -> Stored:
        container = self._container
        with self._guard("replace"):
            try:
                item = container.replace_item(
                    item=doc.id,
                    body=doc.to_json_dict(),
                    etag=etag,
                    match_condition=MatchConditions.IfNotModified,
                )
            except cosmos_errors.CosmosAccessConditionFailedError:
                raise SessionConflict(f"session {doc.id} changed since it was read") from None
            except cosmos_errors.CosmosResourceNotFoundError:
                raise SessionNotFound(f"session {doc.id} not found") from None
        return _stored(item)

    def list(self, owner_id: str, *, limit: int = 20, continuation: str | None = None) -> Page:
        if limit < 1:
            raise InvalidRequest("limit must be at least 1", field="limit")
        container = self._container
        items: list[SessionDocument] = []
        token = continuation
        with self._guard("list"):
            try:
                # A page may come back short; keep asking (never for more than is missing).
                while len(items) < limit:
                    page, token = self._owner_page(container, owner_id, limit - len(items), token)
                    items.extend(SessionDocument.model_validate(_without_system_properties(i)) for i in page)
                    if token is None:
                        break
                # A full page can carry a token that leads nowhere: answer None when nothing follows.
                if token is not None and not self._owner_page(container, owner_id, 1, token)[0]:
                    token = None
            except cosmos_errors.CosmosHttpResponseError as err:
                if err.status_code == 400 and continuation is not None:
                    raise InvalidRequest("the continuation token is not valid", field="continuation") from None
                raise
        return Page(items=items, continuation=token)

    @staticmethod
    def _owner_page(
        container: ContainerProxy, owner_id: str, size: int, token: str | None
    ) -> tuple[list[dict[str, Any]], str | None]:
        pages = container.query_items(
            query=_LIST_QUERY,
            parameters=[{"name": "@owner", "value": owner_id}],
            partition_key=owner_id,
            max_item_count=size,
        ).by_page(token)
        try:
            page = [dict(i) for i in next(pages)]
        except StopIteration:
            return [], None
        return page, pages.continuation_token or None

    def delete(self, owner_id: str, session_id: str) -> None:
        container = self._container
        with self._guard("delete"):
            try:
                container.delete_item(item=session_id, partition_key=owner_id)
            except cosmos_errors.CosmosResourceNotFoundError:
                raise SessionNotFound(f"session {session_id} not found") from None

    def find_by_status(self, status: SessionStatus, *, limit: int = 100) -> list[Stored]:
        container = self._container
        found: list[Stored] = []
        with self._guard("query"):
            items = container.query_items(
                query=_STATUS_QUERY,
                parameters=[{"name": "@status", "value": SessionStatus(status).value}],
                enable_cross_partition_query=True,
                max_item_count=limit,
            )
            for item in items:
                found.append(_stored(item))
                if len(found) >= limit:
                    break
        return found

    # -- change feed ---------------------------------------------------------------------------

    def read_changes(self, position: str | None, *, limit: int = 100) -> ChangeBatch:
        container = self._container
        with self._guard("change feed read"):
            if self.change_feed_mode == "poll":
                return read_changes_poll(container, position, limit=limit)
            return read_changes_incremental(container, position, limit=limit)

    def load_checkpoint(self, name: str) -> str | None:
        leases = self._connect()[1]
        with self._guard("checkpoint read"):
            try:
                item = leases.read_item(item=_checkpoint_id(name), partition_key=_checkpoint_id(name))
            except cosmos_errors.CosmosResourceNotFoundError:
                return None
        position = item.get("Position")
        return str(position) if position is not None else None

    def save_checkpoint(self, name: str, position: str | None) -> None:
        leases = self._connect()[1]
        # When it was saved is in the item's _ts; the store itself never reads the clock.
        body = {"id": _checkpoint_id(name), "Position": position, "Mode": self.change_feed_mode}
        with self._guard("checkpoint write"):
            leases.upsert_item(body=body)

    def close(self) -> None:
        with self._lock:
            if self._client is not None:
                close_client(self._client)
            self._client = self._sessions = self._leases = None


def close_client(client: CosmosClient) -> None:
    """Close a client without racing its background endpoint health check.

    azure-cosmos checks endpoint health on a thread after connecting; closing the transport
    under it makes that thread log a "transport has already been closed" traceback. Let it
    finish first (best effort: a private attribute of azure-cosmos 4.x).
    """
    manager = getattr(client.client_connection, "_global_endpoint_manager", None)
    refresh = getattr(manager, "_refresh_thread", None)
    if refresh is not None and refresh.is_alive():
        refresh.join(timeout=5)
    client.close()


def _checkpoint_id(name: str) -> str:
    if not name or _FORBIDDEN_ID_CHARS & set(name):
        raise ValueError(f"checkpoint name {name!r} must be non-empty and free of / \\ ? #")
    return f"checkpoint-{name}"
