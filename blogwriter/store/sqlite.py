"""The embedded session store: one SQLite file, Cosmos DB semantics (DESIGN.md §5).

What it copies from Cosmos DB, so the same handlers and contract tests serve both:

* A session is keyed by ``(OwnerId, id)`` like an item in its partition; reading, replacing or
  deleting under another owner answers :class:`SessionNotFound`.
* Every write gets a fresh opaque ETag, kept in its own column and never in the document.
* The change feed hands out each document's latest version in write order. Every create and
  replace moves the document to a new value of one global counter (its ``lsn``), so a reader
  that remembers the last lsn it saw resumes exactly where it stopped. Feed items carry
  ``_etag`` and ``_ts`` (epoch seconds) like Cosmos items. Deletes are not in the feed.
"""

from __future__ import annotations

import base64
import json
import sqlite3
import time
import uuid
from datetime import datetime, timezone
from pathlib import Path

from ..db import Database
from ..errors import SessionConflict, SessionExists, SessionNotFound
from ..state import SessionDocument, SessionStatus
from .base import ChangeBatch, Page, SessionStore, Stored


def _epoch_us(moment: datetime) -> int:
    """CreatedAt as UTC epoch microseconds (a naive datetime is taken to be UTC)."""
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=timezone.utc)
    delta = moment - datetime(1970, 1, 1, tzinfo=timezone.utc)
    return (delta.days * 86_400 + delta.seconds) * 1_000_000 + delta.microseconds


def _encode_continuation(created_us: int, session_id: str) -> str:
    raw = json.dumps([created_us, session_id], separators=(",", ":")).encode()
    return base64.urlsafe_b64encode(raw).decode().rstrip("=")


def _decode_continuation(token: str) -> tuple[int, str]:
    try:
        raw = base64.urlsafe_b64decode(token + "=" * (-len(token) % 4))
        created_us, session_id = json.loads(raw)
        if not isinstance(created_us, int) or not isinstance(session_id, str):
            raise ValueError("bad types")
    except (ValueError, TypeError) as exc:
        raise ValueError(f"invalid continuation token {token!r}") from exc
    return created_us, session_id


def _parse_position(position: str | None) -> int:
    if position is None:
        return 0
    try:
        lsn = int(position)
    except ValueError:
        raise ValueError(f"invalid change-feed position {position!r}") from None
    if lsn < 0:
        raise ValueError(f"invalid change-feed position {position!r}")
    return lsn


class SqliteSessionStore(SessionStore):
    """Sessions in a SQLite file; safe for many threads and many processes on one file."""

    def __init__(self, path: Path) -> None:
        self._db = Database(path)

    @property
    def path(self) -> Path:
        return self._db.path

    # --- writes -------------------------------------------------------------------------------

    @staticmethod
    def _next_lsn(conn: sqlite3.Connection) -> int:
        # Called inside BEGIN IMMEDIATE: writers are serialized, so lsn order is commit order
        # and a feed reader can never see lsn n+1 committed before lsn n.
        row = conn.execute("UPDATE counters SET value = value + 1 WHERE name = 'lsn' RETURNING value").fetchone()
        return int(row[0])

    def create(self, doc: SessionDocument) -> Stored:
        etag = uuid.uuid4().hex
        data = doc.to_json_dict()
        body = json.dumps(data, separators=(",", ":"))
        with self._db.write() as conn:
            taken = conn.execute(
                "SELECT 1 FROM sessions WHERE owner_id = ? AND id = ?", (doc.OwnerId, doc.id)
            ).fetchone()
            if taken:
                raise SessionExists(f"session {doc.id} already exists")
            conn.execute(
                "INSERT INTO sessions (owner_id, id, created_us, status, doc, etag, lsn, ts)"
                " VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
                (
                    doc.OwnerId,
                    doc.id,
                    _epoch_us(doc.CreatedAt),
                    doc.State.Status.value,
                    body,
                    etag,
                    self._next_lsn(conn),
                    time.time(),
                ),
            )
        # The document as a later get would return it, and not the caller's object, which the
        # caller may go on changing.
        return Stored(doc=SessionDocument.model_validate(data), etag=etag)

    def replace(self, doc: SessionDocument, etag: str) -> Stored:
        new_etag = uuid.uuid4().hex
        data = doc.to_json_dict()
        body = json.dumps(data, separators=(",", ":"))
        with self._db.write() as conn:
            row = conn.execute(
                "SELECT etag FROM sessions WHERE owner_id = ? AND id = ?", (doc.OwnerId, doc.id)
            ).fetchone()
            if row is None:
                raise SessionNotFound(f"session {doc.id} not found")
            if row[0] != etag:
                raise SessionConflict(f"session {doc.id} changed since it was read")
            # CreatedAt is taken from the new document, as Cosmos would index whatever is stored.
            conn.execute(
                "UPDATE sessions SET created_us = ?, status = ?, doc = ?, etag = ?, lsn = ?, ts = ?"
                " WHERE owner_id = ? AND id = ?",
                (
                    _epoch_us(doc.CreatedAt),
                    doc.State.Status.value,
                    body,
                    new_etag,
                    self._next_lsn(conn),
                    time.time(),
                    doc.OwnerId,
                    doc.id,
                ),
            )
        return Stored(doc=SessionDocument.model_validate(data), etag=new_etag)

    def delete(self, owner_id: str, session_id: str) -> None:
        with self._db.write() as conn:
            cur = conn.execute("DELETE FROM sessions WHERE owner_id = ? AND id = ?", (owner_id, session_id))
            if cur.rowcount == 0:
                raise SessionNotFound(f"session {session_id} not found")

    # --- reads --------------------------------------------------------------------------------

    def get(self, owner_id: str, session_id: str) -> Stored:
        row = (
            self._db.connection()
            .execute("SELECT doc, etag FROM sessions WHERE owner_id = ? AND id = ?", (owner_id, session_id))
            .fetchone()
        )
        if row is None:
            raise SessionNotFound(f"session {session_id} not found")
        return Stored(doc=SessionDocument.model_validate_json(row[0]), etag=row[1])

    def list(self, owner_id: str, *, limit: int = 20, continuation: str | None = None) -> Page:
        """Newest first (CreatedAt, then id, both descending); keyset paging.

        The continuation is the (CreatedAt, id) of the last item returned, so sessions created
        or deleted between pages never shift the next page.
        """
        if limit < 1:
            raise ValueError("limit must be at least 1")
        conn = self._db.connection()
        if continuation is None:
            rows = conn.execute(
                "SELECT doc, created_us, id FROM sessions WHERE owner_id = ?"
                " ORDER BY created_us DESC, id DESC LIMIT ?",
                (owner_id, limit + 1),
            ).fetchall()
        else:
            created_us, last_id = _decode_continuation(continuation)
            rows = conn.execute(
                "SELECT doc, created_us, id FROM sessions WHERE owner_id = ? AND (created_us, id) < (?, ?)"
                " ORDER BY created_us DESC, id DESC LIMIT ?",
                (owner_id, created_us, last_id, limit + 1),
            ).fetchall()
        more = len(rows) > limit
        rows = rows[:limit]
        items = [SessionDocument.model_validate_json(r[0]) for r in rows]
        token = _encode_continuation(rows[-1][1], rows[-1][2]) if more else None
        return Page(items=items, continuation=token)

    def find_by_status(self, status: SessionStatus, *, limit: int = 100) -> list[Stored]:
        """Least recently written first, so a sweeper with a small limit still reaches stale ones."""
        rows = (
            self._db.connection()
            .execute(
                "SELECT doc, etag FROM sessions WHERE status = ? ORDER BY lsn LIMIT ?",
                (SessionStatus(status).value, limit),
            )
            .fetchall()
        )
        return [Stored(doc=SessionDocument.model_validate_json(r[0]), etag=r[1]) for r in rows]

    def read_changes(self, position: str | None, *, limit: int = 100) -> ChangeBatch:
        after = _parse_position(position)
        rows = (
            self._db.connection()
            .execute("SELECT doc, etag, ts, lsn FROM sessions WHERE lsn > ? ORDER BY lsn LIMIT ?", (after, limit))
            .fetchall()
        )
        if not rows:
            return ChangeBatch(docs=[], position=position)
        docs: list[dict] = []
        for body, etag, ts, _lsn in rows:
            item = json.loads(body)
            item["_etag"] = etag
            item["_ts"] = int(ts)
            docs.append(item)
        return ChangeBatch(docs=docs, position=str(rows[-1][3]))

    # --- checkpoints --------------------------------------------------------------------------

    def load_checkpoint(self, name: str) -> str | None:
        row = self._db.connection().execute("SELECT position FROM checkpoints WHERE name = ?", (name,)).fetchone()
        return None if row is None else row[0]

    def save_checkpoint(self, name: str, position: str | None) -> None:
        with self._db.write() as conn:
            conn.execute(
                "INSERT INTO checkpoints (name, position) VALUES (?, ?)"
                " ON CONFLICT (name) DO UPDATE SET position = excluded.position",
                (name, position),
            )

    def close(self) -> None:
        self._db.close()
