"""CosmosSessionStore against a real Cosmos-compatible server, checked with the bare SDK."""

from __future__ import annotations

import json
import threading
from datetime import datetime, timedelta, timezone
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Iterator

import pytest
from azure.cosmos import ContainerProxy

from blogwriter.errors import SessionConflict, SessionExists, SessionNotFound
from blogwriter.settings import Settings
from blogwriter.state import PostRequest, SessionDocument, SessionStatus, new_session
from blogwriter.store.cosmos import THROTTLE_RETRIES, CosmosSessionStore, CosmosUnavailable, close_client
from tests.azure_servers import COSMOS_KEY, HOST, drop_cosmos_database, make_cosmos_store, raw_cosmos_client, unique_name

# azure-cosmos skips TLS verification for the loopback server's self-signed certificate.
pytestmark = pytest.mark.filterwarnings("ignore:Unverified HTTPS request:urllib3.exceptions.InsecureRequestWarning")

T0 = datetime(2025, 3, 1, 9, 0, tzinfo=timezone.utc)


@pytest.fixture(scope="module")
def database(cosmos_server: str) -> Iterator[str]:
    name = unique_name("bw-store")
    yield name
    drop_cosmos_database(cosmos_server, name)


@pytest.fixture(scope="module")
def store(cosmos_server: str, database: str) -> Iterator[CosmosSessionStore]:
    instance = make_cosmos_store(cosmos_server, database)
    yield instance
    instance.close()


@pytest.fixture(scope="module")
def raw_sessions(cosmos_server: str, database: str, store: CosmosSessionStore) -> Iterator[ContainerProxy]:
    """The sessions container through the bare SDK (the store has created it by then)."""
    store.find_by_status(SessionStatus.RUNNING, limit=1)
    client = raw_cosmos_client(cosmos_server)
    yield client.get_database_client(database).get_container_client("sessions")
    close_client(client)


@pytest.fixture
def owner() -> str:
    return unique_name("owner")


def make_doc(owner: str, *, created: datetime = T0, topic: str = "Queues in practice") -> SessionDocument:
    return new_session(PostRequest(topic=topic), owner, now=created)


def test_document_is_stored_whole_in_its_owner_partition_without_etag(
    store: CosmosSessionStore, raw_sessions: ContainerProxy, owner: str
) -> None:
    doc = make_doc(owner)

    stored = store.create(doc)

    raw = raw_sessions.read_item(item=doc.id, partition_key=owner)
    assert stored.etag == raw["_etag"]
    assert {k: v for k, v in raw.items() if not k.startswith("_")} == doc.to_json_dict()
    assert raw["OwnerId"] == owner and raw["State"]["MainTask"] == "Queues in practice"
    assert {"CreatedAt", "UpdatedAt", "State"} <= raw.keys()
    assert not any("etag" in key.lower() for key in stored.doc.to_json_dict())
    assert stored.doc == doc


def test_create_with_a_taken_id_raises_session_exists(store: CosmosSessionStore, owner: str) -> None:
    doc = make_doc(owner)
    store.create(doc)

    with pytest.raises(SessionExists):
        store.create(doc)


def test_get_returns_the_document_and_its_etag(store: CosmosSessionStore, owner: str) -> None:
    created = store.create(make_doc(owner))

    got = store.get(owner, created.doc.id)

    assert got.doc == created.doc
    assert got.etag == created.etag


def test_missing_or_other_owners_session_raises_not_found(store: CosmosSessionStore, owner: str) -> None:
    doc = make_doc(owner)
    store.create(doc)

    with pytest.raises(SessionNotFound):
        store.get(owner, "no-such-session")
    with pytest.raises(SessionNotFound):
        store.get(unique_name("someone-else"), doc.id)


def test_replace_with_current_etag_writes_and_returns_a_new_etag(store: CosmosSessionStore, owner: str) -> None:
    first = store.create(make_doc(owner))
    changed = first.doc.model_copy(deep=True)
    changed.State.Draft = "A first draft."

    second = store.replace(changed, first.etag)

    assert second.etag != first.etag
    assert store.get(owner, changed.id).doc.State.Draft == "A first draft."


def test_replace_with_stale_etag_raises_conflict_and_keeps_the_newer_write(
    store: CosmosSessionStore, owner: str
) -> None:
    first = store.create(make_doc(owner))
    newer = first.doc.model_copy(deep=True)
    newer.State.Draft = "newer"
    store.replace(newer, first.etag)
    stale = first.doc.model_copy(deep=True)
    stale.State.Draft = "stale"

    with pytest.raises(SessionConflict):
        store.replace(stale, first.etag)

    assert store.get(owner, first.doc.id).doc.State.Draft == "newer"


def test_replace_of_a_missing_session_raises_not_found(store: CosmosSessionStore, owner: str) -> None:
    with pytest.raises(SessionNotFound):
        store.replace(make_doc(owner), '"no-such-etag"')


def test_list_pages_through_an_owners_sessions_newest_first(store: CosmosSessionStore, owner: str) -> None:
    docs = [make_doc(owner, created=T0 + timedelta(minutes=i), topic=f"post {i}") for i in range(5)]
    for doc in docs:
        store.create(doc)
    store.create(make_doc(unique_name("someone-else"), created=T0 + timedelta(days=1)))

    pages = [store.list(owner, limit=2)]
    while pages[-1].continuation is not None:
        pages.append(store.list(owner, limit=2, continuation=pages[-1].continuation))

    assert [[d.State.MainTask for d in p.items] for p in pages] == [["post 4", "post 3"], ["post 2", "post 1"], ["post 0"]]


def test_list_ends_without_continuation_when_the_last_page_is_full(store: CosmosSessionStore, owner: str) -> None:
    for i in range(4):
        store.create(make_doc(owner, created=T0 + timedelta(minutes=i)))

    first = store.list(owner, limit=2)
    second = store.list(owner, limit=2, continuation=first.continuation)

    assert len(first.items) == 2 and first.continuation is not None
    assert len(second.items) == 2 and second.continuation is None


def test_list_of_an_owner_without_sessions_is_empty(store: CosmosSessionStore) -> None:
    page = store.list(unique_name("nobody"))

    assert page.items == [] and page.continuation is None


def test_delete_removes_the_document(store: CosmosSessionStore, owner: str) -> None:
    doc = make_doc(owner)
    store.create(doc)

    store.delete(owner, doc.id)

    with pytest.raises(SessionNotFound):
        store.get(owner, doc.id)
    with pytest.raises(SessionNotFound):
        store.delete(owner, doc.id)


def test_find_by_status_looks_across_owners(store: CosmosSessionStore, owner: str) -> None:
    running_here = store.create(make_doc(owner)).doc
    running_there = store.create(make_doc(unique_name("someone-else"))).doc
    done = make_doc(owner)
    done.State.Status = SessionStatus.COMPLETED
    store.create(done)

    running_ids = {s.doc.id for s in store.find_by_status(SessionStatus.RUNNING, limit=1000)}
    completed = store.find_by_status(SessionStatus.COMPLETED, limit=1000)

    assert {running_here.id, running_there.id} <= running_ids
    assert done.id not in running_ids
    assert done.id in {s.doc.id for s in completed}
    assert all(s.etag for s in completed)
    assert len(store.find_by_status(SessionStatus.RUNNING, limit=1)) == 1


def test_checkpoint_round_trip_and_missing_checkpoint_is_none(store: CosmosSessionStore) -> None:
    name = unique_name("reader")
    assert store.load_checkpoint(name) is None

    store.save_checkpoint(name, "position-1")
    store.save_checkpoint(name, "position-2")

    assert store.load_checkpoint(name) == "position-2"


# -- change feed ---------------------------------------------------------------------------------


@pytest.fixture
def feed_store(cosmos_server: str) -> Iterator[CosmosSessionStore]:
    """A store on a database of its own, so the feed holds only this test's writes."""
    database = unique_name("bw-feed")
    instance = make_cosmos_store(cosmos_server, database, change_feed="poll")
    yield instance
    instance.close()
    drop_cosmos_database(cosmos_server, database)


def test_poll_change_feed_sees_every_change_and_resumes_from_a_checkpoint(
    feed_store: CosmosSessionStore, cosmos_server: str, owner: str
) -> None:
    created = [feed_store.create(make_doc(owner, topic=f"post {i}")) for i in range(3)]

    first = feed_store.read_changes(None, limit=2)
    second = feed_store.read_changes(first.position, limit=2)
    feed_store.save_checkpoint("router", second.position)

    assert len(first.docs) == 2 and len(second.docs) == 1
    assert {d["id"] for d in first.docs + second.docs} == {s.doc.id for s in created}
    assert all("_etag" in d and "_ts" in d for d in first.docs + second.docs)
    assert feed_store.read_changes(second.position).docs == []

    # Another process picks up where the checkpoint says, and sees only the new write.
    resumed = make_cosmos_store(cosmos_server, feed_store.database_name, change_feed="poll")
    changed = created[1].doc.model_copy(deep=True)
    changed.State.Draft = "draft"
    rewritten = resumed.replace(changed, created[1].etag)

    batch = resumed.read_changes(resumed.load_checkpoint("router"))

    assert [(d["id"], d["_etag"], d["State"]["Draft"]) for d in batch.docs] == [(changed.id, rewritten.etag, "draft")]
    assert resumed.read_changes(batch.position).docs == []
    resumed.close()


def test_incremental_change_feed_reads_the_sdk_feed(cosmos_server: str, owner: str) -> None:
    """Only the mechanics: the local server's feed is a snapshot, a real account's is incremental."""
    database = unique_name("bw-feed")
    store = make_cosmos_store(cosmos_server, database, change_feed="incremental")
    try:
        ids = {store.create(make_doc(owner)).doc.id for _ in range(2)}

        batch = store.read_changes(None)
        later = store.read_changes(batch.position)

        assert {d["id"] for d in batch.docs} == ids
        assert all("_etag" in d and "_ts" in d for d in batch.docs)
        assert batch.position is not None and later.position is not None
    finally:
        store.close()
        drop_cosmos_database(cosmos_server, database)


def test_auto_change_feed_polls_on_loopback_and_uses_the_sdk_feed_elsewhere(cosmos_server: str, tmp_path: Path) -> None:
    local = CosmosSessionStore.from_settings(Settings(home=tmp_path, cosmos_connection=cosmos_server))
    remote = CosmosSessionStore.from_settings(
        Settings(home=tmp_path, cosmos_endpoint="https://blogwriter.documents.azure.com:443/")
    )

    assert local.change_feed_mode == "poll"
    assert remote.change_feed_mode == "incremental"


# -- failures that persist -------------------------------------------------------------------------


class _FailingCosmos(BaseHTTPRequestHandler):
    """A Cosmos endpoint that describes its account and then answers every request with ``status``.

    No local server can be made to throttle; this one stands in for an account under pressure.
    """

    status = 429
    hits = 0
    endpoint = ""

    def log_message(self, *args: object) -> None:
        pass

    def _answer(self) -> None:
        self.rfile.read(int(self.headers.get("content-length") or 0))
        if self.command == "GET" and self.path == "/":
            here = f"http://{HOST}:{self.server.server_address[1]}/"
            location = [{"name": "Local", "databaseAccountEndpoint": here}]
            code, body = 200, {
                "id": "failing", "_rid": "failing", "_self": "", "_dbs": "//dbs/", "media": "//media/",
                "addresses": "//addresses/", "writableLocations": location, "readableLocations": location,
                "enableMultipleWriteLocations": False, "userConsistencyPolicy": {"defaultConsistencyLevel": "Session"},
                "queryEngineConfiguration": "{}",
            }
        else:
            type(self).hits += 1
            code, body = self.status, {"code": "Injected", "message": f"injected {self.status}"}
        data = json.dumps(body).encode()
        self.send_response(code)
        self.send_header("content-type", "application/json")
        self.send_header("content-length", str(len(data)))
        self.send_header("x-ms-retry-after-ms", "1")
        self.end_headers()
        self.wfile.write(data)

    do_GET = do_POST = do_PUT = do_DELETE = _answer


@pytest.fixture
def failing_cosmos() -> Iterator[type[_FailingCosmos]]:
    server = ThreadingHTTPServer((HOST, 0), _FailingCosmos)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    _FailingCosmos.hits = 0
    _FailingCosmos.endpoint = f"http://{HOST}:{server.server_address[1]}/"
    yield _FailingCosmos
    server.shutdown()
    server.server_close()


def _store_on(endpoint: str) -> CosmosSessionStore:
    return CosmosSessionStore(endpoint, key=COSMOS_KEY, database="failing")


def test_persistent_throttling_is_retried_then_raised_as_unavailable(failing_cosmos: type[_FailingCosmos]) -> None:
    failing_cosmos.status = 429
    store = _store_on(failing_cosmos.endpoint)

    with pytest.raises(CosmosUnavailable, match="429"):
        store.get("owner", "session")

    assert failing_cosmos.hits == THROTTLE_RETRIES + 1
    store.close()


def test_server_error_is_unavailable_never_not_found(failing_cosmos: type[_FailingCosmos]) -> None:
    failing_cosmos.status = 500
    store = _store_on(failing_cosmos.endpoint)

    with pytest.raises(CosmosUnavailable, match="500"):
        store.get("owner", "session")
    store.close()
