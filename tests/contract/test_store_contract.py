"""The session store contract (DESIGN.md §2, §5): every backend passes these tests."""

from __future__ import annotations

import random
import threading
from datetime import datetime, timedelta, timezone
from typing import Callable

import pytest

from blogwriter.errors import SessionConflict, SessionExists, SessionNotFound
from blogwriter.state import PostRequest, SessionDocument, SessionStatus, new_session
from blogwriter.store.base import SessionStore

from .conftest import unique

T0 = datetime(2025, 3, 1, 9, 0, 0, tzinfo=timezone.utc)


def make_doc(owner: str, *, topic: str = "Why SQLite is enough", now: datetime = T0) -> SessionDocument:
    return new_session(PostRequest(topic=topic), owner, now=now)


def bumped(doc: SessionDocument, version: int) -> SessionDocument:
    """A copy whose State.RevisionNumber (our version marker) is ``version``."""
    copy = doc.model_copy(deep=True)
    copy.State.RevisionNumber = version
    return copy


def user_fields(item: dict) -> dict:
    """A change-feed item without the system properties (``_etag``, ``_ts``, Cosmos' ``_rid``...)."""
    return {k: v for k, v in item.items() if not k.startswith("_")}


def drain(store: SessionStore, position: str | None, *, batch: int = 3) -> tuple[list[dict], str | None]:
    """Read the feed in small batches until nothing new comes; all items and the end position."""
    seen: list[dict] = []
    for _ in range(100_000):
        changes = store.read_changes(position, limit=batch)
        if not changes.docs:
            return seen, changes.position
        assert len(changes.docs) <= batch
        seen.extend(changes.docs)
        position = changes.position
    raise AssertionError("the change feed never ran dry")


# --- create / get ---------------------------------------------------------------------------


def test_create_then_get_round_trips_the_document(store: SessionStore, owner: str) -> None:
    doc = make_doc(owner)

    created = store.create(doc)
    got = store.get(owner, doc.id)

    assert created.doc == doc
    assert got.doc == doc
    assert got.etag == created.etag
    assert got.etag  # a non-empty opaque string


def test_stored_json_keeps_the_design_shape_and_no_etag(store: SessionStore, owner: str) -> None:
    _, start = drain(store, None)
    doc = make_doc(owner)
    created = store.create(doc)

    items = [i for i in drain(store, start)[0] if i.get("id") == doc.id]

    assert items, "a created document appears in the change feed"
    stored = user_fields(items[-1])
    assert stored == doc.to_json_dict()
    assert set(stored) >= {"id", "OwnerId", "CreatedAt", "UpdatedAt", "State"}
    assert {"MainTask", "MinWords", "MaxWords", "ResearchFindings", "Draft", "RevisionNumber"} <= set(
        stored["State"]
    )
    assert created.etag not in repr(stored), "the ETag never goes inside the document"
    assert items[-1]["_etag"] == created.etag
    assert isinstance(items[-1]["_ts"], int)


def test_duplicate_create_raises_session_exists(store: SessionStore, owner: str) -> None:
    doc = make_doc(owner, topic="first")
    first = store.create(doc)
    again = make_doc(owner, topic="second").model_copy(update={"id": doc.id})

    with pytest.raises(SessionExists):
        store.create(again)

    got = store.get(owner, doc.id)
    assert got.doc.State.MainTask == "first"
    assert got.etag == first.etag


def test_get_missing_session_raises_not_found(store: SessionStore, owner: str) -> None:
    with pytest.raises(SessionNotFound):
        store.get(owner, unique("missing"))


# --- replace --------------------------------------------------------------------------------


def test_replace_with_current_etag_stores_and_changes_the_etag(store: SessionStore, owner: str) -> None:
    created = store.create(make_doc(owner))

    replaced = store.replace(bumped(created.doc, 1), created.etag)

    assert replaced.etag != created.etag
    got = store.get(owner, created.doc.id)
    assert got.doc.State.RevisionNumber == 1
    assert got.etag == replaced.etag


def test_stale_etag_replace_raises_conflict_and_keeps_stored_doc(store: SessionStore, owner: str) -> None:
    created = store.create(make_doc(owner))
    current = store.replace(bumped(created.doc, 1), created.etag)

    with pytest.raises(SessionConflict):
        store.replace(bumped(created.doc, 99), created.etag)

    got = store.get(owner, created.doc.id)
    assert got.doc.State.RevisionNumber == 1
    assert got.etag == current.etag


def test_replace_missing_session_raises_not_found(store: SessionStore, owner: str) -> None:
    with pytest.raises(SessionNotFound):
        store.replace(make_doc(owner), "0123456789abcdef")


def test_concurrent_read_modify_write_loses_no_update(
    store_factory: Callable[[], SessionStore], owner: str
) -> None:
    """Threads on two instances increment one counter, retrying on conflict: none is lost."""
    stores = [store_factory(), store_factory()]
    doc = make_doc(owner)
    stores[0].create(doc)
    threads_n, increments = 4, 8
    conflicts: list[int] = []
    errors: list[BaseException] = []

    def worker(store: SessionStore) -> None:
        try:
            for _ in range(increments):
                while True:
                    current = store.get(owner, doc.id)
                    try:
                        store.replace(bumped(current.doc, current.doc.State.RevisionNumber + 1), current.etag)
                        break
                    except SessionConflict:
                        conflicts.append(1)
        except BaseException as exc:  # surfaced below: a thread's failure must fail the test
            errors.append(exc)

    threads = [threading.Thread(target=worker, args=(stores[i % 2],)) for i in range(threads_n)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=120)

    assert not errors, errors
    assert not any(t.is_alive() for t in threads)
    assert stores[1].get(owner, doc.id).doc.State.RevisionNumber == threads_n * increments


# --- owners -----------------------------------------------------------------------------------


def test_get_under_another_owner_raises_not_found(store: SessionStore, owner: str, other_owner: str) -> None:
    doc = make_doc(owner)
    store.create(doc)

    with pytest.raises(SessionNotFound):
        store.get(other_owner, doc.id)


def test_replace_under_another_owner_raises_not_found(store: SessionStore, owner: str, other_owner: str) -> None:
    created = store.create(make_doc(owner))
    hijacked = bumped(created.doc, 7).model_copy(update={"OwnerId": other_owner})

    with pytest.raises(SessionNotFound):
        store.replace(hijacked, created.etag)

    got = store.get(owner, created.doc.id)
    assert got.doc.State.RevisionNumber == 0
    assert got.etag == created.etag


def test_delete_under_another_owner_raises_not_found(store: SessionStore, owner: str, other_owner: str) -> None:
    doc = make_doc(owner)
    store.create(doc)

    with pytest.raises(SessionNotFound):
        store.delete(other_owner, doc.id)

    assert store.get(owner, doc.id).doc == doc


def test_list_shows_only_the_owners_sessions(store: SessionStore, owner: str, other_owner: str) -> None:
    mine = make_doc(owner)
    theirs = make_doc(other_owner)
    store.create(mine)
    store.create(theirs)

    assert [d.id for d in store.list(owner).items] == [mine.id]
    assert [d.id for d in store.list(other_owner).items] == [theirs.id]
    assert store.list(unique("nobody")).items == []


# --- list -------------------------------------------------------------------------------------


def collect_pages(store: SessionStore, owner: str, *, limit: int) -> list[list[SessionDocument]]:
    pages: list[list[SessionDocument]] = []
    continuation: str | None = None
    for _ in range(1_000):
        page = store.list(owner, limit=limit, continuation=continuation)
        assert len(page.items) <= limit
        if page.items:
            pages.append(page.items)
        continuation = page.continuation
        if continuation is None:
            return pages
    raise AssertionError("paging never ended")


def test_list_is_newest_first_with_paging(store: SessionStore, owner: str) -> None:
    docs = [make_doc(owner, topic=f"post {i}", now=T0 + timedelta(minutes=i)) for i in range(5)]
    for doc in random.Random(7).sample(docs, len(docs)):
        store.create(doc)

    pages = collect_pages(store, owner, limit=2)

    assert [len(p) for p in pages][0] == 2
    assert [d.id for p in pages for d in p] == [d.id for d in reversed(docs)]
    assert store.list(owner, limit=2).continuation is not None


def test_paging_through_equal_created_at_neither_repeats_nor_skips(store: SessionStore, owner: str) -> None:
    docs = [make_doc(owner, topic=f"twin {i}") for i in range(5)]
    for doc in docs:
        store.create(doc)

    ids = [d.id for p in collect_pages(store, owner, limit=2) for d in p]

    assert sorted(ids) == sorted(d.id for d in docs)


def test_list_returns_stored_documents(store: SessionStore, owner: str) -> None:
    created = store.create(make_doc(owner))
    store.replace(bumped(created.doc, 3), created.etag)

    (item,) = store.list(owner).items

    assert item == bumped(created.doc, 3)


# --- delete -------------------------------------------------------------------------------------


def test_delete_removes_the_session(store: SessionStore, owner: str) -> None:
    keep, gone = make_doc(owner, topic="keep"), make_doc(owner, topic="gone")
    store.create(keep)
    store.create(gone)

    store.delete(owner, gone.id)

    with pytest.raises(SessionNotFound):
        store.get(owner, gone.id)
    with pytest.raises(SessionNotFound):
        store.delete(owner, gone.id)
    assert [d.id for d in store.list(owner).items] == [keep.id]


# --- find_by_status -------------------------------------------------------------------------------


def test_find_by_status_finds_sessions_across_owners(store: SessionStore, owner: str, other_owner: str) -> None:
    running = [store.create(make_doc(o)) for o in (owner, other_owner)]
    finished = store.create(make_doc(owner))
    done_doc = finished.doc.model_copy(deep=True)
    done_doc.State.Status = SessionStatus.COMPLETED
    done = store.replace(done_doc, finished.etag)
    ours = {owner, other_owner}

    found_running = {s.doc.id: s for s in store.find_by_status(SessionStatus.RUNNING, limit=10_000) if s.doc.OwnerId in ours}
    found_done = {s.doc.id: s for s in store.find_by_status(SessionStatus.COMPLETED, limit=10_000) if s.doc.OwnerId in ours}

    assert set(found_running) == {s.doc.id for s in running}
    assert set(found_done) == {done.doc.id}
    assert found_done[done.doc.id].etag == done.etag
    assert found_running[running[1].doc.id].doc == running[1].doc


def test_find_by_status_honours_the_limit(store: SessionStore, owner: str) -> None:
    for _ in range(3):
        store.create(make_doc(owner))

    assert len(store.find_by_status(SessionStatus.RUNNING, limit=2)) == 2


# --- change feed and checkpoints --------------------------------------------------------------


def test_change_feed_yields_every_documents_latest_version(store: SessionStore, owner: str) -> None:
    _, start = drain(store, None)
    docs = [store.create(make_doc(owner, topic=f"feed {i}")) for i in range(6)]
    final: dict[str, int] = {d.doc.id: 0 for d in docs}
    rng = random.Random(11)
    current = {d.doc.id: d for d in docs}
    for _ in range(15):
        session_id = rng.choice(sorted(current))
        version = final[session_id] + 1
        current[session_id] = store.replace(bumped(current[session_id].doc, version), current[session_id].etag)
        final[session_id] = version

    items, _ = drain(store, start, batch=2)
    last_seen: dict[str, dict] = {}
    for item in items:
        if item.get("OwnerId") == owner:
            last_seen[item["id"]] = item  # change order: the last one seen is the latest

    assert {i: d["State"]["RevisionNumber"] for i, d in last_seen.items()} == final
    assert {i: d["_etag"] for i, d in last_seen.items()} == {i: s.etag for i, s in current.items()}


def test_resuming_from_a_checkpoint_skips_what_was_seen_and_yields_later_writes(
    store_factory: Callable[[], SessionStore], owner: str
) -> None:
    store = store_factory()
    reader = unique("reader")
    _, start = drain(store, None)
    first = store.create(make_doc(owner, topic="before"))
    second = store.create(make_doc(owner, topic="also before"))
    items, position = drain(store, start, batch=1)
    seen = {(i["id"], i["_etag"]) for i in items}
    assert {(first.doc.id, first.etag), (second.doc.id, second.etag)} <= seen

    store.save_checkpoint(reader, position)
    restarted = store_factory()
    resumed_at = restarted.load_checkpoint(reader)
    assert resumed_at == position

    replaced = restarted.replace(bumped(first.doc, 1), first.etag)
    third = restarted.create(make_doc(owner, topic="after"))
    later, _ = drain(restarted, resumed_at, batch=1)
    later_pairs = {(i["id"], i["_etag"]) for i in later}

    assert not later_pairs & seen
    assert {(first.doc.id, replaced.etag), (third.doc.id, third.etag)} <= later_pairs
    assert (second.doc.id, second.etag) not in later_pairs


def test_read_changes_with_nothing_new_keeps_the_position(store: SessionStore, owner: str) -> None:
    store.create(make_doc(owner))
    _, end = drain(store, None)

    batch = store.read_changes(end, limit=10)

    assert [d for d in batch.docs if d.get("OwnerId") == owner] == []
    if not batch.docs:
        assert batch.position == end


def test_checkpoints_are_per_reader_and_overwritten(store: SessionStore, owner: str) -> None:
    a, b = unique("reader"), unique("reader")
    store.create(make_doc(owner))
    _, position = drain(store, None)

    assert store.load_checkpoint(a) is None
    store.save_checkpoint(a, position)
    store.save_checkpoint(b, None)
    assert store.load_checkpoint(a) == position
    assert store.load_checkpoint(b) is None

    store.save_checkpoint(a, None)
    assert store.load_checkpoint(a) is None
