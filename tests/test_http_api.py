"""End to end through the local host: a post is researched, written, reviewed and revised on its own."""

from __future__ import annotations

from typing import Any

from host_process import REPO, HostProcess, host, owner, park_session, wait_until  # noqa: F401

import httpx

SOURCES = str(REPO / "examples" / "sources")


def _status(client: httpx.Client, session_id: str) -> dict[str, Any]:
    response = client.get(f"/api/sessions/{session_id}")
    assert response.status_code == 200, response.text
    return response.json()


def _wait_for(client: httpx.Client, session_id: str, predicate: Any, what: str) -> dict[str, Any]:
    def check() -> dict[str, Any] | None:
        view = _status(client, session_id)
        assert view["status"] != "failed", view
        return view if predicate(view) else None

    return wait_until(check, timeout=90, what=what)


def test_post_completes_on_its_own_and_revises_after_feedback(host: HostProcess, owner: str) -> None:
    with host.client(owner) as client:
        created = client.post("/api/sessions", json={
            "topic": "Event-driven agents on Azure Functions", "minWords": 300, "maxWords": 700, "sources": [SOURCES],
        })
        assert created.status_code == 202, created.text
        view = created.json()
        session_id = view["id"]
        assert created.headers["Location"] == f"/api/sessions/{session_id}"
        assert view["status"] == "running"
        assert created.headers["content-type"].startswith("application/json")

        done = _wait_for(client, session_id, lambda v: v["status"] == "completed", "the first draft")
        assert done["revisions"] >= 1 and done["words"] > 0

        draft = client.get(f"/api/sessions/{session_id}/draft")
        assert draft.status_code == 200
        assert draft.headers["content-type"].startswith("text/markdown")
        assert draft.text.startswith("# ")
        assert "\n## References" in draft.text

        listed = client.get("/api/sessions").json()
        assert [item["id"] for item in listed["items"]] == [session_id]

        feedback = client.post(f"/api/sessions/{session_id}/feedback", json={"feedback": "Add a closing summary."})
        assert feedback.status_code == 202, feedback.text
        assert feedback.headers["Location"] == f"/api/sessions/{session_id}"
        revised = _wait_for(
            client, session_id, lambda v: v["status"] == "completed" and v["revisions"] > done["revisions"],
            "the revision after feedback",
        )
        assert revised["revisions"] > done["revisions"]
        assert client.get(f"/api/sessions/{session_id}/draft").text.startswith("# ")

        # A finished session cannot be cancelled: 409, and it stays completed.
        refused = client.post(f"/api/sessions/{session_id}/cancel")
        assert refused.status_code == 409
        assert refused.headers["content-type"].startswith("application/problem+json")
        assert _status(client, session_id)["status"] == "completed"

        assert client.delete(f"/api/sessions/{session_id}").status_code == 204
        assert client.get(f"/api/sessions/{session_id}").status_code == 404
        assert client.delete(f"/api/sessions/{session_id}").status_code == 404
        assert client.get("/api/sessions").json()["items"] == []


def test_cancel_stops_a_running_session_and_is_idempotent(host: HostProcess, owner: str) -> None:
    services = host.services()
    try:
        session_id = park_session(services, owner)
    finally:
        services.close()
    with host.client(owner) as client:
        first = client.post(f"/api/sessions/{session_id}/cancel")
        assert first.status_code == 200, first.text
        assert first.json()["status"] == "cancelled"
        again = client.post(f"/api/sessions/{session_id}/cancel")
        assert again.status_code == 200 and again.json()["status"] == "cancelled"
        # Feedback needs a draft; a cancelled session without one refuses it with 409.
        assert client.post(f"/api/sessions/{session_id}/feedback", json={"feedback": "more"}).status_code == 409


def test_draft_is_a_409_problem_until_there_is_one(host: HostProcess, owner: str) -> None:
    services = host.services()
    try:
        session_id = park_session(services, owner)
    finally:
        services.close()
    with host.client(owner) as client:
        response = client.get(f"/api/sessions/{session_id}/draft")
        assert response.status_code == 409
        assert response.headers["content-type"].startswith("application/problem+json")
        problem = response.json()
        assert problem["status"] == 409 and problem["title"] and problem["detail"]


def test_list_is_newest_first_and_paged_with_a_next_link(host: HostProcess, owner: str) -> None:
    services = host.services()
    try:
        ids = [park_session(services, owner, status="cancelled", topic=f"Topic {i}") for i in range(3)]
    finally:
        services.close()
    with host.client(owner) as client:
        first = client.get("/api/sessions", params={"limit": 2})
        assert first.status_code == 200
        page = first.json()
        assert [item["id"] for item in page["items"]] == [ids[2], ids[1]]
        assert page["continuation"] and page["next"].startswith("/api/sessions?")
        assert 'rel="next"' in first.headers["Link"]
        second = client.get(page["next"]).json()
        assert [item["id"] for item in second["items"]] == [ids[0]]
        assert second["continuation"] is None and second["next"] is None


def test_health_needs_no_principal(host: HostProcess) -> None:
    with httpx.Client(base_url=host.base_url) as client:
        response = client.get("/api/health")
    assert response.status_code == 200
    assert response.json()["status"] == "ok"


def test_unexpected_errors_are_a_500_problem_without_internals() -> None:
    from blogwriter import http_api
    from blogwriter.errors import ConfigurationError

    def broken(services: Any, owner: str, request: http_api.ApiRequest) -> http_api.ApiResponse:
        raise RuntimeError("secret detail at /srv/keys")

    def no_services() -> Any:
        raise ConfigurationError("COSMOS_CONNECTION points at secret-host")

    class Fake:
        settings = type("S", (), {"allow_anonymous": True, "owner": "local"})()

    for handler, factory in ((broken, lambda: Fake()), (http_api.get_session, no_services)):
        response = http_api.respond(handler, http_api.ApiRequest("GET", "/api/x"), factory)
        assert response.status == 500 and response.mimetype == "application/problem+json"
        body = response.json()
        assert "secret" not in response.body.decode() and body["instance"].startswith("urn:uuid:")
