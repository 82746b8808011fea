"""Throughput of the embedded SQLite backends on a temporary database.

Run: ``.venv/bin/python bench/bench_sqlite.py [--sessions N] [--messages N]``. Prints operations
per second for the session store (create, get, replace, list, read_changes) and for queue round
trips (send, receive, delete). One thread, one process: the numbers are a floor for comparing
changes, not a capacity plan.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Callable

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # run from a checkout, uninstalled

from blogwriter.queues.sqlite import SqliteTaskQueue  # noqa: E402
from blogwriter.state import PostRequest, new_session  # noqa: E402
from blogwriter.store.base import Stored  # noqa: E402
from blogwriter.store.sqlite import SqliteSessionStore  # noqa: E402


def timed(label: str, count: int, fn: Callable[[int], object]) -> None:
    start = time.perf_counter()
    for i in range(count):
        fn(i)
    elapsed = time.perf_counter() - start
    print(f"{label:<34} {count:>7} ops  {count / elapsed:>10.0f} ops/s  {elapsed * 1e6 / count:>8.1f} us/op")


def bench_store(path: Path, n: int) -> None:
    store = SqliteSessionStore(path)
    t0 = datetime(2025, 1, 1, tzinfo=timezone.utc)
    owners = [f"owner-{i}" for i in range(10)]
    docs = [
        new_session(PostRequest(topic=f"benchmark post {i}"), owners[i % len(owners)], now=t0 + timedelta(seconds=i))
        for i in range(n)
    ]
    stored: list[Stored] = []

    timed("store.create", n, lambda i: stored.append(store.create(docs[i])))
    timed("store.get", n, lambda i: store.get(docs[i].OwnerId, docs[i].id))

    def replace(i: int) -> None:
        doc = stored[i].doc.model_copy(deep=True)
        doc.State.RevisionNumber += 1
        stored[i] = store.replace(doc, stored[i].etag)

    timed("store.replace", n, replace)
    timed("store.list (20 per page)", max(1, n // 10), lambda i: store.list(owners[i % len(owners)], limit=20))

    position: list[str | None] = [None]

    def read_changes(_: int) -> None:
        batch = store.read_changes(position[0], limit=100)
        position[0] = batch.position if batch.docs else None  # wrap around to keep reading

    timed("store.read_changes (100 per batch)", max(1, n // 100), read_changes)
    store.close()


def bench_queue(path: Path, n: int) -> None:
    queue = SqliteTaskQueue(path)
    timed("queue.send", n, lambda i: queue.send("bench", f'{{"n": {i}}}'))

    def receive_delete(_: int) -> None:
        for message in queue.receive("bench", visibility_timeout=60):
            queue.delete(message)

    timed("queue.receive+delete", n, receive_delete)

    def round_trip(i: int) -> None:
        queue.send("bench-rt", str(i))
        (message,) = queue.receive("bench-rt", visibility_timeout=60)
        queue.delete(message)

    timed("queue send+receive+delete", n, round_trip)
    queue.close()


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sessions", type=int, default=2_000)
    parser.add_argument("--messages", type=int, default=2_000)
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "bench.sqlite3"
        print(f"SQLite file: {path}")
        bench_store(path, args.sessions)
        bench_queue(path, args.messages)


if __name__ == "__main__":
    main()
