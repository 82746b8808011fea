"""Reading the sessions container's change feed, in one of two ways.

* ``incremental``: the SDK's change feed (``query_items_change_feed``); the position is the
  SDK's continuation string. This is what a real Cosmos DB account offers.
* ``poll``: for servers whose change feed is only a snapshot (``@vercel/cosmosdb-server``,
  see LOCAL-AZURE-NOTES.md). Query ``c._ts >= @ts ORDER BY c._ts`` and skip the
  ``(id, _etag)`` pairs already handed out at the newest second. The position is a small
  JSON string ``{"mode": "poll", "ts": <seconds>, "seen": [[id, etag], ...]}``.

Both deliver every change at least once; only the latest version of a document that changed
twice between reads is guaranteed (as with Cosmos' own "latest version" feed). A position
written by the other mode (the setting changed) restarts from the beginning, which is safe
because every consumer of the feed is idempotent (DESIGN.md §3).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any, Iterable

from azure.cosmos import ContainerProxy

from .base import ChangeBatch

_POLL_QUERY = "SELECT * FROM c WHERE c._ts >= @ts ORDER BY c._ts ASC"


@dataclass(frozen=True)
class PollPosition:
    """Where a poll reader stands: the newest ``_ts`` it has seen and what it saw at that second."""

    ts: int = 0
    seen: frozenset[tuple[str, str]] = frozenset()

    def encode(self) -> str:
        return json.dumps(
            {"mode": "poll", "ts": self.ts, "seen": sorted([i, e] for i, e in self.seen)},
            separators=(",", ":"),
        )

    @classmethod
    def decode(cls, position: str | None) -> "PollPosition":
        """Parse a position; None or a position of the other mode means "from the beginning"."""
        parsed = _parse_poll(position)
        if parsed is None:
            return cls()
        seen = frozenset((str(pair[0]), str(pair[1])) for pair in parsed.get("seen", []))
        return cls(ts=int(parsed.get("ts", 0)), seen=seen)

    def advance(self, docs: Iterable[dict[str, Any]]) -> "PollPosition":
        """The position after handing out ``docs`` (in ``_ts`` order)."""
        ts, seen = self.ts, set(self.seen)
        for doc in docs:
            doc_ts = int(doc["_ts"])
            if doc_ts > ts:
                # Only pairs at the newest second can come back from ``_ts >= ts``.
                ts, seen = doc_ts, set()
            seen.add(_pair(doc))
        return PollPosition(ts=ts, seen=frozenset(seen))


def _parse_poll(position: str | None) -> dict[str, Any] | None:
    if not position or not position.startswith("{"):
        return None
    try:
        parsed = json.loads(position)
    except ValueError:
        return None
    if isinstance(parsed, dict) and parsed.get("mode") == "poll":
        return parsed
    return None


def is_poll_position(position: str | None) -> bool:
    return _parse_poll(position) is not None


def _pair(doc: dict[str, Any]) -> tuple[str, str]:
    return (str(doc["id"]), str(doc.get("_etag", "")))


def read_changes_poll(container: ContainerProxy, position: str | None, *, limit: int) -> ChangeBatch:
    """Up to ``limit`` documents written at or after the position's second and not yet seen."""
    start = PollPosition.decode(position)
    items = container.query_items(
        query=_POLL_QUERY,
        parameters=[{"name": "@ts", "value": start.ts}],
        enable_cross_partition_query=True,
        max_item_count=max(limit + len(start.seen), 1),
    )
    docs: list[dict[str, Any]] = []
    # Lazy iteration: stop fetching pages as soon as the batch is full.
    for doc in items:
        if int(doc["_ts"]) == start.ts and _pair(doc) in start.seen:
            continue
        docs.append(dict(doc))
        if len(docs) >= limit:
            break
    if not docs:
        return ChangeBatch(docs=[], position=start.encode())
    return ChangeBatch(docs=docs, position=start.advance(docs).encode())


def read_changes_incremental(container: ContainerProxy, position: str | None, *, limit: int) -> ChangeBatch:
    """One page of the SDK's change feed after ``position`` (None: from the beginning)."""
    if position is None or is_poll_position(position):
        feed = container.query_items_change_feed(start_time="Beginning", max_item_count=limit)
        position = None
    else:
        feed = container.query_items_change_feed(continuation=position, max_item_count=limit)
    pages = feed.by_page()
    try:
        docs = [dict(doc) for doc in next(pages)]
    except StopIteration:  # 304 Not Modified: nothing new since the continuation
        docs = []
    # The SDK leaves the token empty when the service answered "not modified": keep our place.
    return ChangeBatch(docs=docs, position=pages.continuation_token or position)
