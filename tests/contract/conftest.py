"""Backends the contract tests run against, and the fixtures that hand them out.

Adding a backend is one line in a registry: a factory that takes the test's ``request`` (to
reach other fixtures, e.g. a server started once per session, or to ``pytest.skip`` when it is
not available) and a temporary folder, and returns a ready instance. Calling a factory twice
with the same folder must give a second instance on the *same* backend (the multi-client
tests rely on it).

Tests never assume an empty backend: each one gets its own owner ids, queue names and
checkpoint names, so a shared, long-running server works.
"""

from __future__ import annotations

import uuid
from pathlib import Path
from typing import Callable, Iterator

import pytest

from blogwriter.queues.base import TaskQueue
from blogwriter.queues.sqlite import SqliteTaskQueue
from blogwriter.store.base import SessionStore
from blogwriter.store.sqlite import SqliteSessionStore
from tests.azure_servers import database_name, make_azure_queue, make_cosmos_store

StoreFactory = Callable[[pytest.FixtureRequest, Path], SessionStore]
QueueFactory = Callable[[pytest.FixtureRequest, Path], TaskQueue]

STORE_BACKENDS: dict[str, StoreFactory] = {
    "sqlite": lambda request, tmp: SqliteSessionStore(tmp / "blogwriter.sqlite3"),
    "cosmos": lambda request, tmp: make_cosmos_store(request.getfixturevalue("cosmos_server"), database_name(str(tmp))),
}

QUEUE_BACKENDS: dict[str, QueueFactory] = {
    "sqlite": lambda request, tmp: SqliteTaskQueue(tmp / "blogwriter.sqlite3"),
    "azure": lambda request, tmp: make_azure_queue(request.getfixturevalue("azurite")),
}


@pytest.fixture(params=list(STORE_BACKENDS))
def store_factory(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Callable[[], SessionStore]]:
    """Makes instances of one backend, all on the same data; closes them afterwards."""
    made: list[SessionStore] = []

    def make() -> SessionStore:
        instance = STORE_BACKENDS[request.param](request, tmp_path)
        made.append(instance)
        return instance

    yield make
    for instance in made:
        instance.close()


@pytest.fixture
def store(store_factory: Callable[[], SessionStore]) -> SessionStore:
    return store_factory()


@pytest.fixture(params=list(QUEUE_BACKENDS))
def queue_factory(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Callable[[], TaskQueue]]:
    made: list[TaskQueue] = []

    def make() -> TaskQueue:
        instance = QUEUE_BACKENDS[request.param](request, tmp_path)
        made.append(instance)
        return instance

    yield make
    for instance in made:
        instance.close()


@pytest.fixture
def queue(queue_factory: Callable[[], TaskQueue]) -> TaskQueue:
    return queue_factory()


def unique(prefix: str) -> str:
    """A name no other test (or earlier run against a shared server) uses.

    Lower case letters, digits and hyphens only, so it is also a valid Azure queue name
    (3-63 characters) with room for the ``-poison`` suffix.
    """
    return f"{prefix}-{uuid.uuid4().hex[:16]}"


@pytest.fixture
def owner() -> str:
    return unique("owner")


@pytest.fixture
def other_owner() -> str:
    return unique("other")


@pytest.fixture
def queue_name() -> str:
    return unique("q")
