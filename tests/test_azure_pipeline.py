"""The whole app on the Azure backends: the local host with BLOGWRITER_BACKEND=azure against
Azurite and the Cosmos-compatible server, checked from outside with the official SDKs."""

from __future__ import annotations

import json

import pytest
from azure.storage.queue import QueueClient

from blogwriter.settings import INTAKE_QUEUE, RESEARCH_QUEUE, REVIEW_QUEUE, TASK_QUEUES, WRITE_QUEUE
from conftest import EXAMPLE_SOURCES
from host_process import start_host, wait_until
from tests.azure_servers import drop_cosmos_database, raw_cosmos_client, unique_name

OWNER = "azure-e2e"


@pytest.fixture(scope="module")
def azure_host(azurite: str, cosmos_server: str, tmp_path_factory: pytest.TempPathFactory):
    database = unique_name("e2e")
    host = start_host(tmp_path_factory.mktemp("azure-host"), extra_env={
        "BLOGWRITER_BACKEND": "azure", "AzureWebJobsStorage": azurite, "COSMOS_CONNECTION": cosmos_server,
        "COSMOS_DATABASE": database, "COSMOS_CHANGE_FEED": "poll",
    })
    try:
        yield host, database
    finally:
        rc = host.stop()
        drop_cosmos_database(cosmos_server, database)
        assert rc == 0, host.log()


def queue_client(azurite: str, name: str) -> QueueClient:
    return QueueClient.from_connection_string(azurite, name)


def visible_or_hidden(azurite: str, name: str) -> int:
    q = queue_client(azurite, name)
    try:
        return q.get_queue_properties().approximate_message_count
    except Exception:  # the queue was never created: nothing in it
        return 0


def test_session_over_http_completes_on_cosmos_and_storage_queues(azure_host, azurite, cosmos_server) -> None:
    host, database = azure_host
    with host.client(OWNER) as client:
        r = client.post("/api/sessions", json={"topic": "How BlogWriter survives duplicate messages",
                                               "minWords": 300, "maxWords": 500, "sources": [str(EXAMPLE_SOURCES)]})
        assert r.status_code == 202, r.text
        sid = r.json()["id"]
        view = wait_until(lambda: (v := client.get(f"/api/sessions/{sid}").json())["status"] != "running" and v,
                          timeout=120, what="the session to finish on the Azure backends")
        assert view["status"] == "completed", view
        assert client.get(f"/api/sessions/{sid}/draft").text.startswith("# ")

    container = raw_cosmos_client(cosmos_server).get_database_client(database).get_container_client("sessions")
    item = container.read_item(sid, partition_key=OWNER)
    assert item["OwnerId"] == OWNER and item["id"] == sid
    assert {"CreatedAt", "UpdatedAt", "State"} <= set(item)
    state = item["State"]
    for field in ("MainTask", "MinWords", "MaxWords", "ResearchFindings", "SearchRefinements", "Draft",
                  "ReviewNotes", "RevisionNumber", "NextStep", "CurrentSubTask"):
        assert field in state, field
    assert state["Status"] == "completed" and state["ResearchFindings"][0]["Source"]["Kind"] == "file"
    assert not {"ETag", "Etag", "_etag"} & set(state)  # the ETag travels beside the document, never in it
    wait_until(lambda: all(visible_or_hidden(azurite, q) == 0 for q in TASK_QUEUES),
               timeout=30, what="the task queues to drain")
    assert all(visible_or_hidden(azurite, f"{q}-poison") == 0 for q in TASK_QUEUES)


def test_wrong_sequence_from_another_program_is_dropped_without_side_effects(azure_host, azurite, cosmos_server) -> None:
    host, database = azure_host
    with host.client(OWNER) as client:
        [done] = [s for s in client.get("/api/sessions").json()["items"] if s["status"] == "completed"][:1]
    container = raw_cosmos_client(cosmos_server).get_database_client(database).get_container_client("sessions")
    before = container.read_item(done["id"], partition_key=OWNER)
    body = json.dumps({"sessionId": done["id"], "ownerId": OWNER, "step": "research", "seq": 99})
    queue_client(azurite, RESEARCH_QUEUE).send_message(body)  # plain text, the SDK default
    wait_until(lambda: visible_or_hidden(azurite, RESEARCH_QUEUE) == 0, timeout=30, what="the message to be taken")
    after = container.read_item(done["id"], partition_key=OWNER)
    assert after["_etag"] == before["_etag"]
    assert visible_or_hidden(azurite, f"{RESEARCH_QUEUE}-poison") == 0


def test_plain_json_on_blog_requests_creates_one_session(azure_host, azurite) -> None:
    host, _ = azure_host
    request = {"requestId": unique_name("req"), "ownerId": "intake-e2e", "topic": "Change feeds in practice",
               "minWords": 200, "maxWords": 400, "sources": [str(EXAMPLE_SOURCES)]}
    q = queue_client(azurite, INTAKE_QUEUE)
    q.send_message(json.dumps(request))
    q.send_message(json.dumps(request))
    with host.client("intake-e2e") as client:
        items = wait_until(lambda: (r := client.get("/api/sessions").json()["items"]) and
                           visible_or_hidden(azurite, INTAKE_QUEUE) == 0 and r,
                           timeout=60, what="the intake request to become a session")
        assert len(items) == 1
        sid = items[0]["id"]
        wait_until(lambda: client.get(f"/api/sessions/{sid}").json()["status"] == "completed", timeout=120,
                   what="the intake session to complete")
    assert all(visible_or_hidden(azurite, q) == 0 for q in (RESEARCH_QUEUE, WRITE_QUEUE, REVIEW_QUEUE))
