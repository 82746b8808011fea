"""Start the local host (``python -m blogwriter host``) as a subprocess for tests, and stop it.

The host gets its own ``BLOGWRITER_HOME`` in a temporary folder, an ephemeral port (``--port 0``;
the URL is read from its startup line), no model credentials (the offline writer answers) and
short polling intervals. Tests talk to it with a real ``httpx`` client, and may open the same
SQLite file from the test process (``services()``) to act as "another program".

Use the fixtures by importing them into a test module: ``from host_process import host``.
"""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import threading
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Iterator

import httpx
import pytest

REPO = Path(__file__).resolve().parents[1]
STARTUP = re.compile(r"listening on (http://[\d.]+:\d+)/api")
PRINCIPAL_ID = "X-MS-CLIENT-PRINCIPAL-ID"
# Model credentials that must never reach a test host: it must run the offline writer.
SCRUBBED = (
    "OPENAI_API_KEY", "OPENAI_BASE_URL", "OPENAI_ORG_ID", "OPENAI_PROJECT_ID", "AZURE_OPENAI_ENDPOINT",
    "AZURE_OPENAI_API_KEY", "AZURE_OPENAI_DEPLOYMENT", "BLOGWRITER_MODEL", "BLOGWRITER_RESEARCH_MODEL",
    "BLOGWRITER_WRITE_MODEL", "BLOGWRITER_REVIEW_MODEL", "BLOGWRITER_BACKEND", "BLOGWRITER_ALLOW_ANONYMOUS",
    "BLOGWRITER_ALLOW_LOCAL_FILES", "BLOGWRITER_BLOCK_PRIVATE_HOSTS", "AzureWebJobsStorage", "COSMOS_CONNECTION",
)


@dataclass
class HostProcess:
    home: Path
    process: subprocess.Popen[str]
    log_path: Path
    base_url: str = ""
    stdout: list[str] = field(default_factory=list)
    env: dict[str, str] = field(default_factory=dict)

    def client(self, owner: str | None = None, **kwargs: Any) -> httpx.Client:
        headers = {PRINCIPAL_ID: owner} if owner else {}
        return httpx.Client(base_url=self.base_url, headers=headers, timeout=15.0, **kwargs)

    def log(self) -> str:
        return self.log_path.read_text(encoding="utf-8", errors="replace") if self.log_path.exists() else ""

    def services(self) -> Any:
        """Services on the host's SQLite file, built in the test process (another program)."""
        from blogwriter.settings import Settings
        from blogwriter.wiring import build_services

        return build_services(Settings.from_env(self.env))

    def alive(self) -> bool:
        return self.process.poll() is None

    def stop(self, timeout: float = 30.0) -> int:
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
            try:
                self.process.wait(timeout=timeout)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait(timeout=10)
        return self.process.returncode


def start_host(
    home: Path, *, extra_env: dict[str, str] | None = None, args: list[str] | None = None, timeout: float = 60.0
) -> HostProcess:
    home.mkdir(parents=True, exist_ok=True)
    env = {k: v for k, v in os.environ.items() if k not in SCRUBBED}
    env.update({
        "BLOGWRITER_HOME": str(home),
        "BLOGWRITER_OFFLINE": "true",
        "BLOGWRITER_HOST_POLL_SECONDS": "0.2",
        "BLOGWRITER_HOST_RETRY_SECONDS": "0",
        "PYTHONUNBUFFERED": "1",
    })
    env.update(extra_env or {})
    log_path = home / "host.log"
    log_file = log_path.open("w", encoding="utf-8")
    process = subprocess.Popen(
        [sys.executable, "-m", "blogwriter", "host", "--host", "127.0.0.1", "--port", "0", "--grace", "10", *(args or [])],
        cwd=REPO, env=env, stdout=subprocess.PIPE, stderr=log_file, text=True,
    )
    log_file.close()
    host = HostProcess(home=home, process=process, log_path=log_path, env=env)
    ready = threading.Event()

    def read_stdout() -> None:
        assert process.stdout is not None
        for line in process.stdout:
            host.stdout.append(line)
            match = STARTUP.search(line)
            if match and not ready.is_set():
                host.base_url = match.group(1)
                ready.set()

    threading.Thread(target=read_stdout, daemon=True).start()
    deadline = time.monotonic() + timeout
    while not ready.wait(0.1):
        if process.poll() is not None or time.monotonic() > deadline:
            host.stop()
            raise RuntimeError(f"local host did not start (rc={process.returncode}):\n{host.log()}")
    return host


def wait_until(condition: Callable[[], Any], *, timeout: float = 60.0, interval: float = 0.2, what: str = "") -> Any:
    """Poll ``condition`` until it returns something truthy; fail the test on timeout."""
    deadline = time.monotonic() + timeout
    while True:
        value = condition()
        if value:
            return value
        if time.monotonic() > deadline:
            pytest.fail(f"timed out waiting for {what or condition}")
        time.sleep(interval)


@pytest.fixture(scope="module")
def host(tmp_path_factory: pytest.TempPathFactory) -> Iterator[HostProcess]:
    """One local host per test module (tests isolate themselves by owner)."""
    process = start_host(tmp_path_factory.mktemp("host"))
    try:
        yield process
    finally:
        rc = process.stop()
        if rc != 0:
            print(process.log())
        assert rc == 0, f"local host exited with {rc}"


@pytest.fixture()
def owner() -> str:
    """A fresh owner id per test, so tests sharing a host never see each other's sessions."""
    return f"user-{uuid.uuid4().hex[:12]}"


def park_session(services: Any, owner: str, *, status: str = "running", topic: str = "A parked session") -> str:
    """Write a session straight to the store whose step runs under a long lease: nothing moves it
    (the router waits on a running step, the sweeper on a live lease), so tests can act on a
    session in a known state without racing the offline writer. Returns its id."""
    from datetime import timedelta

    from blogwriter.state import PostRequest, SessionStatus, StepName, StepRecord, StepStatus, new_session, utcnow

    now = utcnow()
    doc = new_session(PostRequest(topic=topic, minWords=300, maxWords=600), owner, now=now)
    doc.State.Step = StepRecord(Name=StepName.RESEARCH, Seq=1, Status=StepStatus.RUNNING, QueuedAt=now,
                                LeaseUntil=now + timedelta(days=1), ClaimId="held-by-test")
    doc.State.Status = SessionStatus(status)
    services.store.create(doc)
    return doc.id
