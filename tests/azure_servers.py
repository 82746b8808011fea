"""The real local stand-ins for Azure, for tests: Azurite (queues) and a Cosmos-compatible server.

Session fixtures ``azurite`` and ``cosmos_server`` yield connection strings. When
``BLOGWRITER_TEST_AZURITE_CONNECTION`` / ``BLOGWRITER_TEST_COSMOS_CONNECTION`` are set (CI runs
``scripts/local-servers.sh start`` once), those servers are used; otherwise each fixture starts
its server from ``node_modules`` on a free loopback port and stops it by pid at the end. A
server that cannot start FAILS the tests that need it: these tests must run in CI, never skip.

Cosmos runs through ``tests/cosmos_test_server.js``, which answers a read of a missing item
with 404 as Cosmos does (the bare ``@vercel/cosmosdb-server`` answers 500, which the store
rightly treats as a server error, and which azure-cosmos retries once after 0.5 s).

Register the fixtures with ``pytest_plugins = ["tests.azure_servers"]``. The plain factories
(:func:`make_cosmos_store`, :func:`make_azure_queue`) are for other fixtures to call.

PYTEST_DONT_REWRITE (no asserts here; test modules import this before pytest registers it).
"""

from __future__ import annotations

import hashlib
import os
import shutil
import socket
import subprocess
import time
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import Iterator

import pytest
from azure.cosmos import CosmosClient
from azure.cosmos.exceptions import CosmosResourceNotFoundError

from blogwriter.queues.azure import AzureTaskQueue, QueueEncoding
from blogwriter.store.cosmos import ChangeFeedMode, CosmosSessionStore, close_client, parse_connection_string

REPO = Path(__file__).resolve().parent.parent
NODE_MODULES = REPO / "node_modules"
AZURITE_QUEUE_MAIN = NODE_MODULES / "azurite" / "dist" / "src" / "queue" / "main.js"
COSMOS_WRAPPER = REPO / "tests" / "cosmos_test_server.js"

AZURITE_ENV = "BLOGWRITER_TEST_AZURITE_CONNECTION"
COSMOS_ENV = "BLOGWRITER_TEST_COSMOS_CONNECTION"

# Well-known, public development credentials (Azurite's devstoreaccount1, the Cosmos emulator key).
AZURITE_ACCOUNT = "devstoreaccount1"
AZURITE_KEY = "Eby8vdM02xNOcqFlqUwJPLlmEtlCDXJ1OUzFT50uSRZ6IFsuFq2UVErCz4I6tq/K1SZFPTOtr/KBHBeksoGMGw=="
COSMOS_KEY = "C2y6yDjf5/R+ob0N8A7Cgv30VRDJIWEHLM+4QDU5DE2nQ9nDuVTqobD4b8mGGyPMbIZnqyMsEcaGQy67XIw/Jw=="

HOST = "127.0.0.1"
START_TIMEOUT_SECONDS = 30.0


def azurite_connection_string(port: int, host: str = HOST) -> str:
    return (
        f"DefaultEndpointsProtocol=http;AccountName={AZURITE_ACCOUNT};AccountKey={AZURITE_KEY};"
        f"QueueEndpoint=http://{host}:{port}/{AZURITE_ACCOUNT};"
    )


def cosmos_connection_string(port: int, host: str = HOST) -> str:
    return f"AccountEndpoint=https://{host}:{port}/;AccountKey={COSMOS_KEY};"


class ServerStartError(RuntimeError):
    """A local server did not come up; the message says why and where its log is."""


@dataclass
class LocalServer:
    name: str
    process: subprocess.Popen[bytes]
    port: int
    log: Path

    @property
    def pid(self) -> int:
        return self.process.pid

    def stop(self) -> None:
        """Stop this server by its pid: SIGTERM, then SIGKILL if it does not exit."""
        if self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait(timeout=10)


def free_port(host: str = HOST) -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind((host, 0))
        return int(s.getsockname()[1])


def _node() -> str:
    node = shutil.which("node")
    if node is None:
        raise ServerStartError("node is not on PATH; Node 20 is needed for Azurite and the Cosmos test server")
    return node


def _start(name: str, args: list[str], port: int, log: Path) -> LocalServer:
    for path in (NODE_MODULES, *(Path(a) for a in args if a.endswith(".js"))):
        if not path.exists():
            raise ServerStartError(f"{path} is missing: run `npm ci` in {REPO}")
    log.parent.mkdir(parents=True, exist_ok=True)
    with log.open("wb") as out:
        process = subprocess.Popen([_node(), *args], cwd=REPO, stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
    server = LocalServer(name=name, process=process, port=port, log=log)
    try:
        wait_until_listening(server)
    except BaseException:
        server.stop()
        raise
    return server


def wait_until_listening(server: LocalServer, *, timeout: float = START_TIMEOUT_SECONDS) -> None:
    """Block until the server accepts TCP connections (bounded; not a timing assertion)."""
    deadline = time.monotonic() + timeout
    while True:
        if server.process.poll() is not None:
            raise ServerStartError(
                f"{server.name} exited with code {server.process.returncode} before listening on "
                f"{HOST}:{server.port}; log {server.log}:\n{_tail(server.log)}"
            )
        try:
            with socket.create_connection((HOST, server.port), timeout=0.5):
                return
        except OSError:
            if time.monotonic() > deadline:
                raise ServerStartError(
                    f"{server.name} did not listen on {HOST}:{server.port} within {timeout:.0f}s; "
                    f"log {server.log}:\n{_tail(server.log)}"
                ) from None
            time.sleep(0.05)


def _tail(log: Path, lines: int = 20) -> str:
    try:
        return "\n".join(log.read_text(errors="replace").splitlines()[-lines:])
    except OSError:
        return "(no log)"


def start_azurite(workdir: Path, *, port: int | None = None) -> LocalServer:
    """Azurite's queue service alone, data under ``workdir``."""
    port = port or free_port()
    data = workdir / "azurite"
    data.mkdir(parents=True, exist_ok=True)
    args = [
        str(AZURITE_QUEUE_MAIN), "--queueHost", HOST, "--queuePort", str(port), "--location", str(data),
        "--silent", "--skipApiVersionCheck", "--disableTelemetry",
    ]
    return _start("Azurite", args, port, workdir / "azurite.log")


def start_cosmos(workdir: Path, *, port: int | None = None) -> LocalServer:
    """The Cosmos-compatible server (in memory, empty at every start) behind the 404 fix."""
    port = port or free_port()
    return _start("cosmosdb-server", [str(COSMOS_WRAPPER), "--host", HOST, "-p", str(port)], port, workdir / "cosmos.log")


@pytest.fixture(scope="session")
def azurite(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """A connection string for Azurite's queue service."""
    given = os.environ.get(AZURITE_ENV)
    if given:
        yield given
        return
    try:
        server = start_azurite(tmp_path_factory.mktemp("azurite-server"))
    except ServerStartError as err:
        pytest.fail(f"cannot start Azurite: {err}", pytrace=False)
    try:
        yield azurite_connection_string(server.port)
    finally:
        server.stop()


@pytest.fixture(scope="session")
def cosmos_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """A connection string for the Cosmos-compatible server."""
    given = os.environ.get(COSMOS_ENV)
    if given:
        yield given
        return
    try:
        server = start_cosmos(tmp_path_factory.mktemp("cosmos-server"))
    except ServerStartError as err:
        pytest.fail(f"cannot start the Cosmos test server: {err}", pytrace=False)
    try:
        yield cosmos_connection_string(server.port)
    finally:
        server.stop()


# -- factories other fixtures call -----------------------------------------------------------------


def unique_name(prefix: str) -> str:
    """Lower case, digits and hyphens: valid as a Cosmos database id and an Azure queue name."""
    return f"{prefix}-{uuid.uuid4().hex[:16]}"


def database_name(seed: str) -> str:
    """A database id derived from ``seed`` (e.g. a tmp path): same seed, same database."""
    return "bw-" + hashlib.sha1(seed.encode()).hexdigest()[:16]


def make_cosmos_store(connection: str, database: str, *, change_feed: ChangeFeedMode = "poll") -> CosmosSessionStore:
    """A store on its own database (created on first use), so tests can share one server."""
    endpoint, key = parse_connection_string(connection)
    return CosmosSessionStore(endpoint, key=key, database=database, change_feed=change_feed)


def make_azure_queue(connection: str, *, encoding: QueueEncoding = "none") -> AzureTaskQueue:
    return AzureTaskQueue.from_connection_string(connection, encoding=encoding)


def raw_cosmos_client(connection: str) -> CosmosClient:
    """A bare azure-cosmos client, for tests that check what the store really wrote."""
    endpoint, key = parse_connection_string(connection)
    return CosmosClient(endpoint, credential=key)


def drop_cosmos_database(connection: str, database: str) -> None:
    """Delete a test database (a shared server stays small); absent is fine."""
    client = raw_cosmos_client(connection)
    try:
        client.delete_database(database)
    except CosmosResourceNotFoundError:
        pass
    finally:
        close_client(client)
