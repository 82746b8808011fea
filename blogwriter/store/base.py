"""The session store port (DESIGN.md §5). Every backend passes the same contract tests."""

from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import dataclass

from ..state import SessionDocument, SessionStatus


@dataclass(frozen=True)
class Stored:
    """A document and the ETag it was read or written with. The ETag never goes in the document."""

    doc: SessionDocument
    etag: str


@dataclass(frozen=True)
class Page:
    items: list[SessionDocument]
    continuation: str | None = None


@dataclass(frozen=True)
class ChangeBatch:
    """Documents changed after a position, in change order, and the position after them.

    A document may appear more than once across batches (at-least-once); only its latest
    version is guaranteed to be seen.
    """

    docs: list[dict]
    position: str | None


class SessionStore(ABC):
    """One document per session, partitioned by owner, replaced whole with If-Match."""

    @abstractmethod
    def create(self, doc: SessionDocument) -> Stored:
        """Insert a new document; :class:`SessionExists` if the id is taken."""

    @abstractmethod
    def get(self, owner_id: str, session_id: str) -> Stored:
        """Read one document; :class:`SessionNotFound` if absent or owned by someone else."""

    @abstractmethod
    def replace(self, doc: SessionDocument, etag: str) -> Stored:
        """Replace the whole document if it still has ``etag``; :class:`SessionConflict` if not."""

    @abstractmethod
    def list(self, owner_id: str, *, limit: int = 20, continuation: str | None = None) -> Page:
        """The owner's sessions, newest first, ``limit`` per page."""

    @abstractmethod
    def delete(self, owner_id: str, session_id: str) -> None:
        """Remove one document; :class:`SessionNotFound` if absent or owned by someone else."""

    @abstractmethod
    def find_by_status(self, status: SessionStatus, *, limit: int = 100) -> list[Stored]:
        """Sessions in a status across all owners (the sweeper's query)."""

    @abstractmethod
    def read_changes(self, position: str | None, *, limit: int = 100) -> ChangeBatch:
        """The change feed: documents written after ``position`` (None: from the beginning)."""

    @abstractmethod
    def load_checkpoint(self, name: str) -> str | None:
        """The change-feed position a named reader saved last."""

    @abstractmethod
    def save_checkpoint(self, name: str, position: str | None) -> None:
        """Remember a named reader's change-feed position."""

    def close(self) -> None:  # pragma: no cover - optional
        """Release connections."""
