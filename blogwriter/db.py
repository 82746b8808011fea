"""The embedded backends' SQLite file: connections, transactions and the schema migrations.

The session store and the task queue share one file (``Settings.db_path``). Both open it through
:class:`Database`, which gives every thread its own connection (``sqlite3`` connections must not
be shared between threads) and brings the schema up to date once per process.

Concurrency model, for several threads and several processes on one file:

* WAL journal: readers never block the writer and the writer never blocks readers.
* ``busy_timeout``: a writer waits for the write lock instead of failing at once.
* Every write runs in ``BEGIN IMMEDIATE``, which takes the write lock up front. A deferred
  transaction that reads first and upgrades later can fail with ``SQLITE_BUSY`` without waiting;
  an immediate one cannot, and it makes every read-check-write inside it atomic.

Schema changes are an append-only list of named migration functions (the simonw/llm habit):
never edit or reorder one that has shipped; add a new one at the end. The names of applied
migrations are recorded in ``_migrations``.
"""

from __future__ import annotations

import sqlite3
import threading
from contextlib import contextmanager
from pathlib import Path
from typing import Callable, Iterator

Migration = Callable[[sqlite3.Connection], None]

MIGRATIONS: list[tuple[str, Migration]] = []

BUSY_TIMEOUT_SECONDS = 30.0


def migration(fn: Migration) -> Migration:
    """Register ``fn`` as the next migration, under its function name."""
    if any(name == fn.__name__ for name, _ in MIGRATIONS):
        raise ValueError(f"duplicate migration name {fn.__name__!r}")
    MIGRATIONS.append((fn.__name__, fn))
    return fn


# --- migrations: append only ------------------------------------------------------------------


@migration
def m001_sessions(db: sqlite3.Connection) -> None:
    # (owner_id, id) is the key, as in Cosmos DB where an id is unique within its partition.
    # created_us is CreatedAt in UTC epoch microseconds: sortable, unlike ISO strings that
    # sometimes carry fractions and sometimes do not.
    db.execute(
        """
        CREATE TABLE sessions (
            owner_id   TEXT    NOT NULL,
            id         TEXT    NOT NULL,
            created_us INTEGER NOT NULL,
            status     TEXT    NOT NULL,
            doc        TEXT    NOT NULL,
            etag       TEXT    NOT NULL,
            lsn        INTEGER NOT NULL UNIQUE,
            ts         REAL    NOT NULL,
            PRIMARY KEY (owner_id, id)
        )
        """
    )
    db.execute("CREATE INDEX sessions_by_owner_created ON sessions (owner_id, created_us DESC, id DESC)")
    db.execute("CREATE INDEX sessions_by_status ON sessions (status, lsn)")
    # One global change counter. It lives apart from the sessions table so that deleting the
    # newest document can never make an lsn be handed out twice.
    db.execute("CREATE TABLE counters (name TEXT PRIMARY KEY, value INTEGER NOT NULL)")
    db.execute("INSERT INTO counters (name, value) VALUES ('lsn', 0)")
    db.execute("CREATE TABLE checkpoints (name TEXT PRIMARY KEY, position TEXT)")


@migration
def m002_queue_messages(db: sqlite3.Connection) -> None:
    # seq gives "oldest first"; AUTOINCREMENT so a deleted tail never lets a number be reused.
    db.execute(
        """
        CREATE TABLE queue_messages (
            seq           INTEGER PRIMARY KEY AUTOINCREMENT,
            queue         TEXT    NOT NULL,
            id            TEXT    NOT NULL UNIQUE,
            body          TEXT    NOT NULL,
            inserted_at   REAL    NOT NULL,
            visible_at    REAL    NOT NULL,
            dequeue_count INTEGER NOT NULL DEFAULT 0,
            receipt       TEXT
        )
        """
    )
    # Walk a queue oldest first and skip the few messages in flight; an index led by
    # visible_at would instead sort every visible message on each receive.
    db.execute("CREATE INDEX queue_messages_by_queue ON queue_messages (queue, seq)")


# --- connections --------------------------------------------------------------------------------


def connect(path: Path) -> sqlite3.Connection:
    """Open ``path`` (creating its folder) in WAL mode, autocommit, with a busy timeout."""
    path.parent.mkdir(parents=True, exist_ok=True)
    # isolation_level=None: the sqlite3 module must not open transactions behind our back;
    # writes open their own with BEGIN IMMEDIATE (see :meth:`Database.write`).
    conn = sqlite3.connect(
        str(path), timeout=BUSY_TIMEOUT_SECONDS, isolation_level=None, check_same_thread=False
    )
    conn.execute(f"PRAGMA busy_timeout = {int(BUSY_TIMEOUT_SECONDS * 1000)}")
    conn.execute("PRAGMA journal_mode = WAL")
    # NORMAL is durable against application crashes in WAL mode; only an OS crash or power
    # loss may drop the last transactions, which at-least-once delivery already tolerates.
    conn.execute("PRAGMA synchronous = NORMAL")
    conn.execute("PRAGMA foreign_keys = ON")
    return conn


def applied_migrations(conn: sqlite3.Connection) -> list[str]:
    conn.execute("CREATE TABLE IF NOT EXISTS _migrations (name TEXT PRIMARY KEY, applied_at TEXT NOT NULL)")
    return [row[0] for row in conn.execute("SELECT name FROM _migrations ORDER BY rowid")]


def migrate(conn: sqlite3.Connection) -> list[str]:
    """Apply the migrations not applied yet, in order; return their names.

    Runs under the write lock, so two processes opening a fresh file at once do not both
    create the tables.
    """
    conn.execute("BEGIN IMMEDIATE")
    try:
        done = set(applied_migrations(conn))
        ran: list[str] = []
        for name, fn in MIGRATIONS:
            if name in done:
                continue
            fn(conn)
            conn.execute(
                "INSERT INTO _migrations (name, applied_at) VALUES (?, datetime('now'))", (name,)
            )
            ran.append(name)
        conn.execute("COMMIT")
    except BaseException:
        conn.execute("ROLLBACK")
        raise
    return ran


class Database:
    """One SQLite file seen from one process: a connection per thread, migrated on open."""

    def __init__(self, path: Path) -> None:
        self.path = Path(path)
        self._local = threading.local()
        self._lock = threading.Lock()
        self._connections: list[sqlite3.Connection] = []
        self._closed = False
        migrate(self.connection())

    def connection(self) -> sqlite3.Connection:
        """This thread's connection, opened on first use."""
        conn: sqlite3.Connection | None = getattr(self._local, "conn", None)
        if conn is None:
            with self._lock:
                if self._closed:
                    raise RuntimeError(f"database {self.path} is closed")
                conn = connect(self.path)
                self._connections.append(conn)
            self._local.conn = conn
        return conn

    @contextmanager
    def write(self) -> Iterator[sqlite3.Connection]:
        """A ``BEGIN IMMEDIATE`` transaction: committed on success, rolled back on any error."""
        conn = self.connection()
        conn.execute("BEGIN IMMEDIATE")
        try:
            yield conn
        except BaseException:
            conn.execute("ROLLBACK")
            raise
        conn.execute("COMMIT")

    def close(self) -> None:
        """Close every thread's connection. Threads must not use the database afterwards."""
        with self._lock:
            self._closed = True
            connections, self._connections = self._connections, []
        for conn in connections:
            conn.close()
