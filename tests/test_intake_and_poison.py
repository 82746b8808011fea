"""Other programs talk to the app through queues: plain JSON on blog-requests, and bad messages
take the poison path without crashing the host or losing a session."""

from __future__ import annotations

import json
import re
import uuid
from typing import Any, Iterator

import pytest
from host_process import REPO, HostProcess, park_session, start_host, wait_until

from blogwriter.settings import INTAKE_QUEUE, RESEARCH_QUEUE
from blogwriter.state import intake_session_id

SOURCES = str(REPO / "examples" / "sources")
MAX_DEQUEUE_COUNT = 5  # host.json extensions.queues.maxDequeueCount


@pytest.fixture()
def fresh_host(tmp_path_factory: pytest.TempPathFactory) -> Iterator[HostProcess]:
    """A host of its own per test: the assertions count lines in its log."""
    process = start_host(tmp_path_factory.mktemp("queues"))
    try:
        yield process
    finally:
        assert process.stop() == 0, process.log()


@pytest.fixture()
def other_program(fresh_host: HostProcess) -> Iterator[Any]:
    """Services on the host's SQLite file, opened by the test process: another program."""
    services = fresh_host.services()
    try:
        yield services
    finally:
        services.close()


def intake_body(owner: str, request_id: str) -> str:
    return json.dumps({"requestId": request_id, "ownerId": owner, "topic": "Queues as an API",
                       "minWords": 300, "maxWords": 600, "sources": [SOURCES]})


def test_plain_json_request_on_blog_requests_makes_one_session(fresh_host: HostProcess, other_program: Any) -> None:
    owner, request_id = f"intake-{uuid.uuid4().hex[:8]}", "req-1"
    other_program.queue.send(INTAKE_QUEUE, intake_body(owner, request_id))
    with fresh_host.client(owner) as client:
        items = wait_until(lambda: client.get("/api/sessions").json()["items"], what="the intake session")
        assert [s["id"] for s in items] == [intake_session_id(owner, request_id)]
        wait_until(lambda: client.get(f"/api/sessions/{items[0]['id']}").json()["status"] == "completed",
                   what="the intake session to complete")

        # The same requestId again (a retry by the sender): still one session.
        other_program.queue.send(INTAKE_QUEUE, intake_body(owner, request_id))
        wait_until(lambda: other_program.queue.count(INTAKE_QUEUE) == 0, what="the duplicate to be consumed")
        assert [s["id"] for s in client.get("/api/sessions").json()["items"]] == [items[0]["id"]]
    assert "Executed 'Functions.intake_request' (Succeeded" in fresh_host.log()


def _failures(log: str, function: str) -> list[tuple[str, int]]:
    pattern = rf"Executed 'Functions\.{function}' \(Failed.*? id=(\w+) dequeueCount=(\d+)"
    return [(m.group(1), int(m.group(2))) for m in re.finditer(pattern, log)]


def test_non_json_task_ends_in_poison_after_max_dequeue_count(fresh_host: HostProcess, other_program: Any) -> None:
    other_program.queue.send(RESEARCH_QUEUE, "this is not JSON at all")
    wait_until(lambda: "Functions.research_task_poison' (Succeeded" in fresh_host.log(), what="the poison function")
    failures = _failures(fresh_host.log(), "research_task")
    assert [count for _, count in failures] == list(range(1, MAX_DEQUEUE_COUNT + 1))
    assert len({message_id for message_id, _ in failures}) == 1
    assert f"moved to {RESEARCH_QUEUE}-poison" in fresh_host.log()
    assert other_program.queue.count(RESEARCH_QUEUE) == 0
    assert other_program.queue.count(f"{RESEARCH_QUEUE}-poison") == 0  # consumed by its trigger
    assert fresh_host.alive()
    with fresh_host.client() as client:
        assert client.get("/api/health").status_code == 200


def test_bad_intake_message_is_poisoned_and_logged(fresh_host: HostProcess, other_program: Any) -> None:
    other_program.queue.send(INTAKE_QUEUE, json.dumps({"requestId": "r", "topic": ""}))
    wait_until(lambda: "Functions.intake_request_poison' (Succeeded" in fresh_host.log(), what="the intake poison function")
    log = fresh_host.log()
    assert len(re.findall(r"Executed 'Functions\.intake_request' \(Failed", log)) == MAX_DEQUEUE_COUNT
    assert "invalid intake request: topic" in log
    assert "blog-requests message" in log and "gave up" in log
    assert fresh_host.alive()


def test_task_with_a_bad_step_fails_its_session_with_the_reason(fresh_host: HostProcess, other_program: Any) -> None:
    owner = f"poison-{uuid.uuid4().hex[:8]}"
    session_id = park_session(other_program, owner)
    other_program.queue.send(RESEARCH_QUEUE, json.dumps({"sessionId": session_id, "ownerId": owner,
                                                         "step": "publish", "seq": 1}))
    with fresh_host.client(owner) as client:
        view = wait_until(
            lambda: (v := client.get(f"/api/sessions/{session_id}").json())["status"] == "failed" and v,
            what="the session to be marked failed",
        )
    assert RESEARCH_QUEUE in view["error"] and "step" in view["error"]
    assert len(_failures(fresh_host.log(), "research_task")) == MAX_DEQUEUE_COUNT
    assert fresh_host.alive()


# A tiny app of our own, loaded with --app: it shows how the host treats queue messages.
PROBE_APP = '''
import pathlib, time
import azure.functions as func

app = func.FunctionApp(http_auth_level=func.AuthLevel.ANONYMOUS)
SEEN = pathlib.Path(__file__).parent / "seen.txt"


@app.queue_trigger(arg_name="msg", queue_name="probe-tasks", connection="AzureWebJobsStorage")
def probe(msg: func.QueueMessage) -> None:
    body = msg.get_body().decode("utf-8")
    with SEEN.open("a") as f:
        f.write(f"{body} {msg.dequeue_count}\\n")
    if body == "slow":
        time.sleep(120)
'''


def start_probe_host(tmp_path: Any, *, encoding: str = "none", grace: float = 10) -> tuple[HostProcess, Any]:
    app_dir = tmp_path / "app"
    app_dir.mkdir()
    (app_dir / "function_app.py").write_text(PROBE_APP)
    host_json = json.loads((REPO / "host.json").read_text())
    host_json["extensions"]["queues"]["messageEncoding"] = encoding
    (app_dir / "host.json").write_text(json.dumps(host_json))
    process = start_host(tmp_path / "home", args=["--app", str(app_dir / "function_app.py"), "--grace", str(grace)])
    return process, app_dir / "seen.txt"


def test_base64_encoding_is_decoded_and_undecodable_messages_are_poisoned(tmp_path: Any) -> None:
    import base64

    process, seen = start_probe_host(tmp_path, encoding="base64")
    services = process.services()
    try:
        services.queue.send("probe-tasks", base64.b64encode(b"hello").decode())
        wait_until(lambda: seen.exists() and "hello 1" in seen.read_text(), what="the decoded message")
        services.queue.send("probe-tasks", "not base64 !!")
        wait_until(lambda: services.queue.count("probe-tasks-poison") == 1, what="the undecodable message in poison")
        assert services.queue.count("probe-tasks") == 0
        assert "not base64 !!" not in seen.read_text()  # the function never saw it
    finally:
        services.close()
        assert process.stop() == 0


def test_stop_hands_back_a_message_still_being_processed(tmp_path: Any) -> None:
    process, seen = start_probe_host(tmp_path, grace=0.5)
    services = process.services()
    try:
        services.queue.send("probe-tasks", "slow")
        wait_until(lambda: seen.exists() and "slow 1" in seen.read_text(), what="the slow function to start")
        assert process.stop() == 0
        assert "released message" in process.log()
        # Nothing lost: the message is visible again at once, on its second delivery.
        [message] = services.queue.receive("probe-tasks", max_messages=5, visibility_timeout=30)
        assert message.body == "slow" and message.dequeue_count == 2
    finally:
        services.close()
        process.stop()
