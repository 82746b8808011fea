"""Session stores: the port in :mod:`.base`, an embedded SQLite store and a Cosmos DB store."""

from .base import ChangeBatch, Page, SessionStore, Stored

__all__ = ["ChangeBatch", "Page", "SessionStore", "Stored"]
